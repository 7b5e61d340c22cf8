import { describe, expect, it } from 'vitest';
import { compose, ok, type ToolContext, type ToolMiddleware } from '../src/index.js';

// compose() is exercised here directly, as koa-compose's own suite does; register.test.ts proves the
// same behaviour through a real client.
const ctx = {} as ToolContext;
const done = async () => ok({ from: 'handler' });

describe('compose', () => {
  it('should work: runs in onion order, first listed outermost', async () => {
    const order: string[] = [];
    const mark =
      (name: string): ToolMiddleware =>
      async (_ctx, next) => {
        order.push(`${name} in`);
        const result = await next();
        order.push(`${name} out`);
        return result;
      };
    const result = await compose([mark('a'), mark('b'), mark('c')])(ctx, async () => {
      order.push('handler');
      return done();
    });
    expect(order).toEqual(['a in', 'b in', 'c in', 'handler', 'c out', 'b out', 'a out']);
    expect(result.structuredContent).toEqual({ ok: true, from: 'handler' });
  });

  it('should short-circuit when a middleware does not call next()', async () => {
    let reached = false;
    const result = await compose([
      async () => ok({ from: 'guard' }),
      async (_c, next) => {
        reached = true;
        return next();
      },
    ])(ctx, done);
    expect(reached).toBe(false);
    expect(result.structuredContent).toEqual({ ok: true, from: 'guard' });
  });

  it('should throw if next() is called multiple times', async () => {
    const twice: ToolMiddleware = async (_ctx, next) => {
      await next();
      return next();
    };
    await expect(compose([twice])(ctx, done)).rejects.toThrow('next() called multiple times');
  });

  it('should throw if next() is called multiple times even with NODE_ENV=production', async () => {
    const previous = process.env.NODE_ENV;
    process.env.NODE_ENV = 'production';
    try {
      const twice: ToolMiddleware = async (_ctx, next) => {
        await next();
        return next();
      };
      await expect(compose([twice])(ctx, done)).rejects.toThrow('next() called multiple times');
    } finally {
      process.env.NODE_ENV = previous;
    }
  });

  it('should catch downstream errors', async () => {
    const seen: string[] = [];
    const catcher: ToolMiddleware = async (_ctx, next) => {
      try {
        return await next();
      } catch (error) {
        seen.push((error as Error).message);
        return ok({ recovered: true });
      }
    };
    const thrower: ToolMiddleware = async () => {
      throw new Error('boom');
    };
    const result = await compose([catcher, thrower])(ctx, done);
    expect(seen).toEqual(['boom']);
    expect(result.structuredContent).toEqual({ ok: true, recovered: true });
  });

  it('should turn a synchronous throw into a rejection', async () => {
    const sync = (() => {
      throw new Error('sync boom');
    }) as unknown as ToolMiddleware;
    const composed = compose([sync]);
    let returned: unknown;
    expect(() => {
      returned = composed(ctx, done);
    }).not.toThrow();
    await expect(returned).rejects.toThrow('sync boom');
  });

  it('should reject a synchronous throw from the final next', async () => {
    await expect(
      compose([])(ctx, () => {
        throw new Error('final');
      }),
    ).rejects.toThrow('final');
  });

  it('should call the final next when the stack is empty', async () => {
    const result = await compose([])(ctx, done);
    expect(result.structuredContent).toEqual({ ok: true, from: 'handler' });
  });

  it('should nest: a composition is itself a middleware', async () => {
    const order: string[] = [];
    const tag =
      (name: string): ToolMiddleware =>
      (_ctx, next) => {
        order.push(name);
        return next();
      };
    await compose([tag('outer'), compose([tag('inner-1'), tag('inner-2')])])(ctx, done);
    expect(order).toEqual(['outer', 'inner-1', 'inner-2']);
  });

  it('should only accept an array of functions', () => {
    expect(() => compose('nope' as unknown as ToolMiddleware[])).toThrow('must be an array');
    expect(() => compose([1 as unknown as ToolMiddleware])).toThrow('middleware[0] is not a function');
  });
});

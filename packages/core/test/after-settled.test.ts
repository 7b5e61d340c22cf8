import { describe, expect, it } from 'vitest';
import { afterSettled, callNext, ok, type ToolMiddleware, type ToolResult } from '../src/index.js';
import { countAnswerHops } from '../src/testing.js';

describe('afterSettled: a middleware that observes the outcome beside the chain', () => {
  it('runs its handler before the caller sees the outcome, which stays the promise it was given', async () => {
    const order: string[] = [];
    const pending = Promise.resolve(ok({ n: 1 }) as ToolResult);
    afterSettled(
      pending,
      () => order.push('observed'),
      () => order.push('error'),
    );
    await pending.then(() => order.push('caller'));
    expect(order).toEqual(['observed', 'caller']);
  });

  it('sees a rejection without handling it for the caller, and a throwing handler goes to onFault only', async () => {
    const faults: unknown[] = [];
    const seen: unknown[] = [];
    const failing = Promise.reject(new Error('down'));
    afterSettled(
      failing,
      () => undefined,
      (error) => {
        seen.push(error);
        throw new Error('observer broke');
      },
      (fault) => faults.push(fault),
    );
    await expect(failing).rejects.toThrow('down');
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toHaveLength(1);
    expect((faults[0] as Error).message).toBe('observer broke');
    // A throwing success handler changes nothing either.
    const fine = Promise.resolve(ok({ n: 2 }) as ToolResult);
    afterSettled(
      fine,
      () => {
        throw new Error('again');
      },
      () => undefined,
      (fault) => faults.push(fault),
    );
    await expect(fine).resolves.toMatchObject({ structuredContent: { n: 2 } });
    await new Promise((resolve) => setImmediate(resolve));
    expect(faults).toHaveLength(2);
  });

  it('adds no microtask hop to a tools/call round trip, where a .then adds one', async () => {
    const observed: string[] = [];
    const beside: ToolMiddleware = (_ctx, next) => {
      const pending = callNext(next);
      afterSettled(
        pending,
        (result) => observed.push(result.isError ? 'failure' : 'success'),
        () => observed.push('threw'),
      );
      return pending;
    };
    const inChain: ToolMiddleware = (_ctx, next) =>
      callNext(next).then((result) => {
        observed.push('in chain');
        return result;
      });
    const none = await countAnswerHops([]);
    expect(await countAnswerHops([beside, beside, beside])).toBe(none);
    expect(await countAnswerHops([inChain, inChain])).toBe(none + 2);
    expect(observed.filter((entry) => entry === 'success')).toHaveLength(15);
  });

  it("answers an async handler in one hop more than a sync one: its own promise's, none of core's", async () => {
    const sync = await countAnswerHops([]);
    // The handler's promise is raced against abandonment (abandonAfterMs) inside its own reaction: a
    // race awaited by an async frame took two hops more than a sync handler, one of them core's.
    expect(await countAnswerHops([], { handler: 'async' })).toBe(sync + 1);
    expect(await countAnswerHops([], { handler: 'async', abandonAfterMs: false })).toBe(sync + 1);
    expect(await countAnswerHops([], { handler: 'async', abandonAfterMs: 50 })).toBe(sync + 1);
  });
});

import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  afterSettled,
  callNext,
  createSettleable,
  defineTool,
  fail,
  mapSettled,
  ok,
  type ToolMiddleware,
  type ToolResult,
} from '../src/index.js';
import { countAnswerHops, parseResultText, serveTools } from '../src/testing.js';

const result = (n: number): ToolResult => ok({ n }) as ToolResult;
const nOf = (answer: ToolResult): number => (answer.structuredContent as { n: number }).n;

/** A middleware whose after-call step adds `add` to the data (mapSettled, or a plain `.then`). */
function adding(add: number, via: 'mapSettled' | 'then', seen?: number[]): ToolMiddleware {
  const step = (answer: ToolResult): ToolResult => {
    seen?.push(add);
    return ok({ n: nOf(answer) + add }) as ToolResult;
  };
  return (_ctx, next) =>
    via === 'mapSettled'
      ? mapSettled(callNext(next), step, (error) => Promise.reject(error))
      : callNext(next).then(step);
}

const numberTool = defineTool({
  name: 'number',
  description: 'Answers n.',
  input: { n: z.number() },
  output: { n: z.number() },
  handler: ({ n }) => ok({ n }),
});

describe('mapSettled: after-call steps stacked in one pass', () => {
  it('gives each step what the step below answered, inner first, as .then does', async () => {
    const seen: number[] = [];
    const client = await serveTools([numberTool], {
      middleware: [
        adding(100, 'mapSettled', seen),
        adding(10, 'mapSettled', seen),
        adding(1, 'mapSettled', seen),
      ],
    });
    try {
      const answer = await client.callTool('number', { n: 0 });
      expect(parseResultText(answer as ToolResult)).toMatchObject({ n: 111 });
      expect(seen).toEqual([1, 10, 100]);
    } finally {
      await client.close();
    }
  });

  it('answers in one hop however many steps are stacked, where each .then adds one', async () => {
    const none = await countAnswerHops([]);
    const stacked = [adding(1, 'mapSettled'), adding(2, 'mapSettled'), adding(3, 'mapSettled')];
    expect(await countAnswerHops(stacked)).toBe(none + 1);
    const thens = [adding(1, 'then'), adding(2, 'then'), adding(3, 'then')];
    expect(await countAnswerHops(thens)).toBe(none + 3);
    // An observer between two steps does not split the stack.
    const observer: ToolMiddleware = (_ctx, next) => {
      const pending = callNext(next);
      afterSettled(
        pending,
        () => undefined,
        () => undefined,
      );
      return pending;
    };
    expect(await countAnswerHops([adding(1, 'mapSettled'), observer, adding(2, 'mapSettled')])).toBe(
      none + 1,
    );
  });

  it('passes a thrown error up to the next step, which may answer it, and reports no unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      const source = Promise.resolve(result(1));
      const middle = mapSettled(
        source,
        () => {
          throw new Error('inner step broke');
        },
        (error) => Promise.reject(error),
      );
      const outer = mapSettled(
        middle,
        (answer) => answer,
        (error) => fail('internal', `mapped: ${(error as Error).message}`),
      );
      const answer = await outer;
      expect(answer.isError).toBe(true);
      expect(JSON.stringify(answer.content)).toContain('mapped: inner step broke');
      await expect(middle).rejects.toThrow('inner step broke');
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('holds the steps above a step that answers a promise until it settles', async () => {
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const inner = mapSettled(
      Promise.resolve(result(1)),
      (answer) =>
        gate.then(() => {
          order.push('inner settled');
          return answer;
        }),
      (error) => Promise.reject(error),
    );
    const outer = mapSettled(
      inner,
      (answer) => {
        order.push('outer');
        return ok({ n: nOf(answer) + 1 }) as ToolResult;
      },
      (error) => Promise.reject(error),
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual([]);
    release();
    expect(nOf(await outer)).toBe(2);
    expect(order).toEqual(['inner settled', 'outer']);
  });

  it('treats an answer whose then-getter throws as a thrown error, and never hangs', async () => {
    const hostile = new Proxy(
      {},
      {
        get(_target, key) {
          if (key === 'then') throw new Error('trap');
          return undefined;
        },
      },
    ) as ToolResult;
    const stepped = mapSettled(
      Promise.resolve(result(1)),
      () => hostile,
      (error) => Promise.reject(error),
    );
    await expect(stepped).rejects.toThrow('trap');
  });

  it('starts a stack of its own on a promise that is not the last step (one hop, .then semantics)', async () => {
    const first = mapSettled(
      Promise.resolve(result(1)),
      (answer) => answer,
      (error) => Promise.reject(error),
    );
    // Another call's step in between: `first` is no longer the last step made.
    const other = mapSettled(
      Promise.resolve(result(5)),
      (answer) => answer,
      (error) => Promise.reject(error),
    );
    const second = mapSettled(
      first,
      (answer) => ok({ n: nOf(answer) + 1 }) as ToolResult,
      (error) => Promise.reject(error),
    );
    expect(nOf(await second)).toBe(2);
    expect(nOf(await other)).toBe(5);
    // And onto a stack that already ran.
    const late = mapSettled(
      second,
      (answer) => ok({ n: nOf(answer) * 10 }) as ToolResult,
      (error) => Promise.reject(error),
    );
    expect(nOf(await late)).toBe(20);
  });
});

describe('createSettleable: an answer its middleware settles itself', () => {
  it('runs the steps stacked on it inside settle, once', async () => {
    const settleable = createSettleable();
    const seen: string[] = [];
    const outer = mapSettled(
      settleable.promise,
      (answer) => {
        seen.push('step');
        return ok({ n: nOf(answer) + 1 }) as ToolResult;
      },
      (error) => Promise.reject(error),
    );
    settleable.settle(result(41));
    // Synchronously: the step ran inside settle.
    expect(seen).toEqual(['step']);
    settleable.settle(result(0));
    expect(nOf(await outer)).toBe(42);
    expect(nOf(await settleable.promise)).toBe(41);
  });

  it('settled with a promise: the steps wait for it, a rejection reaches them as an error', async () => {
    const settleable = createSettleable();
    const outer = mapSettled(
      settleable.promise,
      (answer) => answer,
      (error) => fail('unavailable', `saw: ${(error as Error).message}`),
    );
    settleable.settle(Promise.reject(new Error('late failure')));
    const answer = await outer;
    expect(JSON.stringify(answer.content)).toContain('saw: late failure');
  });
});

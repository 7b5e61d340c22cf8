import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  afterSettled,
  callNext,
  createSilentLogger,
  defineTool,
  ok,
  registerTools,
  type ToolMiddleware,
  type ToolResult,
} from '../src/index.js';
import { connectTestClient } from '../src/testing.js';

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
    // Hops counted by a chain of microtasks from the handler's return until the client has the answer.
    const hopsWith = async (middleware: ToolMiddleware[]): Promise<number> => {
      let hops = 0;
      let counting = false;
      const count = (): void => {
        if (!counting) return;
        hops += 1;
        queueMicrotask(count);
      };
      const echo = defineTool({
        name: 'echo',
        description: 'Echo.',
        input: { q: z.string() },
        handler: ({ q }) => {
          hops = 0;
          counting = true;
          queueMicrotask(count);
          return ok({ q });
        },
      });
      const server = new McpServer({ name: 'hops', version: '1.0.0' });
      registerTools(server, [echo], { middleware, logger: createSilentLogger() });
      const client = await connectTestClient(server);
      const counts: number[] = [];
      for (let i = 0; i < 5; i += 1) {
        await client.callTool('echo', { q: `v${i}` });
        counting = false;
        counts.push(hops);
      }
      await client.close();
      return Math.min(...counts);
    };
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
    const none = await hopsWith([]);
    expect(await hopsWith([beside, beside, beside])).toBe(none);
    expect(await hopsWith([inChain, inChain])).toBe(none + 2);
    expect(observed.filter((entry) => entry === 'success')).toHaveLength(15);
  });
});

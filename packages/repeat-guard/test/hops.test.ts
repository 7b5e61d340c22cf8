import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, defineTool, ok, registerTools, type ToolMiddleware } from '@toolgate/core';
import { connectTestClient } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRepeatGuard } from '../src/index.js';

/**
 * Microtask hops from the handler's return until the client has the answer (the fewest of 5 calls):
 * each hop a policy adds delays every answer, and over HTTP the SDK's Node adapter sends the answer in
 * one write only when it comes within a few hops (bench/PROFILE.md, session 26).
 */
async function answerHops(middleware: ToolMiddleware[]): Promise<number> {
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
}

describe('repeat-guard on the answer path', () => {
  it('remembers a call beside the chain: the answer comes in as few hops as with no policy', async () => {
    const guard = createRepeatGuard();
    expect(await answerHops([guard])).toBe(await answerHops([]));
    // It did remember: the same call again is answered from memory.
    const again = createRepeatGuard({ threshold: 2, onRepeat: 'cached' });
    let runs = 0;
    const counting: ToolMiddleware = (_ctx, next) => {
      runs += 1;
      return next();
    };
    const server = new McpServer({ name: 'remember', version: '1.0.0' });
    registerTools(
      server,
      [
        defineTool({
          name: 'echo',
          description: 'Echo.',
          input: { q: z.string() },
          handler: ({ q }) => ok({ q }),
        }),
      ],
      {
        middleware: [again, counting],
        logger: createSilentLogger(),
      },
    );
    const client = await connectTestClient(server);
    await client.callTool('echo', { q: 'same' });
    const second = await client.callTool('echo', { q: 'same' });
    expect(runs).toBe(1);
    expect(second.isError).not.toBe(true);
    await client.close();
  });
});

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, defineTool, ok, registerTools, type ToolMiddleware } from '@toolgate/core';
import { connectTestClient, countAnswerHops } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRepeatGuard } from '../src/index.js';

describe('repeat-guard on the answer path', () => {
  it('remembers a call beside the chain: the answer comes in as few hops as with no policy', async () => {
    const guard = createRepeatGuard();
    expect(await countAnswerHops([guard])).toBe(await countAnswerHops([]));
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

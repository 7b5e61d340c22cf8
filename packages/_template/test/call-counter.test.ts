import { defineTool, ok, type ToolContext, type ToolMiddleware } from '@toolgate/core';
import { serveTools, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createCallCounter } from '../src/index.js';

const search = defineTool({
  name: 'search',
  description: 'Searches.',
  input: { q: z.string() },
  handler: ({ q }) => ok({ q }),
});

function decisionsOf(seen: ToolContext[]): ToolMiddleware {
  return async (ctx, next) => {
    try {
      return await next();
    } finally {
      seen.push(ctx);
    }
  };
}

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

describe('createCallCounter', () => {
  it('records a decision on every n-th call of a caller to a tool', async () => {
    const seen: ToolContext[] = [];
    client = await serveTools([search], { middleware: [decisionsOf(seen), createCallCounter({ every: 2 })] });
    for (const q of ['a', 'b', 'c', 'd']) await client.callTool('search', { q });
    expect(seen.map((ctx) => ctx.decisions)).toEqual([
      [],
      [{ by: 'call-counter', action: 'note', detail: { count: 2 } }],
      [],
      [{ by: 'call-counter', action: 'note', detail: { count: 4 } }],
    ]);
  });

  it('passes refused arguments and opted-out tools on without counting them', async () => {
    const seen: ToolContext[] = [];
    const counter = createCallCounter({ every: 1, tools: { search: false } });
    client = await serveTools([search], { middleware: [decisionsOf(seen), counter] });
    await client.callTool('search', { q: 'a' });
    await client.callTool('search', { q: 7 });
    expect(seen.map((ctx) => ctx.decisions)).toEqual([[], []]);
    expect(counter.counts()).toBe(0);
  });

  it('refuses bad options when created, naming where', () => {
    expect(() => createCallCounter({ every: 0 })).toThrow(
      'createCallCounter: every must be a positive integer',
    );
    expect(() => createCallCounter({ tools: { search: { every: 1.5 } } })).toThrow(
      'createCallCounter: tools.search: every must be a positive integer',
    );
  });
});

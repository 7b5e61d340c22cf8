// Cost of the middleware per call against a bare core chain, through real SDK round trips.
// Run: pnpm --filter @toolgate/_template bench (copy this and `bench/` of a real package).
import { createSilentLogger, defineTool, ok } from '@toolgate/core';
import { serveTools } from '@toolgate/core/testing';
import * as z from 'zod';
import { createCallCounter } from '../src/index.js';

const tool = defineTool({
  name: 'search',
  description: 'Searches.',
  input: { q: z.string() },
  handler: ({ q }) => ok({ q }),
});

async function measure(label: string, calls: number, withCounter: boolean): Promise<number> {
  const client = await serveTools([tool], {
    middleware: withCounter ? [createCallCounter()] : [],
    logger: createSilentLogger(),
  });
  for (let i = 0; i < 500; i++) await client.callTool('search', { q: `w${i}` });
  const start = performance.now();
  for (let i = 0; i < calls; i++) await client.callTool('search', { q: `q${i}` });
  const us = ((performance.now() - start) * 1000) / calls;
  await client.close();
  process.stderr.write(`${label}: ${us.toFixed(1)} µs per call\n`);
  return us;
}

const bare = await measure('core chain', 5000, false);
const counted = await measure('with call-counter', 5000, true);
process.stderr.write(`added: ${(counted - bare).toFixed(1)} µs per call\n`);

// Per-record cost of each step audit takes on a typical call, in isolation (ns per record):
//   npx tsx bench/record-parts.ts
import { hash } from 'node:crypto';
import {
  canonicalJson,
  createSecretRedactor,
  DEFAULT_SECRET_KEYS,
  defineTool,
  ok,
  SECRET_PATTERNS,
  type ToolDefinition,
} from '@toolgate/core';
import { createTestContext } from '@toolgate/core/testing';
import * as z from 'zod';
import { createShapeJson } from '../src/args-shape.js';
import { sealRecord } from '../src/chain.js';
import { captureCall } from '../src/record.js';
import { createRedactedJson } from '../src/redacted-json.js';

const N = 200_000;
const tool = defineTool({
  name: 'search_orders',
  description: 'Search orders.',
  input: { customer_email: z.string(), days: z.number(), api_key: z.string().optional() },
  handler: () => ok({ items: [] }),
});
const answer = ok({ items: [{ order_id: '4000000000007919', status: 'paid' }] }, { total: 1 });
const args = { customer_email: 'customer42@', days: 30, api_key: 'sk_live_0123456789abcdef' };
const redact = createSecretRedactor({ keys: [...DEFAULT_SECRET_KEYS], patterns: [...SECRET_PATTERNS] });
const ctx = createTestContext({
  tool: tool as unknown as ToolDefinition,
  args,
  request: { id: 1, sessionId: 'bench' },
});
const redactedJson = createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS);
const settings = {
  args: 'redacted' as const,
  redactedJson,
  shapeJson: createShapeJson(SECRET_PATTERNS),
  plainIds: true,
};
let sink: unknown;
function time(name: string, step: (i: number) => unknown): void {
  for (let i = 0; i < 20_000; i += 1) sink = step(i);
  const started = performance.now();
  for (let i = 0; i < N; i += 1) sink = step(i);
  console.log(`${name.padEnd(44)} ${(((performance.now() - started) * 1e6) / N).toFixed(0).padStart(6)} ns`);
}
const redacted = redact(args);
const captured = captureCall(ctx, answer, settings, 'chain', 65_536);
const line = sealRecord(captured, undefined, 'chain').line;
time('redact args (core createSecretRedactor)', () => redact(args));
time('canonicalJson(redacted args)', () => canonicalJson(redacted));
time('audit createRedactedJson (both in one pass)', () => redactedJson(args));
time('resultBytes: byteLength(JSON.stringify(result))', () => Buffer.byteLength(JSON.stringify(answer)));
time('sha256 of the line', () => hash('sha256', line, 'hex'));
time('captureCall (all of the above but the hash)', () =>
  captureCall(ctx, answer, settings, 'chain', 65_536),
);
time('sealRecord (line + sha256 + row)', () => sealRecord(captured, undefined, 'chain'));
time('createTestContext (bench harness, not audit)', (i) =>
  createTestContext({ tool: tool as unknown as ToolDefinition, args, request: { id: i } }),
);
void sink;

// Drives N full-stack calls (no OTel SDK) for `node --cpu-prof`: where the stack's time goes.
// npx tsx --cpu-prof --cpu-prof-dir=/tmp/prof benchmarks/profile-stack.ts [calls] [only-policy-name|none] [in flight]
// (OTEL_SDK=1 registers a real OTel SDK first)
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCallTimer } from '@toolgate/bench-harness';
import { registerOtelSdk } from '../src/otel-sdk.js';
import { coreServer, echoCall, fullStack } from './middleware.bench.js';

// OTEL_SDK=1: a real SDK registered first, as in the bench.
if (process.env.OTEL_SDK === '1') registerOtelSdk();

const calls = Number(process.argv[2] ?? 100_000);
const only = process.argv[3];
const inFlight = Math.max(1, Number(process.argv[4] ?? 1));
const dir = await mkdtemp(join(tmpdir(), 'toolgate-prof-'));
// 'none': core's empty chain, to subtract.
const stack = fullStack(join(dir, 'audit.jsonl')).filter((entry) => !only || entry.name.startsWith(only));
const client = await coreServer(stack.map((entry) => entry.middleware));
// Each call in an event-loop turn of its own, as in the bench (audit's writer runs between calls).
const call = echoCall(client);
const us = await createCallTimer()(call, calls, inFlight);
process.stderr.write(`${us.toFixed(2)} µs/call\n`);
await client.close();
for (const entry of stack) await entry.close();
await rm(dir, { recursive: true, force: true });

// One in-process bench case for an instruction count (benchmarks/instructions.ts runs it under
// valgrind's callgrind): builds the case named in argv[2] as section 1 does, makes argv[3] calls to warm
// it up, then argv[4] calls that are counted, argv[5] in flight (each call in an event-loop turn of its
// own), closes and exits. The counted calls lie between two native functions nothing else here calls:
// callgrind zeroes its counters when process.cpuUsage() enters node::CPUUsage and writes them out when
// process.resourceUsage() enters node::ResourceUsage (--zero-before, --dump-before), so the count is of
// those calls alone, in one process.
// First: the clocks are slowed before any module reads them (see time-dilation.ts). (Preloading it
// with `--import` instead, so that a worker thread would get it too, counted the bare SDK's call at
// 276.6 k instructions where imported here it counts about 161 k.)
import './time-dilation.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCallTimer } from '@toolgate/bench-harness';
import { buildCase, echoCall } from './middleware.bench.js';

const which = process.argv[2] ?? 'bare';
const warmup = Number(process.argv[3] ?? 11_000);
const calls = Number(process.argv[4] ?? 2000);
const concurrency = Math.max(1, Number(process.argv[5] ?? 1));
const dir = await mkdtemp(join(tmpdir(), 'toolgate-instr-case-'));
const { client, close } = await buildCase(which, dir);
const time = createCallTimer();
const call = echoCall(client);
// Two rounds: the timer's worker is a new closure per round, and V8 compiles it at its second round,
// which must not be the counted one.
await time(call, Math.ceil(warmup / 2), concurrency);
await time(call, Math.floor(warmup / 2), concurrency);
const started = process.hrtime.bigint();
process.cpuUsage(); // callgrind: zero the counters
await time(call, calls, concurrency);
process.resourceUsage(); // callgrind: write the counters out
// Real time per call (not the slowed clocks): how much slower than natively the process ran.
const realUs = Number(process.hrtime.bigint() - started) / 1000 / calls;
process.stderr.write(`instr-case-child: ${realUs.toFixed(1)} µs a call in real time\n`);
await close();
await rm(dir, { recursive: true, force: true });

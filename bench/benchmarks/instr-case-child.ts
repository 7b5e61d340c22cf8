// One in-process bench case for an instruction count (benchmarks/instructions.ts runs it under
// valgrind's callgrind): builds the case named in argv[2] as section 1 does, makes argv[3] calls with
// argv[4] in flight (each in an event-loop turn of its own), closes and exits. Nothing is timed here:
// the count of two runs that differ only in their number of calls gives the instructions per call.
// First: the clocks are slowed before any module reads them (see time-dilation.ts).
import './time-dilation.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCallTimer } from '@toolgate/bench-harness';
import { buildCase, echoCall } from './middleware.bench.js';

const which = process.argv[2] ?? 'bare';
const calls = Number(process.argv[3] ?? 1000);
const concurrency = Math.max(1, Number(process.argv[4] ?? 1));
const dir = await mkdtemp(join(tmpdir(), 'toolgate-instr-case-'));
const { client, close } = await buildCase(which, dir);
const started = process.hrtime.bigint();
await createCallTimer()(echoCall(client), calls, concurrency);
// Real time per call (not the slowed clocks): how much slower than natively the process ran.
const realUs = Number(process.hrtime.bigint() - started) / 1000 / calls;
process.stderr.write(`instr-case-child: ${realUs.toFixed(1)} µs a call in real time\n`);
await close();
await rm(dir, { recursive: true, force: true });

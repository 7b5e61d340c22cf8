// Development only: where the full stack's per-call allocations come from. Samples every allocation
// (collected ones included) with V8's sampling heap profiler over N in-process full-stack calls and
// prints the allocating functions by bytes. npx tsx benchmarks/heap-sample.ts [calls] [only-policy-name]
import { mkdtemp, rm } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { coreServer, echoCall, fullStack } from './middleware.bench.js';

const calls = Number(process.argv[2] ?? 20_000);
const only = process.argv[3];
const dir = await mkdtemp(join(tmpdir(), 'toolgate-heap-'));
const stack = fullStack(join(dir, 'audit.jsonl')).filter((entry) => !only || entry.name.startsWith(only));
const client = await coreServer(only === 'none' ? [] : stack.map((entry) => entry.middleware));
// Each call in an event-loop turn of its own, as in the bench: audit's writer seals and writes inside the window.
const call = echoCall(client);
for (let i = 0; i < 5_000; i += 1) await call(i);
const session = new Session();
session.connect();
await session.post('HeapProfiler.startSampling', {
  samplingInterval: 512,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
for (let i = 0; i < calls; i += 1) await call(5_000 + i);
const { profile } = await session.post('HeapProfiler.stopSampling');
interface Node {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: Node[];
}
const bySite = new Map<string, number>();
let total = 0;
const nameOf = (node: Node): string => {
  const frame = node.callFrame;
  const url = frame.url.replace(/.*node_modules\//, '').replace(/.*\/packages\//, '');
  return `${frame.functionName || '(anonymous)'} ${url}:${frame.lineNumber + 1}`;
};
// A builtin (no script) is named with its caller: "delete :0" alone does not say whose Map it was.
const walk = (node: Node, parent: string): void => {
  const own = nameOf(node);
  const site = node.callFrame.url === '' && node.callFrame.lineNumber <= 0 ? `${own} < ${parent}` : own;
  total += node.selfSize;
  if (node.selfSize > 0) bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
  for (const child of node.children) walk(child, own);
};
walk((profile as unknown as { head: Node }).head, '');
process.stdout.write(`${(total / calls).toFixed(0)} sampled bytes per call\n`);
for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.TOP ?? 50))) {
  process.stdout.write(`${(bytes / calls).toFixed(0).padStart(6)} B/call  ${site}\n`);
}
await client.close();
for (const entry of stack) await entry.close();
await rm(dir, { recursive: true, force: true });

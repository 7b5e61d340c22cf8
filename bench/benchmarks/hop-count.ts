// Development only: microtask hops each policy of the bench's full stack adds to a tools/call answer,
// alone and together (core's countAnswerHops, fresh policy instances per count so repeat-guard never
// answers from an earlier count), through a sync and an async handler. Over HTTP, the SDK's Node
// adapter writes a response in one go only within a few hops (bench/PROFILE.md, session 26).
// npx tsx benchmarks/hop-count.ts
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { countAnswerHops } from '@toolgate/core/testing';
import { fullStack } from './middleware.bench.js';

const dir = await mkdtemp(join(tmpdir(), 'hops-'));
let n = 0;
const fresh = () => fullStack(join(dir, `a${n++}.jsonl`));
const count = async (pick: (name: string) => boolean, handler: 'sync' | 'async') => {
  const stack = fresh();
  const hops = await countAnswerHops(
    stack.filter((e) => pick(e.name)).map((e) => e.middleware),
    { handler },
  );
  for (const e of stack) await e.close();
  return hops;
};
for (const handler of ['sync', 'async'] as const) {
  const none = await countAnswerHops([], { handler });
  const out: string[] = [`${handler}: empty ${none}`];
  for (const entry of fresh())
    out.push(`${entry.name.split(' ')[0]} +${(await count((name) => name === entry.name, handler)) - none}`);
  out.push(`full +${(await count(() => true, handler)) - none}`);
  for (const skip of ['audit', 'redact-errors', 'circuit-breaker'])
    out.push(`full-minus-${skip} +${(await count((name) => !name.startsWith(skip), handler)) - none}`);
  process.stderr.write(`${out.join(', ')}\n`);
}

// Promises created per tools/call round trip (client and server, in process), per configuration: an
// async hook counts PROMISE inits. Each one also costs an async-hooks callback when an OpenTelemetry
// context manager is active, so the chain should not add many over the bare SDK.
// npx tsx benchmarks/count-promises.ts
import { createHook } from 'node:async_hooks';
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestClient } from '@toolgate/core/testing';
import { bareServer, coreServer, fullStack } from './middleware.bench.js';

const dir = await mkdtemp(join(tmpdir(), 'toolgate-count-'));
let promises = 0;
createHook({
  init(_id, type) {
    if (type === 'PROMISE') promises += 1;
  },
}).enable();
const clients: [string, TestClient][] = [
  ['bare', await bareServer()],
  ['empty', await coreServer([])],
  ['full', await coreServer(fullStack(join(dir, 'f.jsonl')).map((entry) => entry.middleware))],
];
for (const entry of fullStack(join(dir, 'a.jsonl')))
  clients.push([entry.name, await coreServer([entry.middleware])]);
let k = 0;
for (const [name, client] of clients) {
  for (let i = 0; i < 200; i += 1) {
    k += 1;
    await client.callTool('echo', { q: `v${k}` });
  }
  const before = promises;
  for (let i = 0; i < 1000; i += 1) {
    k += 1;
    await client.callTool('echo', { q: `v${k}` });
  }
  process.stdout.write(`${name.padEnd(28)} ${((promises - before) / 1000).toFixed(1)} promises/call\n`);
}
rmSync(dir, { recursive: true, force: true });
process.exit(0);

// Drives one of the trivial-tool HTTP servers under autocannon while the server process runs with
// `--cpu-prof`, for where the per-request time goes over HTTP.
// npx tsx benchmarks/profile-http.ts [bare|toolgate|fastmcp] [seconds] [none|sdk] [warm-first] (profile in /tmp/prof)
import { echoLoad, startTrivialServers } from '../src/trivial-load.js';

const which = (process.argv[2] ?? 'toolgate') as 'bare' | 'toolgate' | 'fastmcp';
const seconds = Number(process.argv[3] ?? 10);
const mode = process.argv[4] ?? 'none';
// A server to load briefly first, in the same process (e.g. toolgate, so that a real OTel SDK's
// context manager is active for the profiled server too, as in the interleaved bench).
const warmFirst = process.argv[5] as 'bare' | 'toolgate' | 'fastmcp' | undefined;
const { child, urls } = await startTrivialServers(mode === 'sdk' ? 'sdk' : 'none', {
  nodeArgs: ['--cpu-prof', '--cpu-prof-dir=/tmp/prof'],
});
if (warmFirst !== undefined) await echoLoad(urls[warmFirst], 2);
const result = await echoLoad(urls[which], seconds);
process.stderr.write(`${which}: ${result.requests.average} req/s\n`);
child.kill('SIGTERM');

// The fleet: 1, 2 and 3 order-service replicas behind HAProxy (full policy stack, Redis state, audit in
// PostgreSQL), each size as a ratio of one replica measured in the same run; then the cost of one call in
// Redis commands, audit bytes and PostgreSQL writes. Standalone: `npx tsx bench/benchmarks/fleet.bench.ts`.
// Needs haproxy, redis-server/redis-cli and PostgreSQL (TEST_DATABASE_URL or the local server).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { startFleet } from '@toolgate/order-service/fleet';
import autocannon from 'autocannon';
import pg from 'pg';
import { MCP_POST_HEADERS, postToolsCall, toolsCallBody } from '../src/mcp-http.js';

const SECONDS = Number(process.env.BENCH_FLEET_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_FLEET_CONNECTIONS ?? 32);
/** Callers to spread calls over: the app allows each 120 calls a minute. */
const CALLERS = 400;
const run = randomBytes(4).toString('hex');
const tokens = Array.from({ length: CALLERS }, (_, n) => `bench-${run}-${n}-0123456789abcdef`);
const TOKENS = JSON.stringify({
  tokens: tokens.map((token, n) => ({
    token,
    clientId: 'fleet-bench',
    scopes: ['orders:read', 'orders:write', 'docs:read'],
    claims: { sub: `bench-${run}-${n}` },
  })),
});

// One counter for the process: no two calls carry the same arguments, so repeat-guard never answers one.
let k = 0;
const TOOLS = {
  search_docs: (n: number) => ({ query: `refund days ${n}` }),
  search_orders: (n: number) => ({
    customer_email: `customer${String(1 + (n % 200)).padStart(3, '0')}@`,
    days: 1 + (Math.floor(n / 200) % 90),
    limit: 1 + (Math.floor(n / 18_000) % 50),
  }),
} as const;
type ToolName = keyof typeof TOOLS;

async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => done(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** A private Redis, so its command counts are this benchmark's alone. */
async function startRedis(): Promise<{ url: string; port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  for (let tries = 0; tries < 50; tries++) {
    if (
      spawnSync('redis-cli', ['-p', String(port), 'ping'])
        .stdout?.toString()
        .trim() === 'PONG'
    )
      break;
    await new Promise((done) => setTimeout(done, 100));
  }
  return { url: `redis://127.0.0.1:${port}`, port, child };
}

function commandStats(port: number): Map<string, number> {
  const text = spawnSync('redis-cli', ['-p', String(port), 'info', 'commandstats']).stdout.toString();
  const stats = new Map<string, number>();
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) stats.set(match[1]!, Number(match[2]));
  return stats;
}

function statsDelta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const delta = new Map<string, number>();
  for (const [name, calls] of after) {
    const n = calls - (before.get(name) ?? 0) - (name === 'info' ? 1 : 0);
    if (n > 0) delta.set(name, n);
  }
  return delta;
}

/** CPU seconds (user + system) a process has used, from /proc. */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

interface Run {
  okRps: number;
  p50: number;
  p99: number;
  failed: number;
  cpuPerReplica: number;
}

async function cannon(url: string, tool: ToolName, pids: number[]): Promise<Run> {
  let ok = 0;
  let failed = 0;
  let firstFailure = '';
  const cpuBefore = pids.map(cpuSeconds);
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: SECONDS,
    method: 'POST',
    headers: MCP_POST_HEADERS as Record<string, string>,
    requests: [
      {
        setupRequest: (request) => {
          k += 1;
          return {
            ...request,
            headers: { ...request.headers, authorization: `Bearer ${tokens[k % CALLERS]}` },
            body: toolsCallBody(k, tool, TOOLS[tool](k)),
          };
        },
        onResponse: (status, body) => {
          if (status === 200 && body.includes('"result"') && !body.includes('"isError":true')) ok += 1;
          else {
            if (failed === 0) firstFailure = `${status} ${JSON.stringify(body.slice(0, 600))}`;
            failed += 1;
          }
        },
      },
    ],
  });
  const cpu = pids.map((pid, index) => cpuSeconds(pid) - cpuBefore[index]!);
  // Failures are counted in the table; the first one's answer goes to the log, to say why.
  if (firstFailure)
    process.stderr.write(`fleet bench: ${tool} on ${pids.length}: ${failed} failed, e.g. ${firstFailure}\n`);
  return {
    okRps: ok / SECONDS,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failed: failed + result.errors + result.timeouts,
    cpuPerReplica: cpu.reduce((sum, value) => sum + value, 0) / SECONDS / pids.length,
  };
}

export async function fleetBench(): Promise<string> {
  const base = new URL(
    process.env.BENCH_DATABASE_URL ??
      process.env.TEST_DATABASE_URL ??
      'postgres://postgres@127.0.0.1:5432/test',
  );
  const name = `toolgate_fleet_bench_${run}`;
  const admin = new pg.Client({ connectionString: base.href });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(base.href);
  url.pathname = `/${name}`;
  const redis = await startRedis();
  const lines: string[] = [];
  const throughput: Record<ToolName, Run[]> = { search_docs: [], search_orders: [] };
  try {
    const sizes = (process.env.BENCH_FLEET_SIZES ?? '1,2,3').split(',').map(Number);
    for (const replicas of sizes) {
      const fleet = await startFleet({
        replicas,
        databaseUrl: url.href,
        redisUrl: redis.url,
        tokens: TOKENS,
        setupDatabase: replicas === sizes[0],
      });
      try {
        const pids = fleet.replicas.map((replica) => replica.process.pid!);
        for (const tool of Object.keys(TOOLS) as ToolName[]) {
          await cannon(fleet.url, tool, pids); // warm-up, not counted
          throughput[tool].push(await cannon(fleet.url, tool, pids));
        }
        if (replicas === sizes[0]) lines.push(...(await costPerCall(fleet.url, redis.port, url.href)));
      } finally {
        await fleet.stop();
      }
    }
  } finally {
    redis.child.kill('SIGTERM');
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
  const table = [
    '| tool | replicas | ok results/s | ratio to 1 replica | p50 ms | p99 ms | failed | CPU per replica (cores) | ok results/s per replica core |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const tool of Object.keys(TOOLS) as ToolName[]) {
    const one = throughput[tool][0]!;
    throughput[tool].forEach((r, index) => {
      table.push(
        `| ${tool} | ${index + 1} | ${r.okRps.toFixed(0)} | ${(r.okRps / one.okRps).toFixed(2)}x | ${r.p50} | ${r.p99} | ${r.failed} | ${r.cpuPerReplica.toFixed(2)} | ${(r.okRps / (index + 1) / Math.max(r.cpuPerReplica, 0.01)).toFixed(0)} |`,
      );
    });
  }
  return [
    '## Fleet (HAProxy, Redis, PostgreSQL)',
    '',
    `N order-service replicas (\`startFleet\`, full policy stack, policy state in a private redis-server, audit to`,
    `PostgreSQL, one chain per replica) behind HAProxy round robin; autocannon, ${CONNECTIONS} connections, ${SECONDS} s`,
    `per run after a warm-up, distinct arguments on every call, spread over ${CALLERS} callers. The machine has`,
    `${(await import('node:os')).cpus().length} cores shared by the replicas, HAProxy, Redis, PostgreSQL and autocannon itself,`,
    'so more replicas cannot scale linearly here: the ratio shows contention, not the design.',
    '',
    ...table,
    '',
    ...lines,
  ].join('\n');
}

/** Redis commands, audit bytes and PostgreSQL writes of one call, over N sequential calls on 1 replica. */
async function costPerCall(fleetUrl: string, redisPort: number, databaseUrl: string): Promise<string[]> {
  const N = 200;
  const auth = (n: number) => ({ authorization: `Bearer ${tokens[n % CALLERS]}` });
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const auditRows = async (): Promise<{ rows: number; bytes: number; commits: number }> => {
    const { rows } = await db.query<{ rows: string; bytes: string; commits: string }>(
      `SELECT count(*)::text AS rows, coalesce(sum(octet_length(record::text)), 0)::text AS bytes,
         (SELECT xact_commit::text FROM pg_stat_database WHERE datname = current_database()) AS commits
       FROM toolgate_audit`,
    );
    return { rows: Number(rows[0]!.rows), bytes: Number(rows[0]!.bytes), commits: Number(rows[0]!.commits) };
  };
  const measure = async (label: string, call: (n: number) => Promise<void>): Promise<string> => {
    const before = commandStats(redisPort);
    const auditBefore = await auditRows();
    for (let n = 0; n < N; n++) await call(n);
    await new Promise((done) => setTimeout(done, 500)); // the audit batch lands
    const delta = statsDelta(before, commandStats(redisPort));
    const auditAfter = await auditRows();
    const total = [...delta.values()].reduce((sum, value) => sum + value, 0);
    // The limiter's script runs SET NX, INCRBY and PTTL inside Redis: commands, not round trips.
    const roundTrips = total - 3 * (delta.get('evalsha') ?? 0) - 3 * (delta.get('eval') ?? 0);
    const perCommand = [...delta]
      .sort((a, b) => b[1] - a[1])
      .map(([name, calls]) => `${name} ${(calls / N).toFixed(2)}`)
      .join(', ');
    const records = auditAfter.rows - auditBefore.rows;
    return `| ${label} | ${(roundTrips / N).toFixed(2)} | ${(total / N).toFixed(2)} | ${perCommand} | ${(records / N).toFixed(2)} | ${((auditAfter.bytes - auditBefore.bytes) / Math.max(records, 1)).toFixed(0)} | ${((auditAfter.commits - auditBefore.commits) / N).toFixed(2)} |`;
  };
  const post = async (n: number, tool: string, args: Record<string, unknown>) => {
    k += 1;
    const answer = await postToolsCall(fleetUrl, k, tool, args, auth(n));
    return answer.response?.result as { isError?: boolean; _meta?: Record<string, unknown> } | undefined;
  };
  await new Promise((done) => setTimeout(done, 1000)); // the throughput runs' last audit batches land first
  try {
    const rows = [
      await measure('search_docs (read)', async (n) => {
        k += 1;
        await post(n, 'search_docs', TOOLS.search_docs(k));
      }),
      await measure('search_orders (read)', async (n) => {
        k += 1;
        await post(n, 'search_orders', TOOLS.search_orders(k));
      }),
      await measure('search_docs, the same call again (repeat answered from Redis)', async (n) => {
        await post(n, 'search_docs', { query: `repeat ${run}` });
      }),
      await measure('request_refund, both steps (confirmation_required, then confirmed)', async (n) => {
        const refund = { order_id: '4000000000007919', amount_cents: 1, reason: `bench ${run} ${n}` };
        const first = await post(n, 'request_refund', refund);
        const confirmation = (first?._meta?.['toolgate/confirm'] as { confirmation?: string } | undefined)
          ?.confirmation;
        await post(n, 'request_refund', { ...refund, confirmation });
      }),
    ];
    return [
      `Cost of one call on 1 replica (${N} sequential calls each; Redis \`INFO commandstats\` before and after;`,
      'PostgreSQL: audit rows and bytes of the record JSON, commits in the database, per call).',
      '',
      "Round trips are the commands sent; `commandstats` also counts the three that the rate limiter's",
      'script (`evalsha`) runs inside Redis (`set NX`, `incrby`, `pttl`).',
      '',
      '| call | Redis round trips per call | Redis commands per call | by command | audit records per call | audit bytes per record | PostgreSQL commits per call |',
      '|---|---:|---:|---|---:|---:|---:|',
      ...rows,
      '',
    ];
  } finally {
    await db.end();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  fleetBench()
    .then((text) => process.stdout.write(`${text}\n`))
    .catch((error: unknown) => {
      process.stderr.write(`fleet bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    });
}

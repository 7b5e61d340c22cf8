// 2. Over HTTP: the order-service (stateless Streamable HTTP, bearer auth, full middleware stack) vs a
// bare SDK server running the same query on the same database, under autocannon.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { benchDatabaseUrl, seedBenchDatabase } from '../src/bench-database.js';
import { MCP_POST_HEADERS, postToolsCall, toolsCallBody } from '../src/mcp-http.js';

const DURATION_S = Number(process.env.BENCH_HTTP_SECONDS ?? 10);
const CONNECTIONS = [32, 128];
const BENCH_TOKEN = 'bench-token-0123456789abcdef';

/** The k-th call's arguments: distinct for the first million, so repeat-guard never answers one. */
function argsFor(k: number): { customer_email: string; days: number; limit: number } {
  const customer = 1 + (k % 20_000);
  return {
    customer_email: `customer${customer < 1000 ? String(customer).padStart(3, '0') : customer}@`,
    days: 90,
    limit: 1 + (Math.floor(k / 20_000) % 50),
  };
}

// One counter for every run of the process: a warm-up's arguments are never sent again.
let k = 0;

async function startServers(
  databaseUrl: string,
): Promise<{ child: ChildProcess; toolgate: string; bare: string }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      fileURLToPath(new URL('./http-servers.ts', import.meta.url)),
      databaseUrl,
      BENCH_TOKEN,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const first = await new Promise<string>((resolveLine, rejectLine) => {
    createInterface({ input: child.stdout! }).once('line', resolveLine);
    child.once('exit', (code) => rejectLine(new Error(`bench servers exited with ${code}`)));
  });
  return { child, ...(JSON.parse(first) as { toolgate: string; bare: string }) };
}

interface Run {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** Successful results per second: the throughput that counts. */
  okRps: number;
  /** Results that are a policy's answer (rate_limited: the breaker's 32-call capacity), not the query's. */
  policy: number;
  failures: number;
}

async function cannon(
  url: string,
  connections: number,
  seconds: number,
  headers: Record<string, string>,
): Promise<Run> {
  let ok = 0;
  let policy = 0;
  let failed = 0;
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    method: 'POST',
    headers: { ...MCP_POST_HEADERS, ...headers },
    requests: [
      {
        setupRequest: (request) => {
          k += 1;
          return { ...request, body: toolsCallBody(k, 'search_orders', argsFor(k)) };
        },
        onResponse: (status, body) => {
          if (status !== 200 || !body.includes('"result"')) failed += 1;
          else if (!body.includes('"isError":true')) ok += 1;
          else if (body.includes('"error":"rate_limited"')) policy += 1;
          else failed += 1;
        },
      },
    ],
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    okRps: ok / seconds,
    policy,
    failures: failed + result.errors + result.timeouts,
  };
}

export async function httpBench(): Promise<string> {
  const databaseUrl = await benchDatabaseUrl();
  const orders = await seedBenchDatabase(databaseUrl, (line) => process.stderr.write(`${line}\n`));
  const servers = await startServers(databaseUrl);
  const auth = { authorization: `Bearer ${BENCH_TOKEN}` };
  try {
    // Both answer the same call with the same orders before anything is measured.
    const probe = argsFor(123_456);
    const viaToolgate = await postToolsCall(servers.toolgate, 1, 'search_orders', probe, auth);
    const viaBare = await postToolsCall(servers.bare, 1, 'search_orders', probe);
    const ids = (answer: typeof viaBare): unknown =>
      (
        answer.response?.result?.structuredContent as
          | { items?: { order_id: string }[]; total?: number }
          | undefined
      )?.items?.map((item) => item.order_id);
    if (JSON.stringify(ids(viaToolgate)) !== JSON.stringify(ids(viaBare)) || !Array.isArray(ids(viaBare))) {
      throw new Error(
        `the two servers disagree: ${viaToolgate.body.slice(0, 300)} / ${viaBare.body.slice(0, 300)}`,
      );
    }
    await cannon(servers.bare, 32, 2, {});
    await cannon(servers.toolgate, 32, 2, auth);
    const lines = [
      '| connections | server | ok results/s | req/s | p50 ms | p99 ms | requests | rate_limited | failed | ok/s ratio | p50 ratio | p99 ratio |',
      '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ];
    for (const connections of CONNECTIONS) {
      const bare = await cannon(servers.bare, connections, DURATION_S, {});
      const toolgate = await cannon(servers.toolgate, connections, DURATION_S, auth);
      lines.push(
        `| ${connections} | bare SDK (baseline) | ${bare.okRps.toFixed(0)} | ${bare.rps.toFixed(0)} | ${bare.p50} | ${bare.p99} | ${bare.requests} | ${bare.policy} | ${bare.failures} | 1.000x | 1.000x | 1.000x |`,
        `| ${connections} | order-service (toolgate) | ${toolgate.okRps.toFixed(0)} | ${toolgate.rps.toFixed(0)} | ${toolgate.p50} | ${toolgate.p99} | ${toolgate.requests} | ${toolgate.policy} | ${toolgate.failures} | ${(toolgate.okRps / bare.okRps).toFixed(3)}x | ${(toolgate.p50 / bare.p50).toFixed(3)}x | ${(toolgate.p99 / bare.p99).toFixed(3)}x |`,
      );
    }
    return [
      '## 2. Over HTTP (autocannon)',
      '',
      `\`search_orders { customer_email, days: 90, limit }\` on ${orders.toLocaleString('en')} orders (PostgreSQL), distinct arguments on`,
      `every request, ${DURATION_S} s per run, servers in a child process of their own. Baseline: the bare SDK`,
      '(McpServer + StreamableHTTPServerTransport per request, the hand-written query in a read-only',
      'transaction, no auth). order-service: `startHttpServer` (Host/Origin checks, bearer auth) and',
      '`createOrderService` (otel → audit to a file → redact-errors → repeat-guard → circuit-breaker → sqlTool).',
      "Throughput counts successful results only; calls beyond the orders-db breaker's capacity (256 in flight)",
      'would be answered at once with `rate_limited` (a policy decision, listed apart).',
      'Target: at least 90% of bare throughput.',
      '',
      ...lines,
      '',
    ].join('\n');
  } finally {
    servers.child.kill('SIGTERM');
  }
}

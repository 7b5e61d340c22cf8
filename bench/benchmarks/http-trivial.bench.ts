// 2b. Over HTTP with a trivial tool: what the stack costs when the tool itself costs nothing. The bare
// SDK, core with the full stack, and FastMCP-TS answer the same `echo { q }` over stateless Streamable
// HTTP under autocannon, first without an OTel SDK, then with a real one. Each server runs alone in a
// process of its own, as it is deployed: sharing one process (heap, garbage, JIT feedback) changes each
// server's throughput, and not alike (PROFILE.md, session 6: without an OTel SDK the bare SDK served
// 14-16% more sharing a process with the other two than alone, toolgate 2-12% more). Rounds are
// interleaved so that noise hits all alike.
import { median, medianRatio } from '@toolgate/bench-harness';
import { postToolsCall } from '../src/mcp-http.js';
import { echoLoad, startTrivialServers, type TrivialServer } from '../src/trivial-load.js';

const SECONDS = Number(process.env.BENCH_HTTP_TRIVIAL_SECONDS ?? 5);
// Three cycles of ORDERS: single rounds of one server vary by 10% and more on these machines (a
// round's ratio ranged from 0.71 to 1.22 on one of them), so the median wants many.
const ROUNDS = Number(process.env.BENCH_HTTP_TRIVIAL_ROUNDS ?? 18);
const CONNECTIONS = 32;

type ServerName = TrivialServer;
type Urls = Record<ServerName, string>;

interface Run {
  okRps: number;
  p50: number;
  p99: number;
  failures: number;
}

async function cannon(url: string, seconds: number): Promise<Run> {
  let ok = 0;
  let failed = 0;
  const result = await echoLoad(
    url,
    seconds,
    (status, body) => {
      if (status === 200 && body.includes('"result"') && !body.includes('"isError":true')) ok += 1;
      else failed += 1;
    },
    CONNECTIONS,
  );
  return {
    okRps: ok / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failures: failed + result.errors + result.timeouts,
  };
}

// Every order of the three servers, one per round: over six rounds each server runs twice in each
// position and right after each other server twice, so neither position nor what a neighbour left
// running (its garbage collector's background threads) favours any of them.
const ORDERS: readonly (readonly ServerName[])[] = [
  ['bare', 'toolgate', 'fastmcp'],
  ['toolgate', 'fastmcp', 'bare'],
  ['fastmcp', 'bare', 'toolgate'],
  ['bare', 'fastmcp', 'toolgate'],
  ['fastmcp', 'toolgate', 'bare'],
  ['toolgate', 'bare', 'fastmcp'],
];

/** Interleaved rounds, each in the next of ORDERS. */
async function measure(urls: Urls): Promise<Record<ServerName, Run[]>> {
  const runs: Record<ServerName, Run[]> = { bare: [], toolgate: [], fastmcp: [] };
  for (const name of ORDERS[0]!) await cannon(urls[name], 2); // warm-up
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const name of ORDERS[round % ORDERS.length]!) runs[name].push(await cannon(urls[name], SECONDS));
  }
  return runs;
}

async function checkAnswers(urls: Urls): Promise<void> {
  for (const [name, url] of Object.entries(urls)) {
    const answer = await postToolsCall(url, 1, 'echo', { q: 'probe' });
    const text = JSON.stringify(answer.response?.result ?? answer.body);
    if (!text.includes('probe') || text.includes('"isError":true')) {
      throw new Error(`${name} does not answer echo: ${answer.body.slice(0, 300)}`);
    }
  }
}

interface Table {
  lines: string[];
  /** Median over rounds of toolgate's throughput over the bare SDK's in the same round. */
  ratio: number;
  /** toolgate's median throughput over the bare SDK's (the rounds unpaired). */
  ratioOfMedians: number;
}

function rows(label: string, runs: Record<ServerName, Run[]>): Table {
  const names: [ServerName, string][] = [
    ['bare', 'bare SDK (baseline)'],
    ['toolgate', `toolgate full stack, ${label}`],
    ['fastmcp', 'FastMCP-TS (second baseline)'],
  ];
  const base = median(runs.bare.map((run) => run.okRps));
  const lines = names.map(([name, title]) => {
    const okRps = median(runs[name].map((run) => run.okRps));
    const p50 = median(runs[name].map((run) => run.p50));
    const p99 = median(runs[name].map((run) => run.p99));
    const failures = runs[name].reduce((sum, run) => sum + run.failures, 0);
    const each = runs[name].map((run) => run.okRps.toFixed(0)).join(', ');
    const paired = pairedRatio(runs[name], runs.bare);
    return `| ${title} | ${okRps.toFixed(0)} | ${each} | ${p50} | ${p99} | ${failures} | ${paired.toFixed(3)}x | ${(okRps / base).toFixed(3)}x |`;
  });
  return {
    lines,
    ratio: pairedRatio(runs.toolgate, runs.bare),
    ratioOfMedians: median(runs.toolgate.map((run) => run.okRps)) / base,
  };
}

/** Median of the per-round ratios: each round's figure against the baseline's in the same round. */
function pairedRatio(runs: readonly Run[], baseline: readonly Run[]): number {
  return medianRatio(
    runs.map((run) => run.okRps),
    baseline.map((run) => run.okRps),
  );
}

export async function httpTrivialBench(): Promise<string> {
  const sections: string[] = [];
  const summary: string[] = [];
  for (const [mode, label, bound] of [
    ['none', 'no OTel SDK', 0.97],
    ['sdk', 'real OTel SDK (BatchSpanProcessor)', 0.9],
  ] as const) {
    const started: Awaited<ReturnType<typeof startTrivialServers>>[] = [];
    try {
      const urls = {} as Urls;
      for (const name of ['bare', 'toolgate', 'fastmcp'] as const) {
        const server = await startTrivialServers(mode, { env: { BENCH_TRIVIAL_ONLY: name } });
        started.push(server);
        urls[name] = server.urls[name];
      }
      await checkAnswers(urls);
      const table = rows(label, await measure(urls));
      sections.push(
        `### ${label}`,
        '',
        '| server | ok results/s (median) | each round | p50 ms | p99 ms | failed | ratio (median of rounds) | ratio of medians |',
        '|---|---:|---|---:|---:|---:|---:|---:|',
        ...table.lines,
        '',
      );
      summary.push(
        `| full stack, ${label} / bare SDK throughput | ≥ ${bound.toFixed(2)}x | ${table.ratio.toFixed(3)}x (ratio of medians ${table.ratioOfMedians.toFixed(3)}x) | ${table.ratio >= bound ? 'met' : 'missed'} |`,
      );
    } finally {
      for (const server of started) server.child.kill('SIGTERM');
    }
  }
  return [
    '## 2b. Over HTTP, trivial tool (autocannon)',
    '',
    `\`echo { q }\` (returns \`{ ok: true, q }\`), distinct arguments on every request, ${CONNECTIONS} connections,`,
    `${ROUNDS} interleaved rounds of ${SECONDS} s per server, each round in another order of the three (over six rounds every`,
    'server runs twice in each position and twice right after each other server). *ratio*: the median over rounds of a',
    "server's throughput over the bare SDK's in the same round; *ratio of medians*: the two medians divided, for comparison.",
    'Stateless Streamable HTTP (a fresh McpServer and transport per POST), no auth, each server alone in a child',
    'process of its own, as deployed (sharing one process helped the bare SDK more than toolgate: PROFILE.md). bare SDK: `McpServer.registerTool`. toolgate: `registerTools` with createOtel → createAudit (file) →',
    'createRedactErrors → createAuthz({ require: {} }) → createRateLimit (memory, never reached) → createRepeatGuard →',
    'createIdempotency and createConfirm (tool not opted in) → createCircuitBreaker. FastMCP-TS: `addTool`, `httpStream`',
    'stateless. The second table runs the same three in fresh processes, each with a real OTel SDK registered and',
    "its context manager's AsyncLocalStorage turned on once (as any instrumented server has it).",
    '',
    '| target (issue 18) | bound | measured | |',
    '|---|---:|---:|---|',
    ...summary,
    '',
    ...sections,
  ].join('\n');
}

#!/usr/bin/env node
// One command for a newcomer: starts the fake carrier and the order-service (stdio, embedded data),
// drives a scripted client session, and prints each call, what the model saw and which policy acted.
// It checks its own table: any row that did not come out as expected makes it exit 1.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type CallToolResult, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { verifyAuditFile } from '@toolgate/audit';
import { type CarrierMode, startFakeCarrier } from './fake-carrier.js';

const APP_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BREAKER_RESET_MS = 1500;

interface Step {
  scenario: string;
  tool: string;
  args: Record<string, unknown>;
  carrier?: CarrierMode;
  waitMs?: number;
  /** What the model must see: 'ok' or an error code. */
  expect: string;
  /** The policy that must show in the audit record's decisions (`by:action`), if any. */
  policy?: string;
  /** Extra check on what the model saw (and on the whole result, `_meta` included). */
  check?: (seen: Record<string, unknown>, result: CallToolResult) => boolean;
  /** How the person answers the confirmation this call asks for. */
  elicit?: 'accept' | 'decline';
}

// Row 1 of the seed: a paid order of 84.07 USD.
const PAID_ORDER = '4000000000007919';
const REFUND = { order_id: PAID_ORDER, amount_cents: 1500, reason: 'arrived damaged' };

export const DEMO_STEPS: readonly Step[] = [
  {
    scenario: 'normal search',
    tool: 'search_orders',
    args: { status: 'shipped', days: 7, limit: 3 },
    expect: 'ok',
    check: (s) => (s.items as unknown[]).length === 3,
  },
  {
    scenario: 'one order by id',
    tool: 'get_order_status',
    args: { order_id: '4000000000007919' },
    expect: 'ok',
  },
  {
    scenario: 'an empty search is a success',
    tool: 'search_orders',
    args: { customer_email: 'nobody-here', days: 90 },
    expect: 'ok',
    check: (s) => (s.items as unknown[]).length === 0 && typeof s.note === 'string',
  },
  {
    scenario: 'unknown order id',
    tool: 'get_order_status',
    args: { order_id: '4000000000000001' },
    expect: 'not_found',
  },
  {
    scenario: 'bad argument, named with a hint',
    tool: 'search_orders',
    args: { status: 'lost', days: 365 },
    expect: 'invalid_argument',
  },
  {
    scenario: 'top_k of 100 clamped to 5',
    tool: 'search_docs',
    args: { query: 'refund days order', top_k: 100 },
    expect: 'ok',
    check: (s) => (s.items as unknown[]).length === 5 && String(s.note).includes('cut to 5'),
  },
  {
    scenario: 'path traversal refused',
    tool: 'search_docs',
    args: { query: 'root', path: '../../../../etc/passwd' },
    expect: 'invalid_argument',
  },
  {
    scenario: 'injection string matched literally',
    tool: 'search_orders',
    args: { customer_email: "x' OR '1'='1'; DROP TABLE orders; --", days: 90 },
    expect: 'ok',
    check: (s) => (s.items as unknown[]).length === 0,
  },
  {
    scenario: 'URL argument at a private address',
    tool: 'track_shipment',
    args: { tracking_url: 'http://169.254.169.254/latest/meta-data/' },
    expect: 'permission_denied',
    policy: 'url-allowlist:deny',
  },
  { scenario: 'carrier up', tool: 'track_shipment', args: { tracking_number: 'TRK00000004' }, expect: 'ok' },
  {
    scenario: 'carrier down (1)',
    tool: 'track_shipment',
    args: { tracking_number: 'TRK00000006' },
    carrier: 'fail',
    expect: 'unavailable',
  },
  {
    scenario: 'carrier down (2): breaker opens',
    tool: 'track_shipment',
    args: { tracking_number: 'TRK00000008' },
    expect: 'unavailable',
    policy: 'circuit-breaker:open',
  },
  {
    scenario: 'breaker open: fails fast',
    tool: 'track_shipment',
    args: { tracking_number: 'TRK00000012' },
    expect: 'unavailable',
    policy: 'circuit-breaker:short-circuit',
    check: (s) => typeof s.retryAfterMs === 'number',
  },
  {
    scenario: 'carrier back: probe closes it',
    tool: 'track_shipment',
    args: { tracking_number: 'TRK00000014' },
    carrier: 'ok',
    waitMs: BREAKER_RESET_MS + 300,
    expect: 'ok',
    policy: 'circuit-breaker:close',
  },
  {
    scenario: 'repeated identical call',
    tool: 'search_orders',
    args: { status: 'shipped', days: 7, limit: 3 },
    expect: 'ok',
    policy: 'repeat-guard:short-circuit',
    check: (s) => String(s.note).length > 0,
  },
  {
    scenario: 'internal error redacted',
    tool: 'track_shipment',
    args: { tracking_number: 'TRK00000016' },
    carrier: 'garbage',
    expect: 'internal',
    check: (s) =>
      typeof s.incidentId === 'string' && !JSON.stringify(s).match(/hunter2|carrier\.internal|\/srv\//),
  },
  {
    scenario: 'invoice through exec (no shell)',
    tool: 'render_invoice',
    args: { order_id: '4000000000007919' },
    expect: 'ok',
    check: (s) => String(s.invoice).startsWith('INVOICE'),
  },
  {
    scenario: 'refund: the person declines',
    tool: 'request_refund',
    args: REFUND,
    elicit: 'decline',
    expect: 'permission_denied',
    policy: 'confirm:declined',
  },
  {
    scenario: 'refund: the person confirms',
    tool: 'request_refund',
    args: REFUND,
    elicit: 'accept',
    expect: 'ok',
    policy: 'confirm:confirmed',
    check: (s) => s.refunded_cents === 1500,
  },
  {
    scenario: 'the same refund retried: replayed, not paid twice',
    tool: 'request_refund',
    args: REFUND,
    elicit: 'accept',
    expect: 'ok',
    policy: 'idempotency:replayed',
    check: (s, result) =>
      s.refunded_cents === 1500 &&
      (result._meta?.['toolgate/idempotency'] as { replayed?: boolean } | undefined)?.replayed === true,
  },
];

export interface DemoRow {
  n: number;
  scenario: string;
  call: string;
  seen: string;
  policy: string;
  passed: boolean;
}

export interface DemoReport {
  rows: DemoRow[];
  chain: string;
  incidentLogged: boolean;
  passed: boolean;
}

/** Runs the scripted session against a freshly spawned server and returns the table. */
export async function runDemo(): Promise<DemoReport> {
  const carrier = await startFakeCarrier();
  const dir = mkdtempSync(join(tmpdir(), 'toolgate-demo-'));
  const auditFile = join(dir, 'audit.jsonl');
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(APP_DIR, 'dist', 'main.js')],
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      CARRIER_URL: carrier.url,
      AUDIT_FILE: auditFile,
      TOOLGATE_BREAKER_RESET_MS: String(BREAKER_RESET_MS),
      LOG_LEVEL: 'warn',
    },
    stderr: 'pipe',
  });
  let serverLog = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    serverLog += chunk.toString('utf8');
  });
  // The person behind the client: answers each confirmation as the step says.
  const client = new Client(
    { name: 'toolgate-demo', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  let answer: 'accept' | 'decline' = 'decline';
  client.setRequestHandler(ElicitRequestSchema, () => ({ action: answer }));
  const seenList: Array<{
    step: Step;
    seen: Record<string, unknown>;
    outcome: string;
    result: CallToolResult;
  }> = [];
  try {
    // Generous: on a busy CI machine the server seeds its embedded database before it answers.
    await client.connect(transport, { timeout: 120_000 });
    for (const step of DEMO_STEPS) {
      if (step.carrier) carrier.mode = step.carrier;
      if (step.waitMs) await new Promise((done) => setTimeout(done, step.waitMs));
      answer = step.elicit ?? 'decline';
      const result = (await client.callTool({ name: step.tool, arguments: step.args }, undefined, {
        timeout: 60_000,
      })) as CallToolResult;
      const first = result.content[0];
      const seen = JSON.parse(first?.type === 'text' ? first.text : '{}') as Record<string, unknown>;
      seenList.push({ step, seen, outcome: seen.ok === true ? 'ok' : String(seen.error), result });
    }
  } finally {
    await client.close(); // the server flushes its audit log when stdin closes
    await carrier.close();
  }
  await waitForExit(transport);
  const records = readFileSync(auditFile, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map(
      (line) => JSON.parse(line) as { decisions?: Array<{ by: string; action: string }>; outcome: string },
    );
  const verdict = await verifyAuditFile(auditFile);
  rmSync(dir, { recursive: true, force: true });
  const rows = seenList.map(({ step, seen, outcome, result }, index) => {
    const record = records[index];
    const decisions = (record?.decisions ?? []).map((d) => `${d.by}:${d.action}`);
    const passed =
      outcome === step.expect &&
      record?.outcome === outcome &&
      (step.policy === undefined || decisions.includes(step.policy)) &&
      (step.check === undefined || step.check(seen, result));
    return {
      n: index + 1,
      scenario: step.scenario,
      call: `${step.tool} ${JSON.stringify(step.args)}`,
      seen: describeSeen(seen),
      policy: decisions.length > 0 ? [...new Set(decisions)].join(', ') : '-',
      passed,
    };
  });
  rows.push(...(await runScopeDemo(rows.length)));
  const internal = seenList.find((entry) => entry.outcome === 'internal');
  const incidentLogged = internal !== undefined && serverLog.includes(String(internal.seen.incidentId));
  const chain = verdict.intact ? `intact (${records.length} records)` : `BROKEN: ${JSON.stringify(verdict)}`;
  return {
    rows,
    chain,
    incidentLogged,
    passed:
      rows.every((row) => row.passed) &&
      verdict.intact &&
      records.length === seenList.length &&
      incidentLogged,
  };
}

const PORTAL_TOKEN = 'demo-portal-token-0123456789abcdef';

/**
 * The same server over Streamable HTTP with a customer-portal token (orders:read, docs:read, no
 * orders:write): the write tools are not listed, and calling one anyway is answered exactly like a tool
 * that does not exist.
 */
async function runScopeDemo(before: number): Promise<DemoRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'toolgate-demo-http-'));
  const auditFile = join(dir, 'audit.jsonl');
  const server = spawn(process.execPath, [join(APP_DIR, 'dist', 'main.js'), '--http', '--port', '0'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      AUDIT_FILE: auditFile,
      LOG_LEVEL: 'info',
      TOOLGATE_TOKENS: JSON.stringify({
        tokens: [{ token: PORTAL_TOKEN, clientId: 'customer-portal', scopes: ['orders:read', 'docs:read'] }],
      }),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const rows: DemoRow[] = [];
  try {
    const url = await listeningUrl(server);
    const client = new Client({ name: 'toolgate-demo-portal', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { authorization: `Bearer ${PORTAL_TOKEN}` } },
      }),
    );
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    const refused = await client
      .callTool({ name: 'request_refund', arguments: REFUND })
      .then(() => 'it ran')
      .catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
    await client.close();
    server.kill('SIGTERM');
    await new Promise((done) => server.once('exit', done));
    const records = readFileSync(auditFile, 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as { tool: string; decisions?: Array<{ by: string; action: string }> });
    const hidden = records.find((record) => record.tool === 'request_refund');
    const policy = (hidden?.decisions ?? []).map((d) => `${d.by}:${d.action}`);
    rows.push({
      n: before + 1,
      scenario: 'portal token (no orders:write): write tools not listed',
      call: 'tools/list (HTTP, bearer portal token)',
      seen: `${names.length} tools: ${names.join(', ')}`,
      policy: 'authz (per-caller list)',
      passed: names.length === 5 && !names.includes('request_refund') && !names.includes('cancel_order'),
    });
    rows.push({
      n: before + 2,
      scenario: 'portal token calls request_refund anyway',
      call: `request_refund ${JSON.stringify(REFUND)}`,
      seen: refused,
      policy: policy.length > 0 ? policy.join(', ') : '-',
      passed: refused === 'MCP error -32602: Unknown tool: request_refund' && policy.includes('authz:hide'),
    });
  } finally {
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

// The server logs one JSON line `listening` with its URL on stderr (port 0 picks a free port).
function listeningUrl(server: ChildProcess): Promise<string> {
  return new Promise((resolveUrl, reject) => {
    let buffered = '';
    const timer = setTimeout(() => reject(new Error('the HTTP server did not start within 120 s')), 120_000);
    server.stderr?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const match = /"url":"(http:[^"]+)"/.exec(buffered);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]!);
      }
    });
    server.once('exit', (code) => reject(new Error(`the HTTP server exited with ${code} before listening`)));
  });
}

function describeSeen(seen: Record<string, unknown>): string {
  if (seen.ok === true) {
    if (Array.isArray(seen.items)) {
      return `ok: ${seen.items.length} item(s)${seen.total !== undefined ? ` of ${seen.total}` : ''}${seen.note ? ` — ${seen.note}` : ''}`;
    }
    if (typeof seen.refund_id === 'string')
      return `ok: refunded ${seen.amount_cents} cents of ${seen.order_id} (${seen.refunded_cents} in all)`;
    if (typeof seen.status === 'string')
      return `ok: ${seen.status}, ${(seen.events as unknown[]).length} event(s)`;
    if (typeof seen.invoice === 'string')
      return `ok: ${seen.invoice.split('\n')[0]}, ${seen.invoice.split('\n').length - 1} lines`;
    return 'ok';
  }
  const extra = [
    seen.retryAfterMs !== undefined ? `retryAfterMs=${seen.retryAfterMs}` : '',
    seen.incidentId !== undefined ? `incident ${seen.incidentId}` : '',
  ].filter(Boolean);
  return `${seen.error}: ${seen.message}${extra.length > 0 ? ` (${extra.join(', ')})` : ''} — hint: ${seen.hint}`;
}

function waitForExit(transport: StdioClientTransport): Promise<void> {
  const pid = transport.pid;
  return new Promise((resolveWait) => {
    const started = Date.now();
    const poll = (): void => {
      let alive = false;
      try {
        if (pid !== null) process.kill(pid, 0);
        alive = pid !== null;
      } catch {
        alive = false;
      }
      if (!alive || Date.now() - started > 5000) resolveWait();
      else setTimeout(poll, 50);
    };
    poll();
  });
}

function table(rows: readonly DemoRow[]): string {
  const clip = (text: string, width: number): string =>
    text.length > width ? `${text.slice(0, width - 1)}…` : text;
  // What the model saw is never cut: the notes and hints at its end (a repeat note follows the
  // earlier result's own note) are the point of the demo.
  const lines = rows.map(
    (row) =>
      `| ${row.n} | ${row.passed ? '✓' : '✗'} ${row.scenario} | \`${clip(row.call, 70)}\` | ${row.seen.replace(/\|/g, '\\|')} | ${row.policy} |`,
  );
  return [
    '| # | scenario | call | what the model saw | policy that acted |',
    '|---|---|---|---|---|',
    ...lines,
  ].join('\n');
}

const invokedDirectly =
  process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  const report = await runDemo();
  console.log('\n## toolgate order-service demo\n');
  console.log(
    'Embedded PGlite with 10,000 seeded orders, a fake carrier on 127.0.0.1, the server over stdio.\n',
  );
  console.log(table(report.rows));
  console.log(
    `\nAudit chain: ${report.chain}. Internal error's incident id in the server log: ${report.incidentLogged ? 'yes' : 'NO'}.`,
  );
  console.log(
    report.passed ? '\nEvery row came out as expected.' : '\nSome rows did not come out as expected (✗).',
  );
  process.exit(report.passed ? 0 : 1);
}

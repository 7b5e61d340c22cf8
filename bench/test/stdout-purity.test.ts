import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { type FakeCarrier, startFakeCarrier } from '@toolgate/order-service/fake-carrier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The built CLI, found through the package (its `./package.json` export), never by a relative path.
const MAIN = join(
  dirname(createRequire(import.meta.url).resolve('@toolgate/order-service/package.json')),
  'dist',
  'main.js',
);
const CALLS = 300;

describe('stdout purity: the stdio server under load writes only JSON-RPC to stdout', () => {
  let carrier: FakeCarrier;

  beforeAll(async () => {
    carrier = await startFakeCarrier({ mode: 'ok' });
  });
  afterAll(async () => {
    await carrier?.close();
  });

  it(`${CALLS} pipelined calls (successes, failures, hostile input, an unknown tool, invoices): every stdout line is one JSON-RPC message`, async () => {
    const child = spawn(process.execPath, [MAIN], {
      // Debug logging and audit to stderr: the noisiest configuration, to prove none of it reaches stdout.
      env: { PATH: process.env.PATH, LOG_LEVEL: 'debug', CARRIER_URL: carrier.url },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolveExit) =>
      child.once('exit', (code) => resolveExit(code)),
    );
    const send = (message: object): void => {
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    };
    send({
      id: 0,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'purity', version: '0' },
      },
    });
    send({ method: 'notifications/initialized' });
    const calls: [string, Record<string, unknown>][] = [
      ['search_orders', { status: 'pending', days: 30 }],
      ['search_orders', { status: "paid'; DROP TABLE orders; --" }],
      ['get_order_status', { order_id: '4000000000007919' }],
      ['get_order_status', { order_id: '../../etc/passwd' }],
      ['search_docs', { query: 'refund days' }],
      ['search_docs', { query: 'refund', path: '../../../etc/passwd' }],
      ['track_shipment', { tracking_number: 'TRK00000042' }],
      ['track_shipment', { tracking_url: 'http://169.254.169.254/latest/meta-data/' }],
      ['no_such_tool', {}],
      ['search_orders', { status: 'pending', days: 30 }],
    ];
    for (let id = 1; id <= CALLS; id += 1) {
      // An invoice spawns a child process whose stdout must stay its own: a few of them.
      const [name, args] =
        id % 60 === 0 ? ['render_invoice', { order_id: '4000000000007919' }] : calls[id % calls.length]!;
      send({ id, method: 'tools/call', params: { name, arguments: args } });
    }
    send({ id: CALLS + 1, method: 'tools/list' });
    send({ id: CALLS + 2, method: 'resources/read', params: { uri: 'orders://schema' } });
    const deadline = Date.now() + 45_000;
    const answered = (): number => (stdout.match(/"id":\d+/g) ?? []).length;
    while (answered() < CALLS + 3 && Date.now() < deadline)
      await new Promise((resolveWait) => setTimeout(resolveWait, 50));
    child.stdin.end(); // the end of the session: the server flushes and exits
    expect(await exited).toBe(0);

    expect(stdout.endsWith('\n')).toBe(true);
    const lines = stdout.split('\n').slice(0, -1);
    const messages = lines.map(
      (line) =>
        JSON.parse(line) as { jsonrpc: string; id?: number; result?: unknown; error?: { code: number } },
    );
    expect(messages.every((message) => message.jsonrpc === '2.0')).toBe(true);
    expect(messages.map((message) => message.id).sort((a, b) => a! - b!)).toEqual(
      Array.from({ length: CALLS + 3 }, (_, id) => id),
    );
    // Only the unknown tool is a JSON-RPC error (-32602); everything else is a result.
    const errors = messages.filter((message) => message.error);
    expect(errors.map((message) => message.error!.code)).toEqual(Array(errors.length).fill(-32602));
    expect(errors).toHaveLength(
      Array.from({ length: CALLS }, (_, i) => i + 1).filter((id) => id % 60 !== 0 && id % calls.length === 8)
        .length,
    );
    // The logs and audit records went to stderr.
    expect(stderr).toContain('"tool":"search_orders"');
  }, 90_000);
});

import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const MAIN = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'main.js');

describe('stdio', () => {
  it('stdout carries nothing but JSON-RPC, even when calls fail; logs and audit go to stderr', async () => {
    const child = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        LOG_LEVEL: 'debug',
        CARRIER_URL: 'http://127.0.0.1:9',
      },
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
    const send = (message: unknown): void => {
      child.stdin.write(`${JSON.stringify(message)}\n`);
    };
    send({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const calls: Array<[string, Record<string, unknown>]> = [
      ['search_orders', { status: 'paid' }],
      ['get_order_status', { order_id: 'nope' }],
      ['track_shipment', { tracking_number: 'TRK00000001' }],
      ['search_docs', { query: 'refund' }],
      ['render_invoice', { order_id: '4000000000007919' }],
      ['no_such_tool', {}],
    ];
    calls.forEach(([name, args], index) => {
      send({ jsonrpc: '2.0', id: index + 2, method: 'tools/call', params: { name, arguments: args } });
    });
    const expected = calls.length + 2;
    await new Promise<void>((resolveWait, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out; stdout so far:\n${stdout}`)), 90_000);
      const check = (): void => {
        if (stdout.split('\n').filter((line) => line.trim() !== '').length >= expected) {
          clearTimeout(timer);
          resolveWait();
        } else setTimeout(check, 50);
      };
      check();
    });
    child.stdin.end();
    const code = await new Promise<number | null>((done) => child.on('exit', (exitCode) => done(exitCode)));
    const lines = stdout.split('\n').filter((line) => line.trim() !== '');
    expect(lines).toHaveLength(expected);
    const messages = lines.map(
      (line) =>
        JSON.parse(line) as { jsonrpc: string; id: number; result?: unknown; error?: { code: number } },
    );
    expect(messages.every((message) => message.jsonrpc === '2.0')).toBe(true);
    expect(messages.map((message) => message.id).sort((a, b) => a - b)).toEqual([...Array(expected).keys()]);
    expect(messages.find((message) => message.id === expected - 1)?.error?.code).toBe(-32602);
    // Audit records (one per call, unknown tool included) and logs went to stderr.
    expect(stderr.match(/"prevHash"/g)?.length).toBe(calls.length);
    expect(code).toBe(0);
  }, 120_000);
});

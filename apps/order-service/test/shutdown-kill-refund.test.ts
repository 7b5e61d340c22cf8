// kill -9 between a refund's COMMIT and its answer, then a restart: the process that made the refund is
// gone with its idempotency claims (the memory store) and its confirmation key. The retry, confirmed
// again on the new process, must answer with the refund already made, never pay a second one.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  expectFailure,
  type FaultProxy,
  parseResultText,
  reportMissingService,
  startFaultProxy,
} from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { APP, type ChildServer, startChildServer, waitFor } from './child-server.js';
import { createScratchDatabase, PAID, type ScratchDatabase, TEST_DATABASE_URL } from './fleet-harness.js';

const DESK = 'desk-token-0123456789abcdef';
const TOKENS = JSON.stringify({
  tokens: [
    {
      token: DESK,
      clientId: 'support-desk',
      scopes: ['orders:read', 'orders:write', 'docs:read'],
      claims: { sub: 'agent-1' },
    },
  ],
});

if (!TEST_DATABASE_URL) {
  reportMissingService(
    it,
    'the kill -9 refund test',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
}

describe.runIf(TEST_DATABASE_URL)('kill -9 after a refund was committed, before it was answered', () => {
  const servers: ChildServer[] = [];
  const clients: Client[] = [];
  let proxy: FaultProxy | undefined;
  let database: ScratchDatabase | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    for (const { child } of servers) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    await proxy?.close();
    await database?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function serve(databaseUrl: string): Promise<{ server: ChildServer; client: Client }> {
    const server = startChildServer(['--http', '--port', '0'], {
      DATABASE_URL: databaseUrl,
      CARRIER_URL: 'http://127.0.0.1:9',
      AUDIT_FILE: join(dir!, `audit-${servers.length}.jsonl`),
      TOOLGATE_TOKENS: TOKENS,
    });
    servers.push(server);
    await waitFor('the listening line', () => server.stderr().includes('"listening"'));
    const url = /"url":"([^"]+)"/.exec(server.stderr())![1]!;
    const client = new Client({ name: 'kill-test', version: '0.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { authorization: `Bearer ${DESK}` } },
      }),
    );
    clients.push(client);
    return { server, client };
  }

  /** The two-step confirmation, as a client without elicitation does it: ask, then confirm. */
  async function confirmedRefund(client: Client, args: Record<string, unknown>): Promise<CallToolResult> {
    const asked = (await client.callTool({ name: 'request_refund', arguments: args })) as CallToolResult;
    expect(expectFailure(asked).error).toBe('confirmation_required');
    const { confirmation } = asked._meta!['toolgate/confirm'] as { confirmation: string };
    return (await client.callTool({
      name: 'request_refund',
      arguments: { ...args, confirmation },
    })) as CallToolResult;
  }

  it('the retry on the restarted server answers with the refund made before the kill; one refund in all', async () => {
    database = await createScratchDatabase(TEST_DATABASE_URL!);
    const setup = spawnSync(process.execPath, [join(APP, 'dist', 'db-setup.js')], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DATABASE_URL: database.url },
      encoding: 'utf8',
    });
    expect(setup.status, setup.stderr).toBe(0);
    dir = mkdtempSync(join(tmpdir(), 'order-service-kill-refund-'));
    const target = new URL(database.url);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const viaProxy = new URL(database.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const refund = { order_id: PAID, amount_cents: 900, reason: 'arrived damaged' };
    const refunds = () =>
      database!.query<{ refund_id: string; amount_cents: number }>(
        'SELECT refund_id::text, amount_cents FROM refunds WHERE order_id = $1',
        [PAID],
      );

    const first = await serve(viaProxy.href);
    // The COMMIT reaches PostgreSQL; its answer never reaches the server, which is killed meanwhile.
    proxy.silenceAfter((chunk) => chunk.includes('COMMIT'));
    // Never answered: its client gives up when closed.
    void confirmedRefund(first.client, refund).catch(() => undefined);
    for (let poll = 0; poll < 500 && (await refunds()).length === 0; poll += 1) {
      await new Promise((done) => setTimeout(done, 20));
    }
    const [made] = await refunds();
    expect(made).toMatchObject({ amount_cents: 900 });
    first.server.child.kill('SIGKILL');
    await first.server.exited;

    const second = await serve(database.url);
    const retried = await confirmedRefund(second.client, refund);
    expect(parseResultText(retried)).toEqual({
      ok: true,
      refund_id: made!.refund_id,
      order_id: PAID,
      amount_cents: 900,
      refunded_cents: 900,
      currency: 'USD',
      status: 'paid',
    });
    expect(await refunds()).toEqual([made]);
  }, 120_000);
});

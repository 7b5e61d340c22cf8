import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectTestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Running, startService } from './harness.js';

// A success passes core's boundary unscrubbed: what a tool relays from a third party (the carrier's
// answer, the documents' lines and names) reaches the model as it is. A credential in it must not.

const CONNECTION = 'postgres://app:hunter2pw@db-7.carrier.internal:5432/x';
const STRIPE = 'sk_live_abcdefghijklmnop1234';
const GITHUB = 'ghp_abcdefghijklmnopqrstuvwxyz0123456789';

let carrierBody: unknown;
const carrier = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(carrierBody));
});
let running: Running;
let root: string;
beforeAll(async () => {
  await new Promise<void>((resolve) => carrier.listen(0, '127.0.0.1', resolve));
  root = mkdtempSync(join(tmpdir(), 'docs-secrets-'));
  writeFileSync(
    join(root, 'refund-policy.md'),
    `# Refunds\nRefunds within 30 days.\nrefund ledger: ${CONNECTION} (api_key=${STRIPE})\n`,
  );
  writeFileSync(join(root, `${GITHUB}-refund.md`), 'refund notes\n');
  running = await startService({
    transport: 'pipe',
    docsRoot: root,
    carrierUrl: `http://127.0.0.1:${(carrier.address() as AddressInfo).port}`,
  });
});
afterAll(async () => {
  await running?.stop();
  carrier.closeAllConnections();
  carrier.close();
  rmSync(root, { recursive: true, force: true });
});
const desk = {
  token: 'desk-token-0123456789',
  clientId: 'support-desk',
  scopes: ['orders:read', 'docs:read'],
  extra: { sub: 'agent-1' },
};

it('track_shipment: a credential in the carrier’s answer is redacted; the rest of the answer stays', async () => {
  carrierBody = {
    trackingNumber: 'TRK00000001',
    carrier: 'Parcelwise',
    status: 'in_transit',
    events: [
      { at: '2026-11-20T08:00:00Z', where: 'Leeds depot', what: `sorting failed: ${CONNECTION}` },
      { at: '2026-11-20T09:00:00Z', where: 'Leeds depot', what: `retry with api_key=${STRIPE}` },
    ],
  };
  const client = await connectTestClient(running.service.createServer(), { authInfo: desk });
  try {
    const result = await client.callTool('track_shipment', { tracking_number: 'TRK00000001' });
    expect(result.isError).toBeFalsy();
    const seen = JSON.stringify(result);
    expect(seen).not.toContain('hunter2pw');
    expect(seen).not.toContain(STRIPE);
    expect(result.structuredContent).toMatchObject({
      trackingNumber: 'TRK00000001',
      status: 'in_transit',
      events: [{ where: 'Leeds depot' }, { where: 'Leeds depot' }],
    });
    // An answer past the bounds is the carrier's bug: internal, nothing of it shown.
    carrierBody = { ...(carrierBody as object), status: 'x'.repeat(5000) };
    // (Another number: repeat-guard would answer the same call from its cache.)
    const oversized = await client.callTool('track_shipment', { tracking_number: 'TRK00000002' });
    expect(oversized.isError).toBe(true);
    expect(JSON.stringify(oversized)).not.toContain('xxxxxxxxxx');
  } finally {
    await client.close();
  }
});

it('search_docs: a credential in a document line or a document name is redacted', async () => {
  const client = await connectTestClient(running.service.createServer(), { authInfo: desk });
  try {
    const result = await client.callTool('search_docs', { query: 'refund', top_k: 5 });
    expect(result.isError).toBeFalsy();
    const seen = JSON.stringify(result);
    expect(seen).not.toContain('hunter2pw');
    expect(seen).not.toContain(STRIPE);
    expect(seen).not.toContain(GITHUB);
    const items = (result.structuredContent as { items: { file: string; text: string }[] }).items;
    expect(new Set(items.map((item) => item.file))).toEqual(
      new Set(['[REDACTED]-refund.md', 'refund-policy.md']),
    );
  } finally {
    await client.close();
  }
});

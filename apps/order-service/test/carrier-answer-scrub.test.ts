import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectTestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServerSecrets, serverSecretValues, urlSecrets } from '../src/server-secrets.js';
import { thirdPartyAnswer } from '../src/third-party-text.js';
import { type Running, startService } from './harness.js';

// Red team Y: a carrier key kept in CARRIER_URL (the only place for it) reached the model when the
// carrier echoed the URL it was asked for (`?key=`, `?license=`, `?appid=` and a key in the path pass
// core's generic patterns), and a carrier's successful answer passed its internals through (hosts and
// ports, file paths, SQL, stack frames). No configured secret value may reach the model; no host,
// port, path or SQL either.

const PATH_KEY = 'CARRIERKEY_Zq9xY1234';
const QUERY_KEY = 'CK1_Zq9xYabcdefghijklmnop';
const LICENSE = 'LIC-abcdefgh';
const APPID = 'plainletterskey';
const CONFIRM_SECRET = 'confirm-secret-Zq9xY-0123456789abcdefghij';
const BEARER = 'desk-token-Zq9xY-0123456789';
const SECRETS = [PATH_KEY, QUERY_KEY, LICENSE, APPID, CONFIRM_SECRET, BEARER];

type Mode = 'echo-url' | 'internals' | 'ordinary';
let mode: Mode = 'echo-url';
const ORDINARY = [
  { at: '2026-11-20T08:00:00Z', where: 'Chicago, IL', what: 'Departed facility' },
  { at: '2026-11-20 10:42', where: 'Chicago, IL 60607', what: 'Arrived at USPS Regional Facility 10:42 AM' },
  { at: '11/21/2026', where: '123 Main St, Apt 4B, Springfield, IL 62704', what: 'Out for delivery' },
  { at: '2026-11-21T16:05:00-06:00', where: 'Front Door/Porch', what: 'Delivered. Signed by J. SMITH' },
  {
    at: '2026-11-21',
    where: 'Leeds depot',
    what: 'Delivery attempted – no access to building #12 (Rm. 204)',
  },
];
const carrier = createServer((req, res) => {
  const number = (req.url ?? '').match(/TRK\d{8}/)?.[0] ?? 'TRK00000000';
  const asked = `http://${req.headers.host}${req.url}`;
  const events =
    mode === 'echo-url'
      ? [
          { at: '2026-11-20T08:00:00Z', where: `GET ${req.url}`, what: `requested ${asked}` },
          { at: '2026-11-20T08:00:01Z', where: encodeURIComponent(asked), what: JSON.stringify({ asked }) },
          // The key alone, under names no generic pattern knows, and the server's other secrets.
          {
            at: '2026-11-20T08:00:02Z',
            where: `license ${LICENSE} for app ${APPID}`,
            what: `key ${QUERY_KEY} path ${PATH_KEY} ${CONFIRM_SECRET} ${BEARER}`,
          },
        ]
      : mode === 'internals'
        ? [
            {
              at: '2026-11-20T08:00:00Z',
              where: 'db-7.carrier.internal:5432',
              what: 'Error: lookup failed at /srv/carrier/app.js:42 (127.0.0.1:47811)',
            },
            {
              at: '2026-11-20T08:00:01Z',
              where: 'Chicago, IL',
              what: 'SELECT * FROM shipments WHERE tracking_number = $1',
            },
            {
              at: '2026-11-20T08:00:02Z',
              where: 'Chicago, IL',
              what: 'TypeError: x is undefined\n    at handler (/srv/carrier/app.js:42:7)\n    at next (node:internal/x:1:1)',
            },
          ]
        : ORDINARY;
  const body = {
    trackingNumber: number,
    carrier: mode === 'echo-url' ? `Parcelwise (${asked})` : 'Parcelwise',
    status: mode === 'internals' ? 'error from 10.0.0.5:6379' : 'in_transit',
    events,
  };
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
});

let running: Running;
let root: string;
let carrierUrl: string;
const desk = {
  token: 'desk-token-0123456789',
  clientId: 'support-desk',
  scopes: ['orders:read', 'docs:read'],
  extra: { sub: 'agent-1' },
};
beforeAll(async () => {
  await new Promise<void>((resolve) => carrier.listen(0, '127.0.0.1', resolve));
  const port = (carrier.address() as AddressInfo).port;
  carrierUrl =
    `http://127.0.0.1:${port}/k/${PATH_KEY}/v1?key=${QUERY_KEY}&license=${LICENSE}` +
    `&appid=${APPID}&format=json`;
  root = mkdtempSync(join(tmpdir(), 'docs-server-secrets-'));
  writeFileSync(
    join(root, 'carrier.md'),
    `# Carrier\nThe carrier refund feed: ${carrierUrl} (key ${QUERY_KEY}, path key ${PATH_KEY}).\n`,
  );
  running = await startService({
    transport: 'pipe',
    docsRoot: root,
    carrierUrl,
    confirmSecret: CONFIRM_SECRET,
    extraSecrets: [BEARER],
  });
});
afterAll(async () => {
  await running?.stop();
  carrier.closeAllConnections();
  carrier.close();
  rmSync(root, { recursive: true, force: true });
});

let next = 100;
async function track(which: Mode): Promise<{ seen: string; structured: Record<string, unknown> }> {
  mode = which;
  const client = await connectTestClient(running.service.createServer(), { authInfo: desk });
  try {
    // A new number each time: repeat-guard would answer the same call from its cache.
    next += 1;
    const result = await client.callTool('track_shipment', {
      tracking_number: `TRK${String(next).padStart(8, '0')}`,
    });
    expect(result.isError).toBeFalsy();
    return {
      seen: JSON.stringify(result),
      structured: result.structuredContent as Record<string, unknown>,
    };
  } finally {
    await client.close();
  }
}

describe('track_shipment: a carrier answer', () => {
  it('never carries a configured secret, echoed raw, percent-encoded, JSON-escaped or alone', async () => {
    const { seen, structured } = await track('echo-url');
    for (const secret of SECRETS) {
      expect(seen).not.toContain(secret);
      expect(seen).not.toContain(encodeURIComponent(secret));
    }
    // Content text and structuredContent alike; the words around a secret stay.
    const events = structured.events as { where: string; what: string }[];
    expect(events[2]?.where).toBe('license [REDACTED] for app [REDACTED]');
    expect(events[2]?.what).toBe('key [REDACTED] path [REDACTED] [REDACTED] [REDACTED]');
    expect(structured.carrier).toMatch(/^Parcelwise \(/);
  });

  it('never carries the carrier’s hosts, ports, paths, SQL or stack frames', async () => {
    const { seen, structured } = await track('internals');
    for (const internal of [
      'db-7.carrier.internal',
      ':5432',
      '127.0.0.1',
      '47811',
      '10.0.0.5',
      '/srv/carrier',
      'app.js',
      'SELECT',
      'shipments',
      'node:internal',
      'at handler',
    ]) {
      expect(seen).not.toContain(internal);
    }
    expect(structured).toMatchObject({
      status: 'error from [host]',
      events: [
        { where: '[host]', what: 'Error: lookup failed at [path] ([host])' },
        { where: 'Chicago, IL', what: '[sql]' },
        { where: 'Chicago, IL', what: 'TypeError: x is undefined' },
      ],
    });
  });

  it('keeps ordinary tracking text as it is', async () => {
    const { structured } = await track('ordinary');
    expect(structured).toEqual({
      ok: true,
      trackingNumber: expect.stringMatching(/^TRK\d{8}$/),
      carrier: 'Parcelwise',
      status: 'in_transit',
      events: ORDINARY,
    });
  });
});

it('search_docs: a configured secret in a document line is redacted', async () => {
  const client = await connectTestClient(running.service.createServer(), { authInfo: desk });
  try {
    const result = await client.callTool('search_docs', { query: 'carrier refund feed' });
    expect(result.isError).toBeFalsy();
    const seen = JSON.stringify(result);
    for (const secret of [PATH_KEY, QUERY_KEY, LICENSE, APPID]) expect(seen).not.toContain(secret);
    expect(seen).toContain('The carrier refund feed:');
  } finally {
    await client.close();
  }
});

describe('the server’s secret values', () => {
  it('are the credential parts of each configured URL, not its ordinary words', () => {
    expect(
      urlSecrets(
        'https://apikeyuser0123456789@api.carrier.example/v1/k/CARRIERKEY_Zq9xY/track?key=abc123&appid=plainletters&format=json&version=2024-01-01&v=2',
      ).sort(),
    ).toEqual(['CARRIERKEY_Zq9xY', 'abc123', 'apikeyuser0123456789', 'plainletters'].sort());
    expect(urlSecrets('https://api.carrier.example/v1/track')).toEqual([]);
    expect(urlSecrets('https://api.carrier.example/v1/track?format=json&lang=en-US')).toEqual([]);
    expect(
      serverSecretValues({
        urls: [
          'postgres://reader:PGPASS_Zq9xY@db.internal:5432/orders',
          'postgres://audit:auditpw-Zq9xY@db.internal/audit',
          'redis://:redis%2Fpw-Zq9xY@cache.internal:6379',
          undefined,
        ],
        values: ['c'.repeat(32), 'short', undefined],
        keys: [Buffer.from('audit-key-0123456789abcdef0123456789')],
      }),
    ).toEqual(
      expect.arrayContaining([
        'PGPASS_Zq9xY',
        'auditpw-Zq9xY',
        'redis/pw-Zq9xY',
        'c'.repeat(32),
        'audit-key-0123456789abcdef0123456789',
        Buffer.from('audit-key-0123456789abcdef0123456789').toString('hex'),
      ]),
    );
  });

  it('are hidden in keys and strings, and hiding costs nothing without any', () => {
    const secrets = createServerSecrets(['PGPASS_Zq9xY', 'pass/word"x']);
    expect(
      thirdPartyAnswer(
        { PGPASS_Zq9xY: ['pw PGPASS_Zq9xY', 'pass%2Fword%22x', '{"p":"pass/word\\"x"}'] },
        secrets,
      ),
    ).toEqual({ '[REDACTED]': ['pw [REDACTED]', '[REDACTED]', '{"p":"[REDACTED]"}'] });
    expect(createServerSecrets([]).pattern).toBeUndefined();
    expect(secrets.pattern?.replace).toBe('[REDACTED]');
  });
});

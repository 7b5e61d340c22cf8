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

// Red team AA: the server's secrets were found only in the forms server-secrets.ts listed (raw,
// upper-case `encodeURIComponent`, JSON-escaped), so a carrier echoing one as `%2b`, `\/`, `\u002B`,
// `&#95;`, base64, hex, in another case, with a zero-width space or a fullwidth letter passed it on;
// search_docs cut a line before redacting it (a cut secret's part showed) and matched the query
// against the secret itself (a prefix oracle); and `?account=Chicago` or a database password `orders`
// hid those words in every carrier answer.

const KEY = 'Ab3+def/ghiJKL9xyz012';
const KEY2 = 'CK1_Zq9xYabcdefghij';
const DOC_KEY = 'Zq9xYabcdefghijklmnop7';
const b64 = (text: string) => Buffer.from(text).toString('base64');

/** Each way of writing a secret the carrier's answer uses (one event each). */
const ENCODED: Record<string, string> = {
  'percent, lower case': 'Ab3%2bdef%2fghiJKL9xyz012',
  'needless percent-escape': 'CK1%5FZq9xYabcdefghij',
  'needless percent-escape, lower case': 'CK1%5fZq9xYabcdefghij',
  'every character percent-escaped': [...KEY2].map((c) => `%${c.charCodeAt(0).toString(16)}`).join(''),
  'PHP JSON': 'Ab3+def\\/ghiJKL9xyz012',
  '.NET JSON': 'Ab3\\u002Bdef/ghiJKL9xyz012',
  'JSON \\u escape': 'CK1\\u005fZq9xYabcdefghij',
  'HTML entity': 'CK1&#95;Zq9xYabcdefghij',
  'HTML entities': [...KEY2].map((c) => `&#${c.charCodeAt(0)};`).join(''),
  'HTML hex entity': 'CK1&#x5F;Zq9xYabcdefghij',
  base64: b64(KEY2),
  hex: Buffer.from(KEY2).toString('hex'),
  'upper case': KEY2.toUpperCase(),
  'lower case': KEY.toLowerCase(),
  'zero-width spaces': [...KEY2].join('\u200b'),
  'soft hyphen': `CK1_Z\u00adq9xYabcdefghij`,
  fullwidth: KEY2.replace('Z', '\uff3a'),
  reversed: [...KEY2].reverse().join(''),
};

const carrier = createServer((req, res) => {
  const number = (req.url ?? '').match(/TRK\d{8}/)?.[0] ?? 'TRK00000000';
  const events = [
    ...Object.values(ENCODED).map((written, index) => ({
      at: `2026-11-20T08:00:${String(index).padStart(2, '0')}Z`,
      where: 'Chicago, IL',
      what: `key ${written} end`,
    })),
    { at: '2026-11-20T09:00:00Z', where: 'Chicago, IL', what: 'Your orders left the ground floor' },
  ];
  res
    .writeHead(200, { 'content-type': 'application/json' })
    .end(JSON.stringify({ trackingNumber: number, carrier: 'Parcelwise', status: 'in_transit', events }));
});

const filler = 'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november';
let running: Running;
let root: string;
const desk = {
  token: 'desk-token-0123456789',
  clientId: 'support-desk',
  scopes: ['orders:read', 'docs:read'],
  extra: { sub: 'agent-1' },
};
beforeAll(async () => {
  await new Promise<void>((resolve) => carrier.listen(0, '127.0.0.1', resolve));
  const port = (carrier.address() as AddressInfo).port;
  root = mkdtempSync(join(tmpdir(), 'docs-secrets-decoded-'));
  writeFileSync(
    join(root, 'carrier.md'),
    `# Carrier\nThe carrier refund feed uses key ${DOC_KEY} ${filler} ${filler} ${filler} ${filler}\n` +
      `Escaped in a sample: key=${encodeURIComponent(DOC_KEY).replace('Z', '%5a')} for the feed\n`,
  );
  running = await startService({
    transport: 'pipe',
    docsRoot: root,
    callsPerMinute: 10_000,
    carrierUrl:
      `http://127.0.0.1:${port}/v1?key=${encodeURIComponent(KEY).toLowerCase()}` +
      `&app=CK1%5FZq9xYabcdefghij&doc_key=${DOC_KEY}&account=Chicago&service=ground`,
  });
});
afterAll(async () => {
  await running?.stop();
  carrier.closeAllConnections();
  carrier.close();
  rmSync(root, { recursive: true, force: true });
});

describe('track_shipment: a secret the carrier echoes', () => {
  it('is redacted however it is written, and the words around it stay', async () => {
    const client = await connectTestClient(running.service.createServer(), { authInfo: desk });
    try {
      const result = await client.callTool('track_shipment', { tracking_number: 'TRK00000042' });
      expect(result.isError).toBeFalsy();
      const events = (result.structuredContent as { events: { where: string; what: string }[] }).events;
      Object.keys(ENCODED).forEach((name, index) => {
        // base64's last characters also hold the padding's bits: they stay (`g==`).
        const what = name === 'base64' ? /^key \[REDACTED\][A-Za-z0-9+/]?=* end$/ : /^key \[REDACTED\] end$/;
        expect({ name, what: events[index]?.what }).toEqual({ name, what: expect.stringMatching(what) });
      });
      // Ordinary words that are the values of non-secret parameters stay.
      expect(events.at(-1)).toMatchObject({
        where: 'Chicago, IL',
        what: 'Your orders left the ground floor',
      });
    } finally {
      await client.close();
    }
  });
});

describe('search_docs: a secret in a document', () => {
  async function search(query: string) {
    const client = await connectTestClient(running.service.createServer(), { authInfo: desk });
    try {
      const result = await client.callTool('search_docs', { query });
      expect(result.isError).toBeFalsy();
      return (result.structuredContent as { items: { line: number; text: string }[] }).items;
    } finally {
      await client.close();
    }
  }

  it('is never found: a query of its start, or of all of it, matches nothing', async () => {
    for (const query of ['z', 'zq', 'zq9', 'zq9xy', 'zq9xyabc', DOC_KEY, DOC_KEY.toLowerCase()]) {
      expect({ query, items: await search(query) }).toEqual({ query, items: [] });
    }
  });

  it('is redacted before a long line is cut, so no part of it shows', async () => {
    for (const query of ['delta', 'golf', 'hotel', 'india', 'juliet']) {
      for (const item of await search(query)) {
        for (let at = 0; at + 6 <= DOC_KEY.length; at += 1) {
          expect(item.text).not.toContain(DOC_KEY.slice(at, at + 6));
        }
      }
    }
    const [first] = await search('refund feed uses');
    expect(first?.text).toMatch(/^The carrier refund feed uses key \[REDACTED\] alpha bravo/);
    expect(first?.line).toBe(2);
    const [escaped] = await search('sample');
    expect(escaped).toMatchObject({ line: 3, text: 'Escaped in a sample: key=[REDACTED] for the feed' });
  });
});

describe('which configured values are secrets', () => {
  it('a query value under a secret name or shaped like a credential; a plain-word password is not', () => {
    expect(
      urlSecrets(
        'https://api.carrier.example/v1?service=ground&account=Chicago&key=abc123&X-Api-Key=k9k9k9k9' +
          '&client_secret=plainsecret&sig=signed1&app=CK1_Zq9xYabcdefghij&keyword=shoes1',
      ).sort(),
    ).toEqual(['CK1_Zq9xYabcdefghij', 'abc123', 'k9k9k9k9', 'plainsecret', 'signed1'].sort());
    expect(serverSecretValues({ urls: ['postgres://orders:orders@db.internal/orders'] })).toEqual([]);
    expect(serverSecretValues({ urls: ['postgres://orders:orders2024@db.internal/orders'] })).toEqual([
      'orders2024',
    ]);
    const secrets = createServerSecrets(
      serverSecretValues({
        urls: [
          'https://api.parcelwise.example/v1?service=ground&account=Chicago&key=CK1_Zq9xYabcdefghij',
          'postgres://orders:orders@db.internal/orders',
        ],
      }),
    );
    expect(
      thirdPartyAnswer(
        { where: 'Chicago, IL', what: 'Your orders left the ground floor; key CK1_ZQ9XYABCDEFGHIJ' },
        secrets,
      ),
    ).toEqual({ where: 'Chicago, IL', what: 'Your orders left the ground floor; key [REDACTED]' });
  });

  it('hides a value written with what the view decodes, and keeps line breaks inside a redacted span', () => {
    const secrets = createServerSecrets(['p%41ss-w0rd-9', 'line\nsecret-42']);
    expect(secrets.hide('a p%41ss-w0rd-9 b')).toBe('a [REDACTED] b');
    expect(secrets.hide('x line\n\u00adsecret-42 y\nz')).toBe('x [REDACTED]\n y\nz');
    expect(createServerSecrets(['Ab3+def/ghiJKL9xyz012']).pattern?.pattern.flags).toContain('i');
  });
});

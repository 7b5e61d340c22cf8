// A secret split over sibling strings: a private key's lines as the items of an array in `_meta` or as
// an object's values, `Bearer` and its token in two items, an AWS key id and its secret on two lines.
// Each string alone holds no whole secret; the model reads them together.
import { generateKeyPairSync } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createSecretRedactor, defineTool, fail, REDACTED, redactSecrets } from '../src/index.js';
import { type LogEntry, recordingLogger, serveTools, type TestClient } from '../src/testing.js';

const R = REDACTED;
const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const PEM = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
const PEM_LINES = PEM.trim().split('\n');
const BODY = PEM_LINES.slice(1, -1);
const TOKEN = 'q8Zr1vW3xK9mT2nB7cY4';

describe('createSecretRedactor: a secret split over sibling strings', () => {
  it('redacts every line of a private key given as the items of an array', () => {
    expect(PEM_LINES.length).toBeGreaterThan(3);
    expect(redactSecrets({ lines: PEM_LINES })).toEqual({ lines: PEM_LINES.map(() => R) });
  });

  it('keeps the lines before BEGIN and after END, and the text around the markers', () => {
    const lines = ['loaded config:', `key=${PEM_LINES[0]}`, ...BODY, `${PEM_LINES.at(-1)} (pkcs8)`, 'done'];
    expect(redactSecrets(lines)).toEqual([
      'loaded config:',
      `key=${R}`,
      ...BODY.map(() => R),
      `${R} (pkcs8)`,
      'done',
    ]);
  });

  it('runs a key without its END line to the last item, and not past it', () => {
    const value = { head: PEM_LINES.slice(0, 3), next: ['order 42 not found', 'retry later'] };
    expect(redactSecrets(value)).toEqual({ head: [R, R, R], next: ['order 42 not found', 'retry later'] });
  });

  it("redacts a key spread over an object's values, in order", () => {
    const value = Object.fromEntries(PEM_LINES.map((line, index) => [`l${index}`, line]));
    const out = redactSecrets({ dump: value }) as { dump: Record<string, string> };
    expect(Object.values(out.dump)).toEqual(PEM_LINES.map(() => R));
    expect(Object.keys(out.dump)).toEqual(Object.keys(value));
  });

  it('redacts a token on the item after its Bearer, and a secret on the line after an AWS key id', () => {
    expect(redactSecrets(['upstream refused the credential', 'Bearer', TOKEN])).toEqual([
      'upstream refused the credential',
      'Bearer',
      R,
    ]);
    const secret = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
    expect(redactSecrets(['[default]', 'AKIAIOSFODNN7EXAMPLE', secret])).toEqual(['[default]', R, R]);
  });

  it('leaves plain arrays exactly as the per-string redaction does', () => {
    const plain = [
      'order 42',
      'Bearer of bad news',
      'Basic plan',
      'MII',
      'ghp_abcdefghijklmnopqrstuvwxyz0123456789',
    ];
    expect(redactSecrets(plain)).toEqual(['order 42', 'Bearer of bad news', 'Basic plan', 'MII', R]);
  });

  it('reports each split match, once per string, with custom hooks', () => {
    const seen: string[] = [];
    const calls: string[] = [];
    const redact = createSecretRedactor({
      redactText: (text) => {
        calls.push(text);
        return text;
      },
      onSplitSecret: (name) => seen.push(name),
    });
    expect(redact(['x', ...PEM_LINES])).toEqual(['x', ...PEM_LINES.map(() => R)]);
    // The block, and its base64 body by the header-less key rule: one cut, each pattern reported.
    expect(new Set(seen)).toEqual(new Set(['pem-private-key', 'der-key']));
    expect(calls).toEqual(['x', ...PEM_LINES.map(() => R)]);
  });
});

describe('the model-facing boundary: a key split over `_meta` items', () => {
  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  it('no line of the key reaches the client, through a real tools/call', async () => {
    const entries: LogEntry[] = [];
    const tool = defineTool({
      name: 'sign_invoice',
      description: 'Signs an invoice.',
      input: {},
      handler: () => {
        const result = fail('internal', 'Signing failed.');
        result._meta = { ...result._meta, signer: { lines: [...PEM_LINES], kid: 'k1' } };
        return result;
      },
    });
    client = await serveTools([tool], { logger: recordingLogger(entries) });
    const result = await client.callTool('sign_invoice', {});
    const seen = JSON.stringify(result);
    for (const line of BODY) expect(seen).not.toContain(line);
    expect(result._meta?.signer).toEqual({ lines: PEM_LINES.map(() => R), kid: 'k1' });
  });
});

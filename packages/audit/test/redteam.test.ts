// Red-team tests: a hostile model shapes its arguments (and the tool names it asks for) to break the
// audit log: forge or split a line, collide two calls into one recorded text, plant fields the chain
// relies on, get a secret recorded in the clear, or make a call go unrecorded. Every call goes through a
// real client into the real file sink; the file is then read back and verified.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAudit, createFileSink, verifyAuditFile } from '../src/index.js';
import { closeConnections, serve } from './helpers.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-redteam-'));
});
afterEach(async () => {
  await closeConnections();
  await rm(dir, { recursive: true, force: true });
});

const HOSTILE_VALUES: unknown[] = [
  'line one\nline two\r\n{"seq":1,"hash":"0000"}',
  '\u2028\u2029 separators',
  'nul \u0000 inside',
  'lone \uD800 surrogate and \uDFFF',
  '"}\n{"aborted":false,"args":{},"seq":999',
  { hash: 'f'.repeat(64), prevHash: '0'.repeat(64), seq: 1, chainId: 'forged' },
  { __proto__: { polluted: true }, constructor: { prototype: { x: 1 } } },
  JSON.parse('{"__proto__": {"admin": true}, "toString": "x"}'),
  { ['k'.repeat(5000)]: 'a very long key' },
  Array.from({ length: 2000 }, (_, i) => i),
  { deep: JSON.parse(`${'['.repeat(200)}1${']'.repeat(200)}`) },
  { a: 1, b: 2 },
  { b: 2, a: 1 },
  1e308,
  -0,
  '😀'.repeat(100),
];

async function lines(path: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(path, 'utf8');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('hostile arguments against the audit file', () => {
  it('every call is one record on one line, the chain verifies, and no argument can forge chain fields', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'redteam' });
    const client = await serve([audit]);
    for (const value of HOSTILE_VALUES) await client.callTool('echo', { value });
    // Unknown tools the model invents, with newlines and secrets in the name: recorded, not obeyed.
    await client.callTool('no_such_tool\n{"seq":1}', {}).catch(() => undefined);
    await client.callTool('token=abc123def456ghi', {}).catch(() => undefined);
    await audit.close();

    const records = await lines(path);
    expect(records).toHaveLength(HOSTILE_VALUES.length + 2);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: records.length });
    // The chain's own fields are the writer's, whatever the arguments said.
    expect(records.map((record) => record.seq)).toEqual(records.map((_, index) => index + 1));
    for (const record of records) expect(record.chainId).toBe('redteam');
    // Key order does not matter to the record: {a,b} and {b,a} are recorded alike (canonical JSON).
    const sorted = records.filter((record) => JSON.stringify(record.args) === '{"value":{"a":1,"b":2}}');
    expect(sorted).toHaveLength(2);
    // A secret in an invented tool name is redacted before it is recorded.
    const text = await readFile(path, 'utf8');
    expect(text).not.toContain('abc123def456ghi');
    // Prototype keys stay data: nothing was polluted while recording.
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('secrets hidden in nested, escaped and encoded arguments are recorded redacted', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'secrets' });
    const client = await serve([audit]);
    const planted = [
      'hunter2-Zq8',
      'k-91827364',
      'cs-77aa',
      'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl',
    ];
    await client.callTool('echo', {
      value: {
        list: [{ Api_Key: 'k-91827364' }],
        body: `{\\"password\\":\\"hunter2-Zq8\\"}`,
        callback: '/cb?next=%2Fh%3Fclient_secret%3Dcs-77aa',
        header: `Authorization: Bearer ${planted[3]}`,
      },
    });
    await audit.close();
    const text = await readFile(path, 'utf8');
    for (const secret of planted) expect(text).not.toContain(secret);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 1 });
  });

  it('a megabyte argument is recorded as its size, and the record stays bounded', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'big' });
    const client = await serve([audit]);
    await client.callTool('echo', { value: 'x'.repeat(1_000_000) });
    await audit.close();
    const [record] = await lines(path);
    expect(record!.args).toMatch(/^\[Truncated: \d+ characters\]$/);
    expect(JSON.stringify(record).length).toBeLessThan(4_000);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 1 });
  });
});

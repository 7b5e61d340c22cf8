// Red-team tests. (1) A hostile model shapes its arguments (and the tool names it asks for) to break the
// audit log: forge or split a line, collide two calls into one recorded text, plant fields the chain
// relies on, get a secret recorded in the clear, make a call go unrecorded or hold unbounded memory.
// (2) A hostile insider edits the file or the table (no access to a stored head): the verifier must name
// each edit, never pass it, and must still pass the logs the sinks really write. (3) Faults: a full or
// failing disk, PostgreSQL gone mid-batch or losing an acknowledgement, close() with writes in flight:
// nothing lost or duplicated silently, the chain intact afterwards. Every call goes through a real
// client into a real sink; what was stored is read back and verified.
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { canonicalJson, registerTools } from '@toolgate/core';
import {
  type LogEntry,
  recordingLogger,
  reportMissingService,
  startFaultProxy,
} from '@toolgate/core/testing';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type AuditRecord,
  createAudit,
  createFileSink,
  createFunctionSink,
  createPostgresSink,
  verifyAuditFile,
  verifyAuditLines,
  verifyAuditTable,
} from '../src/index.js';
import { databases, suiteDatabase } from './database.js';
import { closeConnections, echo, serve } from './helpers.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Heap in use once garbage is collected. */
function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

// A disk that fails on cue: the next datasync, or the next write after a short one, fails with EIO.
// Everything else passes through to the real file system.
const disk = vi.hoisted(() => ({ failDatasync: 0, shortWriteThenFail: 0 }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const writeSync = ((fd: number, buffer: Uint8Array, offset: number, length: number) => {
    if (disk.shortWriteThenFail > 0 && length > 1) return fs.writeSync(fd, buffer, offset, length >> 1);
    return fs.writeSync(fd, buffer, offset, length);
  }) as typeof fs.writeSync;
  return { ...fs, default: { ...fs, writeSync }, writeSync };
});
vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  const eio = (): Error => Object.assign(new Error('EIO: i/o error'), { code: 'EIO' });
  const open = (async (...args: Parameters<typeof fs.open>) => {
    const handle = await fs.open(...args);
    return new Proxy(handle, {
      get(target, key) {
        if (key === 'datasync' && disk.failDatasync > 0) {
          disk.failDatasync -= 1;
          return async () => Promise.reject(eio());
        }
        if (key === 'write' && disk.shortWriteThenFail > 0) {
          disk.shortWriteThenFail -= 1;
          return async () => Promise.reject(eio());
        }
        const value = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }) as typeof fs.open;
  return { ...fs, default: { ...fs, open }, open };
});

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-redteam-'));
});
afterEach(async () => {
  disk.failDatasync = 0;
  disk.shortWriteThenFail = 0;
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

describe('hostile arguments: secrets, shapes and sizes', () => {
  it('secret-named keys in any case or separator, in nested arrays, and secrets used as keys are recorded redacted; _meta is not recorded', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'names' });
    const client = await serve([audit]);
    const value = {
      PASSWORD: 'pw-1-Zq8',
      'Api-Key': 'pw-2-Zq8',
      x_api_key: 'pw-3-Zq8',
      'client.Secret': 'pw-4-Zq8',
      AUTHORIZATION: 'pw-5-Zq8',
      grid: [[[{ accessToken: 'pw-6-Zq8' }]], [{ nested: [{ Private_Key: 'pw-7-Zq8' }] }]],
      [`Bearer ${'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIyIn0.c2lnbmF0dXJlMg'}`]: 'a token used as a key',
      ghp_0123456789abcdefghijABCDEFGHIJ012345: 'a GitHub token used as a key',
    };
    await client.callTool('echo', { value }, { meta: { password: 'pw-8-Zq8', trace: 'x' } });
    await audit.close();
    const text = await readFile(path, 'utf8');
    for (let n = 1; n <= 8; n += 1) expect(text).not.toContain(`pw-${n}-Zq8`);
    expect(text).not.toContain('eyJzdWIiOiIyIn0');
    expect(text).not.toContain('ghp_0123456789abcdefghij');
    const [record] = await lines(path);
    expect((record!.args as { value: Record<string, unknown> }).value).toMatchObject({
      PASSWORD: '[REDACTED]',
      'Api-Key': '[REDACTED]',
      x_api_key: '[REDACTED]',
      'client.Secret': '[REDACTED]',
      AUTHORIZATION: '[REDACTED]',
      grid: [[[{ accessToken: '[REDACTED]' }]], [{ nested: [{ Private_Key: '[REDACTED]' }] }]],
    });
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 1 });
  });

  it('in shape mode, secrets used as keys are recorded redacted, at any depth and for an unknown tool too', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'shape-keys', args: 'shape' });
    const client = await serve([audit]);
    const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIyIn0.c2lnbmF0dXJlMg';
    const value = {
      [`Bearer ${jwt}`]: 'a token used as a key',
      nested: [{ ghp_0123456789abcdefghijABCDEFGHIJ012345: 1 }],
      'postgres://app:s3cret-passw0rd@db.internal/orders': true,
      plain: 'kept',
    };
    await client.callTool('echo', { value });
    await expect(client.callTool('nope', { [`Bearer ${jwt}`]: 1 })).rejects.toThrow(/Unknown tool/);
    await audit.close();
    const text = await readFile(path, 'utf8');
    expect(text).not.toContain('eyJzdWIiOiIyIn0');
    expect(text).not.toContain('ghp_0123456789abcdefghij');
    expect(text).not.toContain('s3cret-passw0rd');
    expect((await lines(path)).map((record) => record.args)).toEqual([
      {
        value: {
          'Bearer [REDACTED]': 'string',
          nested: [{ '[REDACTED]': 'number' }],
          'postgres://[REDACTED]@db.internal/orders': 'boolean',
          plain: 'string',
        },
      },
      { 'Bearer [REDACTED]': 'number' },
    ]);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 2 });
  });

  it('distinct megabyte key names, call after call, are not kept on the heap (redacted and shape mode)', async () => {
    for (const args of ['redacted', 'shape'] as const) {
      let written = 0;
      const audit = createAudit({
        sink: createFunctionSink((batch) => {
          written += batch.length;
        }),
        args,
      });
      const client = await serve([audit]);
      await client.callTool('echo', { value: { warm: 1 } });
      await audit.flush();
      const before = heapAfterGc();
      // Each key is new: a cache of names (verdicts, quoted JSON) would hold every one of them.
      for (let call = 0; call < 60; call += 1) {
        await client.callTool('echo', { value: { [`${call}-${'k'.repeat(1_000_000)}`]: 1 } });
      }
      await audit.flush();
      const grown = heapAfterGc() - before;
      expect(written).toBe(61);
      // 60 MB of names were sent; kept, they were twice that (the name and its JSON).
      expect(grown).toBeLessThan(16 * 2 ** 20);
      await audit.close();
      await closeConnections();
    }
  });

  it('values nested 20,000 deep, a 100,000-item array and 5,000 keys are each one record; the chain verifies', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'shapes' });
    const client = await serve([audit]);
    const deep = JSON.parse(`${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`) as unknown;
    const wide = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`k${i}`, i]));
    const calls = [{ value: deep }, { value: Array.from({ length: 100_000 }, () => 0) }, { value: wide }];
    for (const args of calls) await client.callTool('echo', args);
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 3, dropped: 0 });
    const records = await lines(path);
    expect(records.map((record) => record.seq)).toEqual([1, 2, 3]);
    // Each record stays bounded whatever the argument: cut deep, or cut to its size.
    for (const record of records) expect(JSON.stringify(record.args).length).toBeLessThanOrEqual(70_000);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 3 });
  });

  it('a stalled sink and 300 calls of 60 KB arguments: what waits stays within maxBufferBytes, the rest is counted as dropped', async () => {
    let release: () => void = () => {};
    const stalled = new Promise<void>((resolve) => {
      release = resolve;
    });
    const path = join(dir, 'audit.jsonl');
    const file = createFileSink(path);
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: {
        head: file.head!,
        close: file.close!,
        write: async (batch) => stalled.then(() => file.write(batch)),
      },
      chainId: 'bound',
      maxBufferBytes: 1_000_000,
      maxWaitMs: 0,
      logger: recordingLogger(log),
    });
    const client = await serve([audit]);
    const big = 'y'.repeat(60_000);
    let peak = 0;
    for (let index = 0; index < 300; index += 1) {
      const result = await client.callTool('echo', { value: `${index}:${big}` });
      expect(result.isError).toBeUndefined();
      peak = Math.max(peak, audit.stats().pendingBytes);
    }
    expect(peak).toBeLessThanOrEqual(1_000_000);
    release();
    await audit.close();
    const { written, dropped } = audit.stats();
    expect(written + dropped).toBe(300);
    expect(dropped).toBeGreaterThan(0);
    expect(log.map((entry) => entry.message)).toContain('audit records dropped');
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: written });
  });
});

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** What an insider who knows the format can do: re-link records into a chain that hashes. */
function forge(records: readonly AuditRecord[], prevHash = '0'.repeat(64)): string[] {
  let previous = prevHash;
  return records.map((record) => {
    const { hash: _dropped, ...rest } = record;
    const canonical = canonicalJson({ ...rest, prevHash: previous });
    previous = sha256(canonical);
    return `${canonical.slice(0, -1)},"hash":"${previous}"}`;
  });
}

/** Runs `runs` processes one after another on one file: each its chain id and its calls. */
async function writeRuns(path: string, runs: readonly [chainId: string, calls: number][]): Promise<string[]> {
  for (const [chainId, calls] of runs) {
    const audit = createAudit({ sink: createFileSink(path), chainId });
    const client = await serve([audit]);
    for (let index = 1; index <= calls; index += 1)
      await client.callTool('get_order', { id: `${chainId}-${index}` });
    await audit.close();
    await closeConnections();
  }
  return (await readFile(path, 'utf8')).split('\n').filter((line) => line !== '');
}

describe('an insider with write access to the file', () => {
  it('each edit is named by record and kind; a cut tail verifies but shows a different head', async () => {
    const path = join(dir, 'audit.jsonl');
    const kept = await writeRuns(path, [['pod-a', 5]]);
    const records = kept.map((line) => JSON.parse(line) as AuditRecord);
    const attempts: [string, string[], number, string][] = [
      [
        'a middle record deleted',
        [kept[0]!, kept[1]!, kept[3]!, kept[4]!],
        3,
        'record 3 does not follow the previous record of its chain: seq jumps from 2 to 4 (a record was deleted or moved)',
      ],
      [
        'two records swapped',
        [kept[0]!, kept[2]!, kept[1]!, kept[3]!, kept[4]!],
        2,
        'record 2 does not follow the previous record of its chain: seq jumps from 1 to 3 (a record was deleted or moved)',
      ],
      [
        'a record duplicated',
        [kept[0]!, kept[1]!, kept[1]!, kept[2]!],
        3,
        'record 3 is out of order: seq 2 after seq 2 (a record was inserted or moved)',
      ],
      [
        'an outcome edited',
        [kept[0]!, kept[1]!.replace('"outcome":"ok"', '"outcome":"not_found"'), ...kept.slice(2)],
        2,
        'record 2 (seq 2) was altered: its content does not match its hash',
      ],
      [
        'an edit whose hash was recomputed',
        [
          kept[0]!,
          ...forge([{ ...records[1]!, outcome: 'permission_denied' }], records[0]!.hash),
          ...kept.slice(2),
        ],
        3,
        'record 3 (seq 3) does not link to the previous record of its chain: its prevHash differs (a record was inserted or replaced)',
      ],
      [
        'key order changed (same record)',
        [
          kept[0]!,
          JSON.stringify(Object.fromEntries(Object.entries(records[1]!).reverse())),
          ...kept.slice(2),
        ],
        2,
        'record 2 (seq 2) was altered: its text is not the exact text that was hashed (a duplicate key, spacing or another spelling)',
      ],
      [
        'a space added (same record)',
        [kept[0]!, kept[1]!.replace('{"args"', '{ "args"'), ...kept.slice(2)],
        2,
        'record 2 (seq 2) was altered: its text is not the exact text that was hashed (a duplicate key, spacing or another spelling)',
      ],
      [
        'the first record deleted',
        kept.slice(1),
        1,
        'record 1 (seq 2) does not start the chain: the records before it were deleted',
      ],
    ];
    for (const [, edited, brokenAt, reason] of attempts) {
      await expect(verifyAuditLines(edited)).resolves.toMatchObject({ intact: false, brokenAt, reason });
    }
    // The tail cut: a consistent shorter chain, as the README says. Only a head stored elsewhere finds it.
    const whole = await verifyAuditFile(path);
    await writeFile(path, `${kept.slice(0, 3).join('\n')}\n`);
    const cut = await verifyAuditFile(path);
    expect(cut).toMatchObject({ intact: true, records: 3 });
    expect(whole).toMatchObject({ intact: true, records: 5, head: records[4]!.hash });
    expect(cut.intact && cut.head).not.toBe(records[4]!.hash);
  });

  it('a forged chain that names a record that is not there, or a replaced one, is found; so is a copy of a first record', async () => {
    const path = join(dir, 'audit.jsonl');
    const kept = await writeRuns(path, [
      ['pod-a', 2],
      ['pod-b', 2],
    ]);
    const [a1, a2, b1, b2] = kept.map((line) => JSON.parse(line) as AuditRecord);
    const fake = { ...b1!, chainId: 'forged', after: { chainId: 'pod-a', seq: 2, hash: 'f'.repeat(64) } };
    await expect(verifyAuditLines([...kept, ...forge([fake])])).resolves.toMatchObject({
      intact: false,
      brokenAt: 5,
      reason:
        'record 5 (seq 1) starts after record 2 of chain pod-a, whose hash differs: that chain was replaced',
    });
    const ghost = { ...fake, after: { chainId: 'pod-a', seq: 9, hash: a2!.hash } };
    await expect(verifyAuditLines([...kept, ...forge([ghost])])).resolves.toMatchObject({
      intact: false,
      brokenAt: 5,
      reason:
        'record 5 (seq 1) starts after record 9 of chain pod-a, which is missing: a chain or its last records were deleted',
    });
    // pod-b's first record copied to the end: it names a record from before pod-b began, so no restart.
    await expect(verifyAuditLines([...kept, kept[2]!])).resolves.toMatchObject({
      intact: false,
      brokenAt: 5,
      reason: 'record 5 is out of order: seq 1 after seq 2 (a record was inserted or moved)',
    });
    expect([a1!.seq, b2!.seq]).toEqual([1, 2]);
  });

  it('chain pod-a rewritten whole and one record appended to it cannot hide behind pod-b, which named its real last record', async () => {
    const path = join(dir, 'audit.jsonl');
    const kept = await writeRuns(path, [
      ['pod-a', 2],
      ['pod-b', 2],
    ]);
    const [a1, a2] = kept.map((line) => JSON.parse(line) as AuditRecord);
    // The insider turns pod-a's second call into a refusal, re-links pod-a, and adds a record so pod-a
    // has gone past the seq pod-b names (once, verify took that as proof enough).
    const rewritten = forge([a1!, { ...a2!, outcome: 'permission_denied' }, { ...a2!, seq: 3 }]);
    await writeFile(path, `${[...rewritten, ...kept.slice(2)].join('\n')}\n`);
    const reason =
      'record 4 (seq 1) starts after record 2 of chain pod-a, whose hash differs: that chain was replaced';
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: false, brokenAt: 4, reason });
    await expect(verifyAuditLines([...rewritten, ...kept.slice(2)])).resolves.toMatchObject({
      brokenAt: 4,
      reason,
    });
    // A one-pass source (a stream) is checked alike.
    async function* stream(): AsyncGenerator<string> {
      yield* [...rewritten, ...kept.slice(2)];
    }
    await expect(verifyAuditLines(stream())).resolves.toMatchObject({ brokenAt: 4, reason });
  });

  it('a stable chain id back on a file another chain wrote to meanwhile: the log the sink wrote verifies, chains linked', async () => {
    const path = join(dir, 'audit.jsonl');
    const kept = await writeRuns(path, [
      ['pod-a', 2],
      ['pod-b', 2],
      ['pod-a', 2],
    ]);
    const records = kept.map((line) => JSON.parse(line) as AuditRecord);
    // The sink starts pod-a again at seq 1, naming pod-b's last record.
    expect(records[4]).toMatchObject({
      chainId: 'pod-a',
      seq: 1,
      after: { chainId: 'pod-b', seq: 2, hash: records[3]!.hash },
    });
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: true,
      records: 6,
      chains: [
        { chain: 'pod-a', intact: true, records: 4, head: records[5]!.hash },
        { chain: 'pod-b', intact: true, records: 2 },
      ],
    });
    // pod-b deleted whole: the second run of pod-a names it.
    await writeFile(path, `${[...kept.slice(0, 2), ...kept.slice(4)].join('\n')}\n`);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      brokenAt: 3,
      reason:
        'record 3 (seq 1) starts after record 2 of chain pod-b, which is missing: a chain or its last records were deleted',
    });
  });

  it('records spliced in from another file of the same chain id are found', async () => {
    const one = join(dir, 'one.jsonl');
    const two = join(dir, 'two.jsonl');
    const first = await writeRuns(one, [['pod-a', 3]]);
    const second = await writeRuns(two, [['pod-a', 3]]);
    await expect(verifyAuditLines([...first.slice(0, 2), ...second.slice(2)])).resolves.toMatchObject({
      intact: false,
      brokenAt: 3,
      reason:
        'record 3 (seq 3) does not link to the previous record of its chain: its prevHash differs (a record was inserted or replaced)',
    });
  });
});

describe('a crash mid-write on the file sink, then an insider', () => {
  // What a write cut short leaves (kill -9 across a page boundary, a power cut): the first bytes of
  // the line it was writing. The next writer closes the line off with a newline and chains on.
  const cutShort = (line: string): string => line.slice(0, 60);

  it('a line torn by a crash does not hide a later edit: every record after it is still checked', async () => {
    const path = join(dir, 'audit.jsonl');
    const [first] = await writeRuns(path, [['pod-a', 1]]);
    await writeFile(path, `${first}\n${cutShort(first!)}`);
    const kept = await writeRuns(path, [
      ['pod-a', 2],
      ['pod-b', 2],
    ]);
    // The torn line stays where it was, closed off; pod-a goes on after its last whole record.
    expect(kept[1]).toBe(cutShort(first!));
    expect(kept.filter((_, index) => index !== 1).map((line) => JSON.parse(line).seq)).toEqual([
      1, 2, 3, 1, 2,
    ]);
    // The log as the sinks left it: the torn line reported, the five records after it checked.
    const torn = {
      intact: false,
      records: 5,
      brokenAt: 2,
      reason: 'record 2 is not an audit record (not JSON, or no seq, hash and prevHash)',
    };
    await expect(verifyAuditFile(path)).resolves.toMatchObject(torn);
    // Days later an insider edits pod-a's third call, then deletes pod-b's first record.
    const edited = [...kept];
    edited[3] = edited[3]!.replace('"outcome":"ok"', '"outcome":"not_found"');
    await writeFile(path, `${edited.join('\n')}\n`);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      brokenAt: 4,
      reason: 'record 4 (seq 3) was altered: its content does not match its hash',
    });
    await writeFile(path, `${[...kept.slice(0, 4), kept[5]].join('\n')}\n`);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      brokenAt: 5,
      reason: 'record 5 (seq 2) does not start the chain: the records before it were deleted',
    });
    // Untouched again, the one-pass stream and an array verify alike.
    await writeFile(path, `${kept.join('\n')}\n`);
    await expect(verifyAuditLines(kept)).resolves.toMatchObject(torn);
  });

  it('a second crash during the first write after the first one: the next process still records every call', async () => {
    const path = join(dir, 'audit.jsonl');
    const [first] = await writeRuns(path, [['pod-a', 1]]);
    const record = JSON.parse(first!) as AuditRecord;
    // The first crash tore a line; the next process closed it off, and a crash tore its first batch too.
    await writeFile(
      path,
      `${first}\n${cutShort(first!)}\n${cutShort(forge([{ ...record, seq: 2 }], record.hash)[0]!)}`,
    );
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createFileSink(path),
      chainId: 'pod-a',
      durable: true,
      logger: recordingLogger(log),
    });
    const client = await serve([audit]);
    const answer = await client.callTool('get_order', { id: 'A-2' });
    expect(JSON.parse((answer.content as { text: string }[])[0]!.text)).toEqual({
      ok: true,
      id: 'A-2',
      status: 'shipped',
    });
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 1, dropped: 0, rejected: 0 });
    expect(log).toEqual([]);
    const stored = (await readFile(path, 'utf8')).split('\n');
    expect(stored).toHaveLength(5);
    expect(JSON.parse(stored[3]!)).toMatchObject({ chainId: 'pod-a', seq: 2, prevHash: record.hash });
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      records: 2,
      brokenAt: 2,
      reason: 'record 2 is not an audit record (not JSON, or no seq, hash and prevHash)',
    });
  });
});

describe('a client that chooses its own request ids', () => {
  it('a megabyte string request id is recorded cut at 256 characters, and the chain verifies', async () => {
    const path = join(dir, 'ids.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'ids' });
    const server = new McpServer({ name: 'audit-ids', version: '1.0.0' });
    registerTools(server, [echo], { middleware: [audit] });
    const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
    // The client's ids travel as megabyte strings, mapped back on the way in so the SDK client matches.
    const long = (id: unknown): string => `${'r'.repeat(1_000_000)}-${String(id)}`;
    const send = clientTransport.send.bind(clientTransport);
    clientTransport.send = (message, options) => {
      const out = 'id' in message && 'method' in message ? { ...message, id: long(message.id) } : message;
      return send(out as JSONRPCMessage, options);
    };
    const client = new Client({ name: 'hostile-ids', version: '0.0.0' });
    await server.connect(serverTransport);
    const receive = () => {
      const inbound = clientTransport.onmessage!;
      clientTransport.onmessage = (message, extra) => {
        if ('id' in message && typeof message.id === 'string' && !('method' in message)) {
          const original = message.id.slice(message.id.lastIndexOf('-') + 1);
          inbound({ ...message, id: Number(original) } as JSONRPCMessage, extra);
        } else inbound(message, extra);
      };
    };
    const connecting = client.connect(clientTransport);
    receive();
    await connecting;
    await client.callTool({ name: 'echo', arguments: { value: 'v' } });
    await client.close();
    await audit.close();
    const [record] = (await readFile(path, 'utf8'))
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as AuditRecord);
    expect(record!.requestId).toBe(`${'r'.repeat(256)}...`);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 1 });
  });

  it('a string request id carrying a token is recorded with the token redacted, also where the 256-character cut falls inside it; a UUID id as sent', async () => {
    const path = join(dir, 'secret-ids.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'secret-ids' });
    const server = new McpServer({ name: 'audit-ids', version: '1.0.0' });
    registerTools(server, [echo], { middleware: [audit] });
    const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
    // A client (or a relay in front of the server) that builds its JSON-RPC ids from credentials it
    // holds: the nth tools/call goes out with ids[n] and its answer is mapped back to the SDK's number.
    const ids = [
      'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.c2lnbmF0dXJlLXZhbHVl',
      `${'r'.repeat(249)}-ghp_${'A1b2C3d4'.repeat(5)}`,
      'session=AKIAIOSFODNN7EXAMPLE',
      '3f2a9c1d-1234-4abc-9def-0123456789ab',
    ];
    const sent = new Map<string, number>();
    const send = clientTransport.send.bind(clientTransport);
    clientTransport.send = (message, options) => {
      if ('method' in message && message.method === 'tools/call' && 'id' in message) {
        const id = ids[sent.size]!;
        sent.set(id, message.id as number);
        return send({ ...message, id } as JSONRPCMessage, options);
      }
      return send(message, options);
    };
    const client = new Client({ name: 'token-ids', version: '0.0.0' });
    await server.connect(serverTransport);
    const connecting = client.connect(clientTransport);
    const inbound = clientTransport.onmessage!;
    clientTransport.onmessage = (message, extra) => {
      const original = 'id' in message && typeof message.id === 'string' ? sent.get(message.id) : undefined;
      inbound((original === undefined ? message : { ...message, id: original }) as JSONRPCMessage, extra);
    };
    await connecting;
    for (const value of ids.keys()) await client.callTool({ name: 'echo', arguments: { value } });
    await client.close();
    await audit.close();
    const records = await lines(path);
    expect(records.map((record) => record.requestId)).toEqual([
      'Bearer [REDACTED]',
      `${'r'.repeat(249)}-[REDAC...`,
      'session=[REDACTED]',
      '3f2a9c1d-1234-4abc-9def-0123456789ab',
    ]);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 4 });
  });
});

describe('faults on the file sink', () => {
  it('a full disk (ENOSPC, /dev/full): calls go on, the writer retries, and close() counts every record as lost, loudly', async () => {
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createFileSink('/dev/full'),
      logger: recordingLogger(log),
      closeTimeoutMs: 200,
    });
    const client = await serve([audit]);
    for (let index = 0; index < 5; index += 1) {
      expect((await client.callTool('get_order', { id: `A-${index}` })).isError).toBeUndefined();
    }
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 5, pending: 0 });
    expect(audit.stats().retries).toBeGreaterThanOrEqual(1);
    expect(log.map((entry) => entry.message)).toContain(
      'audit records lost: the sink did not take them before close() gave up',
    );
    expect((log[0]!.fields.err as { code?: string }).code).toBe('ENOSPC');
  });

  it('a file that cannot be opened (ENOTDIR): durable calls answer unavailable, every record counted as rejected', async () => {
    const blocker = join(dir, 'a-file');
    await writeFile(blocker, '');
    const audit = createAudit({
      sink: createFileSink(join(blocker, 'audit.jsonl')),
      durable: true,
      logger: recordingLogger([]),
    });
    const client = await serve([audit]);
    const result = await client.callTool('get_order', { id: 'A-1' });
    expect(result.isError).toBe(true);
    expect(JSON.parse((result.content as { text: string }[])[0]!.text)).toMatchObject({
      ok: false,
      error: 'unavailable',
    });
    await expect(audit.ready()).rejects.toThrow(
      'audit sink refused to set up the chain (permanent error, logged)',
    );
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 1, rejected: 1 });
  });

  it('the disk fails (EIO) after half a batch reached the file: the batch is finished on retry, never dropped beside its own half', async () => {
    const path = join(dir, 'audit.jsonl');
    const log: LogEntry[] = [];
    const audit = createAudit({ sink: createFileSink(path), chainId: 'eio', logger: recordingLogger(log) });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await audit.flush();
    disk.shortWriteThenFail = 1;
    await client.callTool('get_order', { id: 'A-2' });
    await audit.flush();
    await client.callTool('get_order', { id: 'A-3' });
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 3, dropped: 0, rejected: 0, retries: 1 });
    const records = await lines(path);
    expect(records.map((record) => [record.seq, (record.args as { id: string }).id])).toEqual([
      [1, 'A-1'],
      [2, 'A-2'],
      [3, 'A-3'],
    ]);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 3 });
  });

  it('fdatasync fails (EIO) once: nothing is acknowledged after it, though the next sync passes (the kernel dropped the failed pages), until a restart reads the file again', async () => {
    const path = join(dir, 'audit.jsonl');
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createFileSink({ path, fsync: true }),
      chainId: 'fsync',
      durable: true,
      logger: recordingLogger(log),
    });
    const client = await serve([audit]);
    const answer = async (id: string): Promise<unknown> => {
      const result = await client.callTool('get_order', { id });
      return (
        (JSON.parse((result.content as { text: string }[])[0]!.text) as { ok: boolean; error?: string })
          .error ?? 'ok'
      );
    };
    expect(await answer('A-1')).toBe('ok');
    // Linux reports a failed writeback once: the next fdatasync on the handle passes without the
    // pages it lost, so a retry that syncs again would acknowledge records that are not on disk.
    disk.failDatasync = 1;
    expect(await answer('A-2')).toBe('unavailable');
    expect(await answer('A-3')).toBe('unavailable');
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 1, dropped: 2, rejected: 2, retries: 0, pending: 0 });
    const refusal = log.find(
      (entry) =>
        entry.message ===
        'audit sink refused a batch with a permanent error: its records are dropped, not retried',
    );
    expect((refusal!.fields.err as Error).message).toBe(
      `audit file ${path}: fdatasync failed (EIO: i/o error); records written since the last good sync may not be on disk, so this sink acknowledges none until the audit is restarted`,
    );
    // A-2 reached the file (its sync failed) and stays: its call ran. A-3 was never written.
    expect((await lines(path)).map((record) => [record.seq, (record.args as { id: string }).id])).toEqual([
      [1, 'A-1'],
      [2, 'A-2'],
    ]);
    await closeConnections();
    // A restart reads the file's tail again and goes on from what it finds.
    const restarted = createAudit({
      sink: createFileSink({ path, fsync: true }),
      chainId: 'fsync',
      durable: true,
      logger: recordingLogger([]),
    });
    const again = await serve([restarted]);
    const result = await again.callTool('get_order', { id: 'A-4' });
    expect(result.isError).toBeFalsy();
    await restarted.close();
    expect((await lines(path)).map((record) => record.seq)).toEqual([1, 2, 3]);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 3 });
  });
});

describe.each(databases)('an insider with write access to the table, on $name', ({ open }) => {
  const suite = suiteDatabase(open);

  it('a deleted row, a rewritten row, a deleted chain and a cut tail: each named, the cut one by its head', async () => {
    const table = suite.newTable();
    const { client } = suite.db;
    for (const chainId of ['pod-a', 'pod-b']) {
      const audit = createAudit({ sink: createPostgresSink({ client, table }), chainId });
      const served = await serve([audit]);
      for (let index = 1; index <= 3; index += 1)
        await served.callTool('get_order', { id: `${chainId}-${index}` });
      await audit.close();
      await closeConnections();
    }
    const intact = await verifyAuditTable({ client, table });
    expect(intact).toMatchObject({ intact: true, records: 6 });
    const row = async (chain: string, seq: number): Promise<AuditRecord> => {
      const { rows } = await client.query(
        `SELECT record::text AS r FROM ${table} WHERE chain = $1 AND seq = $2`,
        [chain, seq],
      );
      return JSON.parse((rows[0] as { r: string }).r) as AuditRecord;
    };
    // A rewritten row whose hash (and hash column) was recomputed: the next row no longer links.
    const original = await row('pod-a', 2);
    const [forged] = forge([{ ...original, outcome: 'permission_denied' }], original.prevHash);
    await client.query(
      `UPDATE ${table} SET record = $1::json, outcome = 'permission_denied', hash = $2 WHERE chain = 'pod-a' AND seq = 2`,
      [forged, JSON.parse(forged!).hash],
    );
    await expect(verifyAuditTable({ client, table })).resolves.toMatchObject({
      intact: false,
      brokenAt: 3,
      reason:
        'record 3 (seq 3) does not link to the previous record of its chain: its prevHash differs (a record was inserted or replaced)',
    });
    // A middle row deleted.
    await client.query(`DELETE FROM ${table} WHERE chain = 'pod-b' AND seq = 2`);
    await expect(verifyAuditTable({ client, table, chain: 'pod-b' })).resolves.toMatchObject({
      intact: false,
      brokenAt: 2,
      reason:
        'record 2 does not follow the previous record of its chain: seq jumps from 1 to 3 (a record was deleted or moved)',
    });
    // The newest chain's tail cut: consistent, but its head is not the one stored elsewhere.
    await client.query(`DELETE FROM ${table} WHERE chain = 'pod-b' AND seq > 1`);
    const cut = await verifyAuditTable({ client, table, chain: 'pod-b' });
    expect(cut).toMatchObject({ intact: true, records: 1 });
    expect(cut.intact && cut.head).not.toBe(intact.intact && intact.head);
    // pod-a's last row deleted: pod-b named it.
    await client.query(`DELETE FROM ${table} WHERE chain = 'pod-a' AND seq = 3`);
    await expect(verifyAuditTable({ client, table, chain: 'pod-b' })).resolves.toMatchObject({
      intact: false,
      brokenAt: 1,
      reason:
        'record 1 (seq 1) starts after record 3 of chain pod-a, which is missing: a chain or its last records were deleted',
    });
  });
});

const url = process.env.TEST_DATABASE_URL;
if (url === undefined) {
  reportMissingService(
    it,
    'PostgreSQL through a fault proxy (outage mid-batch, lost acknowledgements, close in flight)',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
} else {
  describe('faults on PostgreSQL, through a fault proxy', () => {
    const suite = suiteDatabase(databases.find((database) => database.name === 'PostgreSQL')!.open);

    async function proxied(): Promise<{ pool: pg.Pool; proxy: Awaited<ReturnType<typeof startFaultProxy>> }> {
      const target = new URL(url!);
      const proxy = await startFaultProxy({ host: '127.0.0.1', port: Number(target.port || 5432) });
      target.host = `127.0.0.1:${proxy.port}`;
      const pool = new pg.Pool({
        connectionString: target.toString(),
        max: 2,
        connectionTimeoutMillis: 2_000,
      });
      pool.on('error', () => {});
      return { pool, proxy };
    }

    async function count(table: string): Promise<number> {
      const { rows } = await suite.db.client.query(`SELECT count(DISTINCT hash)::int AS n FROM ${table}`);
      return (rows[0] as { n: number }).n;
    }

    it.each([{ copy: true }, { copy: false }])(
      'PostgreSQL goes away mid-load and comes back (copy: $copy): every record stored once, the chain intact',
      async ({ copy }) => {
        const table = suite.newTable();
        const { pool, proxy } = await proxied();
        const audit = createAudit({
          sink: createPostgresSink({ client: pool, table, copy }),
          batchSize: 16,
          logger: recordingLogger([]),
        });
        await audit.ready();
        const served = await serve([audit]);
        const first = Array.from({ length: 40 }, (_, index) =>
          served.callTool('get_order', { id: `A-${index}` }),
        );
        await proxy.down();
        const during = Array.from({ length: 40 }, (_, index) =>
          served.callTool('get_order', { id: `B-${index}` }),
        );
        await Promise.all([...first, ...during]);
        await proxy.up();
        await audit.close();
        await pool.end();
        await proxy.close();
        expect(audit.stats()).toMatchObject({ written: 80, dropped: 0, rejected: 0 });
        expect(await count(table)).toBe(80);
        await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
          intact: true,
          records: 80,
        });
      },
    );

    it('acknowledgements lost while batches commit: each retried batch is recognised, none stored twice or dropped', async () => {
      const table = suite.newTable();
      const { pool, proxy } = await proxied();
      const audit = createAudit({
        sink: createPostgresSink({ client: pool, table }),
        batchSize: 8,
        logger: recordingLogger([]),
      });
      await audit.ready();
      const served = await serve([audit]);
      const lost = proxy.loseReplies(100);
      await Promise.all(
        Array.from({ length: 60 }, (_, index) => served.callTool('get_order', { id: `A-${index}` })),
      );
      await lost;
      await audit.close();
      await pool.end();
      await proxy.close();
      expect(audit.stats()).toMatchObject({ written: 60, dropped: 0, rejected: 0 });
      expect(await count(table)).toBe(60);
      await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
        intact: true,
        records: 60,
      });
    });

    it('close() while a write hangs in a partition: once the network heals, close() stores everything, once', async () => {
      const table = suite.newTable();
      const { pool, proxy } = await proxied();
      const audit = createAudit({
        sink: createPostgresSink({ client: pool, table }),
        closeTimeoutMs: 20_000,
        logger: recordingLogger([]),
      });
      await audit.ready();
      const served = await serve([audit]);
      proxy.blackhole();
      await Promise.all(
        Array.from({ length: 30 }, (_, index) => served.callTool('get_order', { id: `A-${index}` })),
      );
      const closed = audit.close();
      await new Promise((resolve) => setTimeout(resolve, 50));
      proxy.heal();
      await closed;
      await pool.end();
      await proxy.close();
      expect(audit.stats()).toMatchObject({ written: 30, dropped: 0, pending: 0 });
      expect(await count(table)).toBe(30);
      await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
        intact: true,
        records: 30,
      });
    });
  });
}

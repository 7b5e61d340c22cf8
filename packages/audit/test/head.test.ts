// The chain's head as the writer stored it (audit.head()), kept elsewhere and handed back to the
// verifiers as `expect`: records cut off a chain's end, a chain deleted whole or rewritten are found.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canonicalJson, createSilentLogger } from '@toolgate/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type AuditHead,
  type AuditRecord,
  type AuditSink,
  AuditSinkError,
  createAudit,
  createFileSink,
  createPostgresSink,
  verifyAuditFile,
  verifyAuditLines,
  verifyAuditTable,
} from '../src/index.js';
import { databases, suiteDatabase } from './database.js';
import { closeConnections, serve } from './helpers.js';

const KEY = randomBytes(32);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-head-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(closeConnections);

const headOf = (record: AuditRecord): AuditHead => ({
  chainId: record.chainId,
  seq: record.seq,
  hash: record.hash,
});

const readLines = async (path: string): Promise<string[]> =>
  (await readFile(path, 'utf8')).split('\n').filter((line) => line !== '');

describe('audit.head()', () => {
  it('is undefined before anything is stored, then the last stored record; a restart starts from the stored head', async () => {
    const path = join(dir, 'head.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'pod-h', key: KEY });
    expect(audit.head()).toBeUndefined();
    const client = await serve([audit]);
    for (let index = 1; index <= 3; index += 1) await client.callTool('get_order', { id: `A-${index}` });
    await audit.flush();
    const records = (await readLines(path)).map((line) => JSON.parse(line) as AuditRecord);
    expect(audit.head()).toEqual({ chainId: 'pod-h', seq: 3, hash: records[2]!.hash });
    await audit.close();
    await closeConnections();

    const again = createAudit({ sink: createFileSink(path), chainId: 'pod-h', key: KEY });
    expect(again.head()).toBeUndefined();
    await again.ready();
    expect(again.head()).toEqual({ chainId: 'pod-h', seq: 3, hash: records[2]!.hash });
    await again.close();
  });

  it('moves only when the sink acknowledged the batch, not when the record is queued', async () => {
    let release: () => void = () => {};
    let held: Promise<void> = Promise.resolve();
    const stored: string[] = [];
    const sink: AuditSink = {
      async write(batch) {
        await held;
        stored.push(...batch.lines);
      },
    };
    const audit = createAudit({ sink, chainId: 'pod-g' });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await audit.flush();
    const first = audit.head();
    expect(first).toEqual({ chainId: 'pod-g', seq: 1, hash: JSON.parse(stored[0]!).hash });

    held = new Promise<void>((resolve) => {
      release = resolve;
    });
    // Answered at once (not durable); its record is sealed and handed to the sink, which holds it.
    await client.callTool('get_order', { id: 'A-2' });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(audit.stats().pending).toBe(1);
    expect(audit.head()).toEqual(first);
    release();
    await audit.flush();
    expect(audit.head()).toEqual({ chainId: 'pod-g', seq: 2, hash: JSON.parse(stored[1]!).hash });
    await audit.close();
  });

  it('stays put when the sink refuses a batch for good (those records were never stored)', async () => {
    let refuse = false;
    const sink: AuditSink = {
      async write() {
        if (refuse) throw new AuditSinkError('refused', { permanent: true });
      },
    };
    const audit = createAudit({ sink, chainId: 'pod-r', logger: createSilentLogger() });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await audit.flush();
    const before = audit.head();
    expect(before).toMatchObject({ chainId: 'pod-r', seq: 1 });
    refuse = true;
    await client.callTool('get_order', { id: 'A-2' });
    await audit.flush();
    expect(audit.stats()).toMatchObject({ written: 1, rejected: 1 });
    expect(audit.head()).toEqual(before);
    await audit.close();
  });
});

describe('verifying with an expected head (a file on disk)', () => {
  let path: string;
  let lines: string[];
  let records: AuditRecord[];
  let head: AuditHead;

  beforeAll(async () => {
    path = join(dir, 'expect.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'pod-e', key: KEY });
    const client = await serve([audit]);
    for (let index = 1; index <= 5; index += 1) await client.callTool('get_order', { id: `A-${index}` });
    await audit.flush();
    head = audit.head()!;
    await audit.close();
    await closeConnections();
    lines = await readLines(path);
    records = lines.map((line) => JSON.parse(line) as AuditRecord);
  });

  it('the head the writer gave is the last line of the file; the untouched file verifies with it', async () => {
    expect(head).toEqual(headOf(records[4]!));
    await expect(verifyAuditFile(path, { keys: KEY, expect: head })).resolves.toEqual({
      intact: true,
      records: 5,
      head: head.hash,
      chains: [{ chain: 'pod-e', intact: true, records: 5, head: head.hash }],
    });
    // An older head is still in the chain.
    await expect(
      verifyAuditFile(path, { keys: KEY, expect: [headOf(records[1]!), head] }),
    ).resolves.toMatchObject({ intact: true, records: 5 });
  });

  it('the last two records cut off the file: reported as a cut tail, past the last line', async () => {
    const cut = join(dir, 'cut.jsonl');
    await writeFile(cut, `${lines.slice(0, 3).join('\n')}\n`);
    // Without the head the shorter chain is consistent: that is what the head is for.
    await expect(verifyAuditFile(cut, { keys: KEY })).resolves.toMatchObject({ intact: true, records: 3 });
    await expect(verifyAuditFile(cut, { keys: KEY, expect: head })).resolves.toEqual({
      intact: false,
      records: 3,
      brokenAt: 4,
      reason: `chain pod-e ends at seq 3 but seq 5 (hash ${head.hash}) was expected: records were cut off the end`,
      chains: [
        {
          chain: 'pod-e',
          intact: false,
          records: 3,
          brokenAt: 4,
          reason: `chain pod-e ends at seq 3 but seq 5 (hash ${head.hash}) was expected: records were cut off the end`,
        },
      ],
    });
  });

  it('a chain rewritten whole (here unkeyed, verified without keys) is found by the hash it should hold', async () => {
    const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
    let previous = '0'.repeat(64);
    const rewritten = records.map(({ hash: _hash, keyId: _keyId, ...rest }, index) => {
      const canonical = canonicalJson({
        ...rest,
        prevHash: previous,
        ...(index === 2 && { outcome: 'permission_denied' }),
      });
      previous = sha256(canonical);
      return `${canonical.slice(0, -1)},"hash":"${previous}"}`;
    });
    await expect(verifyAuditLines(rewritten)).resolves.toMatchObject({ intact: true, records: 5 });
    await expect(verifyAuditLines(rewritten, { expect: head })).resolves.toMatchObject({
      intact: false,
      records: 5,
      brokenAt: 5,
      reason: `record 5 (seq 5) of chain pod-e has a different hash than the expected ${head.hash}: the chain was rewritten`,
    });
  });

  it('a chain deleted whole: the expectation names it', async () => {
    const ghost = { chainId: 'pod-gone', seq: 2, hash: 'a'.repeat(64) };
    await expect(verifyAuditFile(path, { keys: KEY, expect: [head, ghost] })).resolves.toMatchObject({
      intact: false,
      records: 5,
      brokenAt: 6,
      reason: `chain pod-gone has no records but seq 2 (hash ${'a'.repeat(64)}) was expected: the chain was deleted`,
      chains: [
        { chain: 'pod-e', intact: true, records: 5 },
        { chain: 'pod-gone', intact: false, records: 0, brokenAt: 6 },
      ],
    });
  });

  it('a break inside the chain is reported first, as before', async () => {
    const edited = [...lines];
    edited[1] = edited[1]!.replace('"A-2"', '"A-9"');
    await expect(verifyAuditLines(edited, { keys: KEY, expect: head })).resolves.toMatchObject({
      intact: false,
      brokenAt: 2,
      reason: 'record 2 (seq 2) was altered: its content does not match its hash',
    });
  });

  it('refuses a malformed expectation', async () => {
    await expect(
      verifyAuditFile(path, { expect: { chainId: 'pod-e', seq: 0, hash: head.hash } }),
    ).rejects.toThrow(
      new RangeError(
        'verifyAuditFile: expect must be { chainId, seq, hash } (a string, a positive integer and 64 hex digits)',
      ),
    );
  });
});

describe.each(databases)('verifying a table with an expected head, on $name', ({ open }) => {
  const suite = suiteDatabase(open);

  it('rows cut off the end of a chain are found by its head; one chain verified alone cannot be asked about another', async () => {
    const table = suite.newTable();
    const { client } = suite.db;
    const heads: AuditHead[] = [];
    for (const chainId of ['pod-a', 'pod-b']) {
      const audit = createAudit({ sink: createPostgresSink({ client, table }), chainId, key: KEY });
      const served = await serve([audit]);
      for (let index = 1; index <= 4; index += 1)
        await served.callTool('get_order', { id: `${chainId}-${index}` });
      await audit.close();
      heads.push(audit.head()!);
      await closeConnections();
    }
    expect(heads.map(({ chainId, seq }) => [chainId, seq])).toEqual([
      ['pod-a', 4],
      ['pod-b', 4],
    ]);
    await expect(verifyAuditTable({ client, table, keys: KEY, expect: heads })).resolves.toMatchObject({
      intact: true,
      records: 8,
    });
    await client.query(`DELETE FROM ${table} WHERE chain = 'pod-b' AND seq > 2`);
    await expect(verifyAuditTable({ client, table, keys: KEY })).resolves.toMatchObject({ intact: true });
    const reason = `chain pod-b ends at seq 2 but seq 4 (hash ${heads[1]!.hash}) was expected: records were cut off the end`;
    await expect(verifyAuditTable({ client, table, keys: KEY, expect: heads })).resolves.toMatchObject({
      intact: false,
      records: 6,
      brokenAt: 3,
      reason,
    });
    await expect(
      verifyAuditTable({ client, table, keys: KEY, chain: 'pod-b', expect: heads[1]! }),
    ).resolves.toMatchObject({ intact: false, records: 2, brokenAt: 3, reason });
    await expect(
      verifyAuditTable({ client, table, keys: KEY, chain: 'pod-b', expect: heads }),
    ).rejects.toThrow(
      new RangeError('verifyAuditTable: expect names chain "pod-a", but only chain "pod-b" is verified'),
    );
    await client.query(`DELETE FROM ${table} WHERE chain = 'pod-b'`);
    await expect(verifyAuditTable({ client, table, keys: KEY, expect: heads })).resolves.toMatchObject({
      intact: false,
      records: 4,
      brokenAt: 1,
      reason: `chain pod-b has no records but seq 4 (hash ${heads[1]!.hash}) was expected: the chain was deleted`,
    });
  });
});

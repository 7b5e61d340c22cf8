import { pbkdf2 } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { appendFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type AuditBatch, createAudit, createFileSink, GENESIS_HASH, verifyAuditFile } from '../src/index.js';
import { cli, closeConnections, serve } from './helpers.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-'));
});
afterEach(async () => {
  await closeConnections();
  await rm(dir, { recursive: true, force: true });
});

/**
 * Keeps every thread of libuv's pool busy for a while (key derivations): a write handed to the pool
 * meanwhile cannot have run yet, so what is in a file at once was written synchronously.
 */
function occupyThreadPool(): Promise<unknown> {
  const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  return Promise.all(
    Array.from(
      { length: threads },
      () =>
        new Promise((resolve, reject) =>
          pbkdf2('x', 'salt', 300_000, 32, 'sha256', (error) => (error ? reject(error) : resolve(undefined))),
        ),
    ),
  );
}

async function lines(path: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(path, 'utf8');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('file sink', () => {
  it('1,000 concurrent calls through a real client, then close(): exactly 1,000 records, chain intact', async () => {
    const path = join(dir, 'audit.jsonl');
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createFileSink(path),
      logger: recordingLogger(log),
      batchSize: 64,
    });
    const client = await serve([audit]);
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, index) => client.callTool('get_order', { id: `A-${index}` })),
    );
    expect(results.every((result) => result.isError !== true)).toBe(true);
    await audit.close();
    const records = await lines(path);
    expect(records).toHaveLength(1000);
    expect(records.map((record) => record.seq)).toEqual(
      Array.from({ length: 1000 }, (_, index) => index + 1),
    );
    expect(new Set(records.map((record) => (record.args as { id: string }).id)).size).toBe(1000);
    expect(audit.stats()).toMatchObject({ written: 1000, dropped: 0, pending: 0 });
    expect(log).toEqual([]);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: true,
      records: 1000,
      head: records[999]!.hash,
      chains: [{ chain: audit.stats().chainId, intact: true, records: 1000 }],
    });
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it('batches of every size in turn (a large one, then small ones, then many): each line written once, whole, and the chain intact', async () => {
    // The file sink's batches are sealed into one buffer, reused and grown: a small batch after a
    // large one must write only its own lines, and a line larger than the buffer must grow it.
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'sizes' });
    const client = await serve([audit]);
    const large = 'x'.repeat(30_000);
    const sent: unknown[] = [];
    const call = async (value: unknown): Promise<void> => {
      sent.push(value);
      const result = await client.callTool('echo', { value });
      expect(result.isError).not.toBe(true);
    };
    await call('first');
    await audit.flush();
    await call(large);
    await audit.flush();
    await call('small after large');
    await audit.flush();
    await Promise.all(Array.from({ length: 300 }, (_, index) => call(`many-${index}`)));
    await audit.flush();
    await call(`${large}${large}`);
    await call('last');
    await audit.close();
    const records = await lines(path);
    expect(records.map((record) => (record.args as { value: unknown }).value)).toEqual(sent);
    expect(records.map((record) => record.seq)).toEqual(sent.map((_, index) => index + 1));
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: sent.length });
  });

  it('a reopened file continues its chain from the last line when the chain id is the same', async () => {
    const path = join(dir, 'audit.jsonl');
    for (const run of [1, 2]) {
      const audit = createAudit({ sink: createFileSink(path), chainId: 'pod-a' });
      const client = await serve([audit]);
      await client.callTool('get_order', { id: `run-${run}-a` });
      await client.callTool('get_order', { id: `run-${run}-b` });
      await audit.close();
      await closeConnections();
    }
    const records = await lines(path);
    expect(records.map((record) => [record.seq, (record.args as { id: string }).id])).toEqual([
      [1, 'run-1-a'],
      [2, 'run-1-b'],
      [3, 'run-2-a'],
      [4, 'run-2-b'],
    ]);
    expect(records[0]!.prevHash).toBe(GENESIS_HASH);
    expect(records[2]!.prevHash).toBe(records[1]!.hash);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 4 });
    // Another process (a derived chain id) starts its own chain after it; both verify.
    const other = createAudit({ sink: createFileSink(path) });
    await (await serve([other])).callTool('get_order', { id: 'other' });
    await other.close();
    const after = await lines(path);
    expect(after[4]).toMatchObject({
      seq: 1,
      prevHash: GENESIS_HASH,
      chainId: other.stats().chainId,
      // It names the last record before it, so that chain cannot be deleted whole unnoticed.
      after: { chainId: 'pod-a', seq: 4, hash: records[3]!.hash },
    });
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: true,
      records: 5,
      chains: [
        { chain: 'pod-a', intact: true, records: 4 },
        { chain: other.stats().chainId, intact: true, records: 1 },
      ],
    });
  });

  it('a chain deleted whole is found: the chain that began after it names its last record', async () => {
    const path = join(dir, 'audit.jsonl');
    for (const chainId of ['run-1', 'run-2', 'run-3']) {
      const audit = createAudit({ sink: createFileSink(path), chainId });
      const client = await serve([audit]);
      await client.callTool('get_order', { id: `${chainId}-a` });
      await client.callTool('get_order', { id: `${chainId}-b` });
      await audit.close();
      await closeConnections();
    }
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 6 });
    const text = await readFile(path, 'utf8');
    const kept = text.split('\n').filter((line) => line !== '');
    // The middle run's records removed: every other line still hashes and links within its chain.
    await writeFile(path, `${[...kept.slice(0, 2), ...kept.slice(4)].join('\n')}\n`);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      brokenAt: 3,
      reason:
        'record 3 (seq 1) starts after record 2 of chain run-2, which is missing: a chain or its last records were deleted',
    });
    // The first run's records removed: the second run names them.
    await writeFile(path, `${kept.slice(2).join('\n')}\n`);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      brokenAt: 1,
      reason:
        'record 1 (seq 1) starts after record 2 of chain run-1, which is missing: a chain or its last records were deleted',
    });
  });

  it('the verifier names a torn end (the file stops inside a line) apart from a line that is not a record', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'pod-a' });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'one' });
    await client.callTool('get_order', { id: 'two' });
    await audit.close();
    const [one, two] = (await readFile(path, 'utf8')).split('\n');
    await writeFile(path, `${one}\n${two!.slice(0, 40)}`);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      records: 1,
      brokenAt: 2,
      reason:
        'record 2 is torn: the file ends inside it (a write cut short, e.g. by a crash); the records before it are intact',
    });
    // The same fragment with a newline after it, or with a line after it, is not a torn end.
    const notRecord = 'record 2 is not an audit record (not JSON, or no seq, hash and prevHash)';
    await writeFile(path, `${one}\n${two!.slice(0, 40)}\n`);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ brokenAt: 2, reason: notRecord });
    await writeFile(path, `${one}\n${two!.slice(0, 40)}\n${two}`);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ brokenAt: 2, reason: notRecord });
  });

  it('a torn last line (a crash mid-write) is closed off; the chain continues from the last whole record', async () => {
    const path = join(dir, 'audit.jsonl');
    const first = createAudit({ sink: createFileSink(path), chainId: 'pod-a' });
    await (await serve([first])).callTool('get_order', { id: 'before' });
    await first.close();
    await appendFile(path, '{"seq":2,"tor');
    const second = createAudit({ sink: createFileSink(path), chainId: 'pod-a' });
    await (await serve([second])).callTool('get_order', { id: 'after' });
    await second.close();
    const text = await readFile(path, 'utf8');
    const [one, torn, three] = text.split('\n');
    expect(torn).toBe('{"seq":2,"tor');
    expect(JSON.parse(three!)).toMatchObject({
      seq: 2,
      prevHash: JSON.parse(one!).hash,
      args: { id: 'after' },
    });
    // Reported, and the record after it checked too (it links to the one before the torn line).
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      records: 2,
      brokenAt: 2,
      reason: 'record 2 is not an audit record (not JSON, or no seq, hash and prevHash)',
    });
  });

  it.each([
    ['a short record', 'small', 65_536],
    ['a record longer than the 64 KiB read from the end', 'x'.repeat(100_000), 200_000],
  ])(
    'a crash that cut only the final newline (%s): the record stays the last, the restarted writer closes its line and goes on; verify passes',
    async (_, value, maxArgsChars) => {
      const path = join(dir, 'audit.jsonl');
      const first = createAudit({ sink: createFileSink(path), chainId: 'pod-a', maxArgsChars });
      const client = await serve([first]);
      for (const id of ['one', 'two']) await client.callTool('echo', { value: { id, pad: value } });
      await first.close();
      const whole = await readFile(path, 'utf8');
      // The crash: the last record is in the file whole, its newline never reached it.
      await writeFile(path, whole.slice(0, -1));
      await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 2 });
      const second = createAudit({ sink: createFileSink(path), chainId: 'pod-a', maxArgsChars });
      const restarted = await serve([second]);
      for (const id of ['three', 'four']) await restarted.callTool('echo', { value: { id, pad: value } });
      await second.close();
      expect(second.stats()).toMatchObject({ written: 2, rejected: 0, dropped: 0 });
      const text = await readFile(path, 'utf8');
      expect(text.startsWith(whole)).toBe(true);
      const records = await lines(path);
      expect(
        records.map((record) => [record.seq, (record.args as { value: { id: string } }).value.id]),
      ).toEqual([
        [1, 'one'],
        [2, 'two'],
        [3, 'three'],
        [4, 'four'],
      ]);
      expect(records[2]!.prevHash).toBe(records[1]!.hash);
      await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 4 });
      const verified = await cli('verify', path);
      expect(verified).toMatchObject({ code: 0, stderr: '' });
      expect(verified.stdout).toMatch(/4 records/);
    },
  );

  it('refuses to append after a line that is not an audit record: a permanent error, counted, not retried', async () => {
    const path = join(dir, 'not-audit.log');
    await writeFile(path, 'hello world\n');
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createFileSink(path),
      logger: recordingLogger(log),
    });
    await (await serve([audit])).callTool('get_order', { id: 'A-1' });
    await audit.close();
    expect(await readFile(path, 'utf8')).toBe('hello world\n');
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 1, rejected: 1, retries: 0, pending: 0 });
    expect(log.map((entry) => [entry.level, entry.message])).toEqual([
      ['error', 'audit sink refused a batch with a permanent error: its records are dropped, not retried'],
    ]);
    expect((log[0]!.fields.err as Error).message).toMatch(/last line is not an audit record/);
  });

  it('writes a batch up to syncWriteMaxBytes at once, synchronously; a larger one, or every one with 0, on the thread pool', async () => {
    const path = join(dir, 'writes.jsonl');
    const batchOf = (text: string) => ({ chainId: 'c', bytes: Buffer.from(text) }) as unknown as AuditBatch;
    const small = `${'a'.repeat(99)}\n`;
    const large = `${'b'.repeat(100)}\n`;
    const sink = createFileSink({ path, syncWriteMaxBytes: 100 });
    await sink.head!('c');
    // With the thread pool busy, in the file before write() settled: the write happened in the call.
    let busy = occupyThreadPool();
    const smallWrite = sink.write(batchOf(small));
    expect(readFileSync(path, 'utf8')).toBe(small);
    await Promise.all([smallWrite, busy]);
    // 101 bytes: over the limit, so queued behind the busy pool, and in the file once it settled.
    busy = occupyThreadPool();
    const largeWrite = sink.write(batchOf(large));
    expect(readFileSync(path, 'utf8')).toBe(small);
    await Promise.all([largeWrite, busy]);
    expect(readFileSync(path, 'utf8')).toBe(small + large);
    await sink.close!();

    const pooledPath = join(dir, 'pooled.jsonl');
    const pooled = createFileSink({ path: pooledPath, syncWriteMaxBytes: 0 });
    await pooled.head!('c');
    busy = occupyThreadPool();
    const pooledWrite = pooled.write(batchOf(small));
    expect(readFileSync(pooledPath, 'utf8')).toBe('');
    await Promise.all([pooledWrite, busy]);
    expect(readFileSync(pooledPath, 'utf8')).toBe(small);
    await pooled.close!();
  });

  it('1,000 calls whose batches take both paths (a 2,000-byte limit): every record stored once, chain intact', async () => {
    const path = join(dir, 'mixed.jsonl');
    const audit = createAudit({ sink: createFileSink({ path, syncWriteMaxBytes: 2_000 }), batchSize: 16 });
    const client = await serve([audit]);
    // Waves of different sizes: single calls (one small batch each) and bursts (batches of 16).
    for (let wave = 0; wave < 20; wave += 1) {
      const size = wave % 2 === 0 ? 1 : 99;
      await Promise.all(
        Array.from({ length: size }, (_, index) => client.callTool('get_order', { id: `W${wave}-${index}` })),
      );
    }
    await audit.close();
    const records = await lines(path);
    expect(records).toHaveLength(1000);
    expect(records.map((record) => record.seq)).toEqual(
      Array.from({ length: 1000 }, (_, index) => index + 1),
    );
    expect(audit.stats()).toMatchObject({ written: 1000, dropped: 0, retries: 0, pending: 0 });
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 1000 });
  });

  it('refuses a syncWriteMaxBytes that is not a non-negative integer', () => {
    for (const syncWriteMaxBytes of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => createFileSink({ path: join(dir, 'x.jsonl'), syncWriteMaxBytes })).toThrow(
        /syncWriteMaxBytes must be a non-negative integer/,
      );
    }
  });
});

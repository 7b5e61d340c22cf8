import { execFile, execFileSync } from 'node:child_process';
import { closeSync, constants, createReadStream, openSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type AuditOptions,
  createAudit,
  createFileSink,
  createStderrSink,
  verifyAuditFile,
  verifyAuditLines,
} from '../src/index.js';
import { closeConnections, memorySink, serve } from './helpers.js';

const run = promisify(execFile);
const EXIT_SCRIPT = fileURLToPath(new URL('./fixtures/thread-exit.mjs', import.meta.url));
const KEY = 'k'.repeat(40);

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-thread-'));
});
afterEach(async () => {
  await closeConnections();
  await rm(dir, { recursive: true, force: true });
});

async function fileLines(path: string): Promise<string[]> {
  const text = await readFile(path, 'utf8');
  return text.split('\n').filter((line) => line !== '');
}

/** A record without what differs between two runs of the same calls (times, chain, links, incident ids). */
function comparable(line: string): Record<string, unknown> {
  const {
    time: _time,
    durationMs: _duration,
    chainId: _chain,
    hash: _hash,
    prevHash: _prev,
    incidentId,
    ...rest
  } = JSON.parse(line) as Record<string, unknown>;
  return { ...rest, incidentId: typeof incidentId === 'string' };
}

/** A thread audit writing to a named pipe made for the test (`name`), logging to `log`. */
function pipeAudit(name: string, log: LogEntry[], options: Partial<AuditOptions> = {}) {
  const path = join(dir, name);
  execFileSync('mkfifo', [path]);
  const audit = createAudit({
    sink: createFileSink(path),
    thread: true,
    logger: recordingLogger(log),
    ...options,
  });
  return { path, audit };
}

/** Whether close() reported records lost. */
const lostLogged = (log: readonly LogEntry[]): boolean =>
  log.some((entry) => entry.level === 'error' && /records lost/.test(entry.message ?? ''));

describe('thread: true', () => {
  it('1,000 concurrent then 200 sequential calls: every record, chain intact, stats and head from the thread', async () => {
    const path = join(dir, 'audit.jsonl');
    const log: LogEntry[] = [];
    const audit = createAudit({ sink: createFileSink(path), logger: recordingLogger(log), thread: true });
    const client = await serve([audit]);
    await audit.ready();
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, index) => client.callTool('get_order', { id: `A-${index}` })),
    );
    expect(results.every((result) => result.isError !== true)).toBe(true);
    for (let index = 0; index < 200; index += 1) await client.callTool('get_order', { id: `B-${index}` });
    await audit.flush();
    const stats = audit.stats();
    expect(stats).toMatchObject({ written: 1200, dropped: 0, rejected: 0, pending: 0, pendingBytes: 0 });
    const lines = await fileLines(path);
    expect(lines).toHaveLength(1200);
    const last = JSON.parse(lines.at(-1)!) as { seq: number; hash: string; chainId: string };
    expect(audit.head()).toEqual({ chainId: last.chainId, seq: 1200, hash: last.hash });
    const ids = lines.map((line) => (JSON.parse(line) as { args: { id: string } }).args.id);
    expect(new Set(ids).size).toBe(1200);
    await audit.close();
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 1200 });
    expect(log.filter((entry) => entry.level === 'error' || entry.level === 'warn')).toEqual([]);
  });

  it('writes the same records as the writer on the calls’ thread (errors, unknown tools, lone surrogates, previews, secrets)', async () => {
    const calls = async (thread: boolean): Promise<string[]> => {
      const path = join(dir, `same-${thread}.jsonl`);
      const audit = createAudit({
        sink: createFileSink(path),
        thread,
        chainId: 'same',
        maxArgsChars: 300,
      });
      const client = await serve([audit], undefined, { sessionId: 'session-é-1' });
      await client.callTool('get_order', { id: 'A-1', password: 'hunter2-secret' });
      await client.callTool('get_order', { id: 'missing' });
      await client.callTool('get_order', { id: 'crash' });
      await client.callTool('echo', {
        value: { text: 'x'.repeat(1000), emoji: '😀', lone: '\ud800', nul: '\u0000' },
      });
      // The SDK answers an unknown tool with a JSON-RPC error; audit records it all the same.
      await client.callTool('no_such_tool\ud800😀', { a: 1 }).catch(() => undefined);
      await client.callTool('echo', { value: 'token=ghp_abcdefghijklmnopqrstuvwxyz0123456789' });
      await audit.close();
      return fileLines(path);
    };
    const inThread = await calls(false);
    const threaded = await calls(true);
    expect(threaded).toHaveLength(6);
    expect(threaded.map(comparable)).toEqual(inThread.map(comparable));
    const unknown = JSON.parse(threaded[4]!) as { tool: string; unknownTool: boolean };
    expect(unknown.unknownTool).toBe(true);
    expect(unknown.tool).toBe('no_such_tool\ud800😀');
    expect(threaded.join('\n')).not.toContain('hunter2');
    expect(threaded.join('\n')).not.toContain('ghp_abcdefghij');
    await expect(verifyAuditFile(join(dir, 'same-true.jsonl'))).resolves.toMatchObject({ intact: true });
  });

  it('durable: each answer leaves only once its record is in the file', async () => {
    const path = join(dir, 'durable.jsonl');
    const audit = createAudit({ sink: createFileSink(path), thread: true, durable: true });
    const client = await serve([audit]);
    for (let index = 0; index < 25; index += 1) {
      const result = await client.callTool('get_order', { id: `D-${index}` });
      expect(result.isError).not.toBe(true);
      const lines = await fileLines(path);
      expect(lines).toHaveLength(index + 1);
      expect(lines.at(-1)).toContain(`"D-${index}"`);
    }
    const concurrent = await Promise.all(
      Array.from({ length: 300 }, (_, index) => client.callTool('get_order', { id: `E-${index}` })),
    );
    expect(concurrent.every((result) => result.isError !== true)).toBe(true);
    expect(await fileLines(path)).toHaveLength(325);
    await audit.close();
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 325 });
  });

  it('a keyed chain is hashed under the key on the thread; a chain the calls’ thread began continues', async () => {
    const path = join(dir, 'keyed.jsonl');
    const first = createAudit({ sink: createFileSink(path), key: KEY, chainId: 'pod-1' });
    const client1 = await serve([first]);
    for (let index = 0; index < 10; index += 1) await client1.callTool('get_order', { id: `K-${index}` });
    await first.close();
    const second = createAudit({ sink: createFileSink(path), key: KEY, chainId: 'pod-1', thread: true });
    const client2 = await serve([second]);
    await second.ready();
    expect(second.head()).toMatchObject({ seq: 10 });
    for (let index = 10; index < 30; index += 1) await client2.callTool('get_order', { id: `K-${index}` });
    await second.close();
    const lines = await fileLines(path);
    expect(lines.map((line) => (JSON.parse(line) as { seq: number }).seq)).toEqual(
      Array.from({ length: 30 }, (_, index) => index + 1),
    );
    expect(second.head()).toMatchObject({ chainId: 'pod-1', seq: 30 });
    await expect(verifyAuditFile(path, { keys: KEY })).resolves.toMatchObject({ intact: true, records: 30 });
    await expect(verifyAuditFile(path, { keys: 'o'.repeat(40) })).resolves.toMatchObject({ intact: false });
  });

  it('a record larger than a quarter of the ring goes by itself, between the others', async () => {
    const path = join(dir, 'big.jsonl');
    const audit = createAudit({
      sink: createFileSink(path),
      thread: true,
      maxBufferBytes: 256 * 1024,
      maxArgsChars: 1_000_000,
    });
    const client = await serve([audit]);
    const big = 'b'.repeat(100_000);
    for (let index = 0; index < 30; index += 1) {
      await client.callTool('echo', { value: index % 10 === 5 ? `${index}:${big}` : `${index}` });
    }
    await audit.flush();
    const lines = await fileLines(path);
    expect(lines).toHaveLength(30);
    const values = lines.map((line) => (JSON.parse(line) as { args: { value: string } }).args.value);
    expect(values.filter((value) => value.length > 100_000)).toHaveLength(3);
    expect(new Set(values.map((value) => value.split(':')[0])).size).toBe(30);
    await audit.close();
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 30 });
  });

  it('a sink that stalls (a pipe nobody reads): calls wait, then records are dropped and counted; the rest arrive intact', async () => {
    const log: LogEntry[] = [];
    const { path, audit } = pipeAudit('stalled.fifo', log, { maxBufferBytes: 64 * 1024, maxWaitMs: 50 });
    const client = await serve([audit]);
    const note = 'n'.repeat(400);
    const results = await Promise.all(
      Array.from({ length: 600 }, (_, index) => client.callTool('get_order', { id: `S-${index}`, note })),
    );
    // Not durable: every answer leaves; records that found no room within maxWaitMs are dropped.
    expect(results.every((result) => result.isError !== true)).toBe(true);
    const held = audit.stats();
    expect(held.written).toBe(0);
    expect(held.dropped).toBeGreaterThan(300);
    expect(held.dropped + held.pending).toBe(600);
    expect(log.some((entry) => entry.message === 'audit records dropped')).toBe(true);
    // Someone reads the pipe now: what was held goes through.
    const reader = createReadStream(path);
    const chunks: Buffer[] = [];
    reader.on('data', (chunk) => chunks.push(chunk as Buffer));
    const ended = new Promise<void>((resolve) => reader.on('close', () => resolve()));
    await audit.close();
    await ended;
    const lines = Buffer.concat(chunks)
      .toString('utf8')
      .split('\n')
      .filter((line) => line !== '');
    const stats = audit.stats();
    expect(lines).toHaveLength(held.pending);
    expect(stats).toMatchObject({ written: held.pending, dropped: held.dropped, pending: 0 });
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({ intact: true, records: held.pending });
  });

  it('close() gives up on a sink that never answers, counts what it held as lost, and says so', async () => {
    const log: LogEntry[] = [];
    const { path, audit } = pipeAudit('hung.fifo', log, { closeTimeoutMs: 100 });
    const client = await serve([audit]);
    for (let index = 0; index < 20; index += 1) await client.callTool('get_order', { id: `H-${index}` });
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 20, pending: 0 });
    expect(lostLogged(log)).toBe(true);
    expect(audit.head()).toBeUndefined();
    // The thread's open() still waits in libuv's pool for a reader: give it one, so it returns.
    closeSync(openSync(path, constants.O_RDONLY | constants.O_NONBLOCK));
  });

  it('close() does not wait on a thread stuck in a write (a full pipe): what it held is counted as lost, once', async () => {
    const log: LogEntry[] = [];
    const { path, audit } = pipeAudit('full.fifo', log, { closeTimeoutMs: 100 });
    // A reader that never reads: the pipe takes 64 KiB, then the thread's synchronous write blocks it.
    const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const client = await serve([audit]);
    const note = 'f'.repeat(2_000);
    for (let index = 0; index < 60; index += 1) {
      await client.callTool('get_order', { id: `F-${index}`, note });
    }
    await audit.close();
    const stats = audit.stats();
    expect(stats).toMatchObject({ written: 0, pending: 0 });
    expect(stats.dropped).toBe(60);
    expect(lostLogged(log)).toBe(true);
    // The stuck write fails once the reader goes (EPIPE); the count stays as it was.
    closeSync(reader);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(audit.stats()).toEqual(stats);
  });

  it('a sink that refuses for good: ready() rejects, records are counted as dropped, the thread’s log reaches the logger', async () => {
    const path = join(dir, 'no-such-directory', 'audit.jsonl');
    const log: LogEntry[] = [];
    const audit = createAudit({ sink: createFileSink(path), thread: true, logger: recordingLogger(log) });
    await expect(audit.ready()).rejects.toThrow(/refused/);
    const client = await serve([audit]);
    for (let index = 0; index < 5; index += 1) await client.callTool('get_order', { id: `R-${index}` });
    await audit.flush();
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 5, rejected: 5, pending: 0 });
    const refused = log.find((entry) => entry.level === 'error' && /permanent/.test(entry.message ?? ''));
    expect(refused).toBeDefined();
    expect((refused!.fields.err as { code?: string }).code).toBe('ENOENT');
    await audit.close();
  });

  it('a process that never calls close() still writes every record, and exits', async () => {
    const path = join(dir, 'exit.jsonl');
    const { stderr } = await run(process.execPath, [EXIT_SCRIPT, path, '300'], { timeout: 30_000 });
    expect(stderr).toBe('');
    const lines = await fileLines(path);
    expect(lines).toHaveLength(300);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 300 });
  });

  it('needs a file sink: any other sink is refused at once', () => {
    expect(() => createAudit({ sink: createStderrSink(), thread: true })).toThrow(TypeError);
    expect(() => createAudit({ sink: memorySink().sink, thread: true })).toThrow(/createFileSink/);
  });

  it('after close(): records are dropped and counted, durable calls answer unavailable', async () => {
    const path = join(dir, 'closed.jsonl');
    const audit = createAudit({ sink: createFileSink(path), thread: true, durable: true });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'C-1' });
    await audit.close();
    const result = await client.callTool('get_order', { id: 'C-2' });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('unavailable');
    expect(audit.stats()).toMatchObject({ written: 1, dropped: 1 });
    expect(await fileLines(path)).toHaveLength(1);
  });
});

import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createSilentLogger } from '@toolgate/core';
import { expectFailure } from '@toolgate/core/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type AuditRecord, createAudit, createFileSink, createFunctionSink } from '../src/index.js';
import { closeConnections, serve } from './helpers.js';

// What the README promises of durable mode: no answer leaves without its record, and a record that
// is not stored within durableWaitMs turns the answer into `unavailable`, whatever the sink does (a
// transient error retried forever, a write that never settles). The record stays queued and is
// stored once when the sink takes it.

const WAIT_MS = 300;
const logger = createSilentLogger();
/** Far past WAIT_MS and a loaded machine's timer lag; the old code answered only at close(). */
const BOUND_MS = 5_000;

let dir: string;
const readers: number[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-durable-wait-'));
});
afterEach(async () => {
  await closeConnections();
  for (const fd of readers.splice(0)) closeSync(fd);
  await rm(dir, { recursive: true, force: true });
});

/** The answer, or 'pending' when none came within `ms` (the call goes on; the test fails on it). */
async function answerWithin(call: Promise<CallToolResult>, ms: number): Promise<CallToolResult | 'pending'> {
  call.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise<'pending'>((resolve) => {
    timer = setTimeout(() => resolve('pending'), ms);
  });
  try {
    return await Promise.race([call, pending]);
  } finally {
    clearTimeout(timer);
  }
}

async function until(check: () => boolean, ms = BOUND_MS): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function expectWithheld(answer: CallToolResult | 'pending'): void {
  expect(answer).not.toBe('pending');
  expect(expectFailure(answer as CallToolResult)).toMatchObject({
    error: 'unavailable',
    message: 'The call could not be recorded; its result is withheld.',
    retryable: true,
    retryAfterMs: 5_000,
  });
}

/** A function sink that fails with a transient error (a connection reset) until `failing` is cleared. */
function resettingSink(): { records: AuditRecord[]; attempts: () => number; recover: () => void } & {
  sink: ReturnType<typeof createFunctionSink>;
} {
  const records: AuditRecord[] = [];
  let failing = true;
  let attempts = 0;
  const sink = createFunctionSink((batch) => {
    attempts += 1;
    if (failing) throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    records.push(...batch);
  });
  return { records, sink, attempts: () => attempts, recover: () => (failing = false) };
}

describe('durableWaitMs: a durable call is answered within a bound whatever the sink does', () => {
  it('a sink failing transiently forever: unavailable after durableWaitMs; the record is stored once when it recovers', async () => {
    const { records, sink, attempts, recover } = resettingSink();
    const audit = createAudit({ sink, durable: true, durableWaitMs: WAIT_MS, logger });
    const client = await serve([audit]);

    const started = Date.now();
    const answer = await answerWithin(client.callTool('get_order', { id: 'A-1' }), BOUND_MS);
    const elapsed = Date.now() - started;
    expectWithheld(answer);
    expect(elapsed).toBeGreaterThanOrEqual(WAIT_MS - 5);
    // The sink was tried (and retried) meanwhile; the record still waits, neither stored nor dropped.
    expect(attempts()).toBeGreaterThan(1);
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 0, pending: 1 });

    recover();
    await audit.flush();
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ seq: 1, tool: 'get_order', args: { id: 'A-1' }, outcome: 'ok' });
    expect(audit.stats()).toMatchObject({ written: 1, dropped: 0, pending: 0 });

    // The sink takes records again: durable calls get their results, the chain goes on.
    expect(await client.callToolJson('get_order', { id: 'A-2' })).toMatchObject({ ok: true });
    await audit.close();
    expect(records.map((record) => [record.seq, (record.args as { id: string }).id])).toEqual([
      [1, 'A-1'],
      [2, 'A-2'],
    ]);
    expect(audit.stats()).toMatchObject({ written: 2, dropped: 0, pending: 0 });
  });

  it('a write that never settles: unavailable after durableWaitMs; stored once when the write returns', async () => {
    const records: AuditRecord[] = [];
    let release: (() => void) | undefined;
    let writes = 0;
    const sink = createFunctionSink(async (batch) => {
      writes += 1;
      if (writes === 1) await new Promise<void>((resolve) => (release = resolve));
      records.push(...batch);
    });
    const audit = createAudit({ sink, durable: true, durableWaitMs: WAIT_MS, logger });
    const client = await serve([audit]);

    expectWithheld(await answerWithin(client.callTool('get_order', { id: 'B-1' }), BOUND_MS));
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 0, pending: 1 });
    release!();
    await audit.flush();
    await audit.close();
    expect(records.map((record) => record.seq)).toEqual([1]);
    expect(audit.stats()).toMatchObject({ written: 1, dropped: 0, pending: 0 });
  });

  it('calls that begin waiting later each get the whole bound (one timer, re-armed)', async () => {
    const { records, sink, recover } = resettingSink();
    const audit = createAudit({ sink, durable: true, durableWaitMs: WAIT_MS, logger });
    const client = await serve([audit]);

    const first = Date.now();
    const early = answerWithin(client.callTool('get_order', { id: 'C-1' }), BOUND_MS);
    await new Promise((resolve) => setTimeout(resolve, WAIT_MS / 2));
    const second = Date.now();
    const late = answerWithin(client.callTool('get_order', { id: 'C-2' }), BOUND_MS);
    expectWithheld(await early);
    const earlyAt = Date.now();
    expectWithheld(await late);
    const lateAt = Date.now();
    expect(earlyAt - first).toBeGreaterThanOrEqual(WAIT_MS - 5);
    expect(lateAt - second).toBeGreaterThanOrEqual(WAIT_MS - 5);

    recover();
    await audit.close();
    expect(records.map((record) => (record.args as { id: string }).id)).toEqual(['C-1', 'C-2']);
    expect(audit.stats()).toMatchObject({ written: 2, dropped: 0, pending: 0 });
  });

  it('records stored within the bound: every call answers with its result', async () => {
    const records: AuditRecord[] = [];
    const sink = createFunctionSink((batch) => void records.push(...batch));
    const audit = createAudit({ sink, durable: true, durableWaitMs: WAIT_MS, logger });
    const client = await serve([audit]);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, index) => client.callToolJson('get_order', { id: `D-${index}` })),
    );
    for (const answer of answers) expect(answer).toMatchObject({ ok: true });
    await audit.close();
    expect(records).toHaveLength(20);
  });

  it('refuses a durableWaitMs that is not a positive integer (Infinity: no bound)', () => {
    expect(() => createAudit({ durableWaitMs: 0 })).toThrow(/durableWaitMs must be a positive integer/);
    expect(() => createAudit({ durableWaitMs: -1 })).toThrow(RangeError);
    expect(() => createAudit({ durableWaitMs: Number.NaN })).toThrow(RangeError);
    expect(() => createAudit({ durableWaitMs: Number.POSITIVE_INFINITY })).not.toThrow();
  });
});

// A file sink on a named pipe whose reader does not read: once the kernel's 64 KiB are taken, a write
// blocks until the reader reads. With thread: true the durable acknowledgements cross the thread.
describe.each([{ thread: false }, { thread: true }])(
  'a named pipe nobody reads (thread: $thread)',
  ({ thread }) => {
    it('every durable call answers within the bound; each record is stored once when the reader reads', async () => {
      const CALLS = 12;
      const NOTE = 'n'.repeat(20_000);
      const path = join(dir, 'audit.fifo');
      execFileSync('mkfifo', [path]);
      const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
      readers.push(reader);
      const audit = createAudit({
        sink: createFileSink(path),
        thread,
        durable: true,
        durableWaitMs: WAIT_MS,
        logger,
      });
      const client = await serve([audit]);

      const started = Date.now();
      const answers = await Promise.all(
        Array.from({ length: CALLS }, (_, index) =>
          answerWithin(client.callTool('get_order', { id: `F-${index}`, note: NOTE }), BOUND_MS),
        ),
      );
      expect(Date.now() - started).toBeLessThan(BOUND_MS);
      for (const answer of answers) expect(answer).not.toBe('pending');
      const withheld = answers.filter((answer) => (answer as CallToolResult).isError === true);
      expect(withheld.length).toBeGreaterThan(0);
      for (const answer of withheld) expectWithheld(answer);
      expect(audit.stats().dropped).toBe(0);

      // The reader reads: the writes blocked behind it go on, and every record reaches the pipe once.
      const chunks: Buffer[] = [];
      const buffer = Buffer.allocUnsafe(1 << 16);
      await until(() => {
        for (;;) {
          let read = 0;
          try {
            read = readSync(reader, buffer);
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
          }
          if (read <= 0) break;
          chunks.push(Buffer.from(buffer.subarray(0, read)));
        }
        return audit.stats().written === CALLS && audit.stats().pending === 0;
      });
      await audit.close();
      const lines = Buffer.concat(chunks).toString('utf8').trim().split('\n');
      const ids = lines.map((line) => (JSON.parse(line) as AuditRecord).args as { id: string });
      expect(ids.map((args) => args.id).sort()).toEqual(
        Array.from({ length: CALLS }, (_, index) => `F-${index}`).sort(),
      );
      expect(lines.map((line) => (JSON.parse(line) as AuditRecord).seq)).toEqual(
        Array.from({ length: CALLS }, (_, index) => index + 1),
      );
      expect(audit.stats()).toMatchObject({ written: CALLS, dropped: 0, pending: 0 });
    });
  },
);

import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAudit, createFileSink } from '../src/index.js';
import { closeConnections, serve } from './helpers.js';

// A named pipe whose reader opened it and never reads: the kernel takes 64 KiB, then a write to it
// blocks until the reader reads or goes. What close() promises (README): it retries for up to
// closeTimeoutMs, gives up on a write that never settles a grace period after that, and every durable
// call still waiting is answered `unavailable`.

let dir: string;
const readers: number[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-close-hung-'));
});
afterEach(async () => {
  await closeConnections();
  // The reader goes: a write still stuck in the pipe fails (EPIPE) and frees its thread.
  for (const fd of readers.splice(0)) closeSync(fd);
  await rm(dir, { recursive: true, force: true });
});

const CLOSE_TIMEOUT_MS = 200;
/** Far past closeTimeoutMs and every documented grace (1 s; with thread: true, 2 s and the thread's stop). */
const GENEROUS_BOUND_MS = 15_000;
const CALLS = 40;
const NOTE = 'n'.repeat(20_000);

const lostLines = (log: readonly LogEntry[]): LogEntry[] =>
  log.filter((entry) => entry.level === 'error' && /records lost/.test(entry.message ?? ''));

async function settlesWithin<T>(promise: Promise<T>, ms: number): Promise<'settled' | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise<'pending'>((resolve) => {
    timer = setTimeout(() => resolve('pending'), ms);
  });
  const outcome = await Promise.race([promise.then(() => 'settled' as const), pending]);
  clearTimeout(timer);
  return outcome;
}

describe.each([
  { thread: false, durable: true },
  { thread: false, durable: false },
  { thread: true, durable: true },
  { thread: true, durable: false },
])('a named pipe nobody reads (thread: $thread, durable: $durable)', ({ thread, durable }) => {
  it('close() returns, every call is answered, what was lost is counted and logged once', async () => {
    const path = join(dir, 'audit.fifo');
    execFileSync('mkfifo', [path]);
    // Opened first (non-blocking, so it needs no writer): the sink's open then finds a reader.
    readers.push(openSync(path, constants.O_RDONLY | constants.O_NONBLOCK));
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createFileSink(path),
      thread,
      durable,
      closeTimeoutMs: CLOSE_TIMEOUT_MS,
      logger: recordingLogger(log),
    });
    const client = await serve([audit]);
    const results = Array.from({ length: CALLS }, (_, index) =>
      client.callTool('get_order', { id: `P-${index}`, note: NOTE }, { timeoutMs: GENEROUS_BOUND_MS * 2 }),
    );
    // A call never answered fails the test below, not the run (the connection closes after it).
    for (const result of results) result.catch(() => {});
    // Every record has reached the writer (stored, or stuck behind the full pipe).
    for (let tries = 0; tries < 2_000; tries += 1) {
      const { written, pending, dropped } = audit.stats();
      if (written + pending + dropped === CALLS) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(audit.stats().written).toBeLessThan(CALLS);

    await expect(settlesWithin(audit.close(), GENEROUS_BOUND_MS)).resolves.toBe('settled');
    const answers = await Promise.all(results);
    const stats = audit.stats();
    expect(stats.pending).toBe(0);
    expect(stats.written + stats.dropped).toBe(CALLS);
    expect(stats.dropped).toBeGreaterThan(0);
    const unavailable = answers.filter((answer) => answer.isError === true);
    if (durable) {
      // A call is answered with its result only when its record was stored.
      expect(unavailable).toHaveLength(stats.dropped);
      expect(JSON.stringify(unavailable[0]!.content)).toMatch(/unavailable/);
    } else {
      expect(unavailable).toHaveLength(0);
    }
    // Lost records reported once, with the count stats() gives.
    const lost = lostLines(log);
    expect(lost).toHaveLength(1);
    expect(lost[0]!.fields).toMatchObject({ lost: stats.dropped });

    // The stuck write fails once the reader goes (EPIPE): nothing is counted again.
    for (const fd of readers.splice(0)) closeSync(fd);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(audit.stats()).toEqual(stats);
    expect(lostLines(log)).toHaveLength(1);
  });
});

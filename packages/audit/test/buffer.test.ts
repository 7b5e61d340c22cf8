import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type AuditRecord, type AuditSink, createAudit, verifyAuditLines } from '../src/index.js';
import { closeConnections, serve } from './helpers.js';

afterEach(closeConnections);

/** A sink whose writes wait until the test opens the gate. */
function gatedSink(): { sink: AuditSink; records: AuditRecord[]; lines: string[]; open: () => void } {
  const records: AuditRecord[] = [];
  const lines: string[] = [];
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    records,
    lines,
    open: () => release(),
    sink: {
      async write(batch) {
        await gate;
        records.push(...batch.records);
        lines.push(...batch.lines);
      },
    },
  };
}

/** A server whose audit has a stuck sink, one record per batch and room for two more. */
async function slowSinkServer(maxWaitMs: number) {
  const gated = gatedSink();
  const log: LogEntry[] = [];
  const audit = createAudit({
    sink: gated.sink,
    logger: recordingLogger(log),
    batchSize: 1,
    bufferSize: 2,
    maxWaitMs,
  });
  return { gated, log, audit, client: await serve([audit]) };
}

const droppedIn = (entries: LogEntry[]): number =>
  entries
    .filter((entry) => entry.level === 'warn')
    .reduce((sum, entry) => sum + (entry.fields.records as number), 0);

describe('bounded buffer: a slow sink', () => {
  it('past bufferSize a call waits maxWaitMs, then its record is dropped, counted and reported', async () => {
    const { gated, log, audit, client } = await slowSinkServer(50);
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, index) => client.callTool('get_order', { id: `A-${index}` })),
    );
    // The calls themselves all succeed: auditing never fails a call.
    expect(results.every((result) => result.isError !== true)).toBe(true);
    // One batch in flight, two buffered, two dropped.
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 2, pending: 3 });
    expect(droppedIn(log)).toBe(1);
    expect(log[0]).toEqual({
      level: 'warn',
      fields: {
        reason: 'the buffer is full',
        totalDropped: 1,
        maxBufferBytes: 64 * 2 ** 20,
        maxWaitMs: 50,
        events: 1,
        records: 1,
      },
      message: 'audit records dropped',
    });
    // One line per interval, not per record: the second drop waits for the next line.
    expect(log.filter((entry) => entry.level === 'warn')).toHaveLength(1);
    gated.open();
    await audit.close();
    // close() logs what the interval had not yet reported.
    expect(droppedIn(log)).toBe(2);
    expect(audit.stats()).toMatchObject({ written: 3, dropped: 2, pending: 0 });
    expect(gated.records.map((record) => record.seq)).toEqual([1, 2, 3]);
    await expect(verifyAuditLines(gated.lines)).resolves.toMatchObject({ intact: true, records: 3 });
  });

  it('a call that finds the buffer full waits, and nothing is lost when the sink catches up in time', async () => {
    const { gated, log, audit, client } = await slowSinkServer(30_000);
    let settled = 0;
    const calls = Array.from({ length: 5 }, (_, index) =>
      client.callTool('get_order', { id: `A-${index}` }).then(() => {
        settled += 1;
      }),
    );
    await vi.waitFor(() => expect(audit.stats().pending).toBe(5));
    // Three records are taken (one in flight, two buffered); two calls are held back while the sink is stuck.
    await vi.waitFor(() => expect(settled).toBe(3));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled).toBe(3);
    gated.open();
    await Promise.all(calls);
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 5, dropped: 0, pending: 0 });
    expect(log).toEqual([]);
    await expect(verifyAuditLines(gated.lines)).resolves.toMatchObject({ intact: true, records: 5 });
  });
});

describe('a failing sink', () => {
  it('a call waiting for room beside the batch in flight gets in once that batch is stored, though nothing else is buffered', async () => {
    const gated = gatedSink();
    const log: LogEntry[] = [];
    // Each record is about 1,700 bytes: one fits, two do not.
    const audit = createAudit({
      sink: gated.sink,
      logger: recordingLogger(log),
      maxBufferBytes: 3_000,
      maxWaitMs: 5_000,
    });
    const client = await serve([audit]);
    const note = 'n'.repeat(1_000);
    await client.callTool('get_order', { id: 'A-1', note });
    // The first record's batch is in flight (its write waits at the gate) before the second call ends.
    await vi.waitFor(() => expect(audit.stats().pendingBytes).toBeGreaterThan(1_500));
    const second = client.callTool('get_order', { id: 'A-2', note });
    await vi.waitFor(() => expect(audit.stats().pending).toBe(2));
    gated.open();
    expect((await second).isError).not.toBe(true);
    await audit.flush();
    expect(audit.stats()).toMatchObject({ written: 2, dropped: 0, pending: 0 });
    expect(gated.records.map((record) => (record.args as { id: string }).id)).toEqual(['A-1', 'A-2']);
    expect(log).toEqual([]);
    await audit.close();
  });

  it('the same batch is retried until it is stored: no loss, no gap in the chain, one error logged', async () => {
    const lines: string[] = [];
    let failures = 2;
    const sink: AuditSink = {
      async write(batch) {
        if (failures > 0) {
          failures -= 1;
          throw new Error('connection reset');
        }
        lines.push(...batch.lines);
      },
    };
    const log: LogEntry[] = [];
    const audit = createAudit({ sink, logger: recordingLogger(log) });
    const client = await serve([audit]);
    await Promise.all(
      Array.from({ length: 20 }, (_, index) => client.callTool('get_order', { id: `A-${index}` })),
    );
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 20, dropped: 0, pending: 0 });
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({ intact: true, records: 20 });
    expect(audit.stats()).toMatchObject({ retries: 2, rejected: 0 });
    // One line for the incident (the second failure falls in the same interval), one for the recovery.
    expect(log.map((entry) => [entry.level, entry.message, entry.fields.events])).toEqual([
      [
        'error',
        'audit sink failing (transient); retrying the same batch with backoff while records wait in the buffer',
        1,
      ],
      ['warn', 'audit sink recovered', undefined],
    ]);
    expect(log[1]?.fields).toMatchObject({ failures: 2 });
  });

  it('close() gives up after closeTimeoutMs and reports what was lost', async () => {
    const sink: AuditSink = {
      async write() {
        throw new Error('disk full');
      },
    };
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink,
      logger: recordingLogger(log),
      closeTimeoutMs: 150,
    });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await client.callTool('get_order', { id: 'A-2' });
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 2, pending: 0 });
    expect(log.at(-1)).toEqual({
      level: 'error',
      fields: { lost: 2, totalDropped: 2 },
      message: 'audit records lost: the sink did not take them before close() gave up',
    });
  });
});

describe('a hung sink', () => {
  it('a write that never settles cannot hold close() past closeTimeoutMs and a grace second', async () => {
    const sink: AuditSink = { write: () => new Promise<void>(() => {}) };
    const log: LogEntry[] = [];
    const audit = createAudit({ sink, logger: recordingLogger(log), closeTimeoutMs: 50 });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await client.callTool('get_order', { id: 'A-2' });
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 2, pending: 0 });
    expect(log).toEqual([
      {
        level: 'error',
        fields: { lost: 2, totalDropped: 2 },
        message: 'audit records lost: the sink did not take them before close() gave up',
      },
    ]);
  });
});

describe('after close()', () => {
  it('a late call still gets its answer; its record is dropped, counted and reported', async () => {
    const records: AuditRecord[] = [];
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: { write: async (batch) => void records.push(...batch.records) },
      logger: recordingLogger(log),
    });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await audit.close();
    const late = await client.callTool('get_order', { id: 'A-2' });
    expect(late.isError).toBeUndefined();
    expect(records).toHaveLength(1);
    expect(audit.stats()).toMatchObject({ written: 1, dropped: 1, pending: 0 });
    expect(log).toEqual([
      {
        level: 'warn',
        fields: {
          reason: 'audit is closed',
          totalDropped: 1,
          maxBufferBytes: 64 * 2 ** 20,
          maxWaitMs: 1_000,
          events: 1,
          records: 1,
        },
        message: 'audit records dropped',
      },
    ]);
  });

  it('rejects options that cannot work', () => {
    expect(() => createAudit({ bufferSize: 0 })).toThrow(
      'createAudit: bufferSize must be a positive integer',
    );
    expect(() => createAudit({ batchSize: 1.5 })).toThrow(
      'createAudit: batchSize must be a positive integer',
    );
  });
});

// Red team T (session 38): a PostgreSQL audit connection gone silent stopped every audit write for the
// sink's timeout while the order service's GET /ready kept answering 200, and the recovery log said the
// outage lasted 115 ms (counted from the failure, not from the silent write). `stats().writingMs` says
// how long the sink has held the outstanding write, and the outage is counted from the failed try's start.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import { createAudit, createFileSink, createFunctionSink } from '../src/index.js';
import { serve } from './helpers.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('stats().writingMs', () => {
  it('grows while the sink holds a write, and is 0 once it is acknowledged', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const audit = createAudit({
      sink: createFunctionSink(async () => {
        await gate;
      }),
      logger: recordingLogger([]),
    });
    expect(audit.stats().writingMs).toBe(0);
    const served = await serve([audit]);
    await served.callTool('echo', { value: 'one' });
    await sleep(250);
    const held = audit.stats();
    expect(held.pending).toBe(1);
    expect(held.writingMs).toBeGreaterThanOrEqual(200);
    release();
    await audit.flush();
    expect(audit.stats()).toMatchObject({ written: 1, pending: 0, writingMs: 0 });
    await audit.close();
    await served.close();
  });

  it('counts retries of the same write, and the recovery log counts the outage from the silent try', async () => {
    let tries = 0;
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createFunctionSink(async () => {
        tries += 1;
        // A silent connection: the first try hangs 300 ms, then fails as a timeout would.
        if (tries === 1) {
          await sleep(300);
          throw Object.assign(new Error('audit table: a statement timed out'), { code: 'ETIMEDOUT' });
        }
      }),
      logger: recordingLogger(log),
    });
    const served = await serve([audit]);
    await served.callTool('echo', { value: 'one' });
    await sleep(350);
    // Failed once, waiting to retry: the write is still outstanding since the first try began.
    if (audit.stats().written === 0) expect(audit.stats().writingMs).toBeGreaterThanOrEqual(300);
    await audit.flush();
    expect(audit.stats()).toMatchObject({ written: 1, writingMs: 0, retries: 1 });
    const recovered = log.find((entry) => entry.message === 'audit sink recovered');
    expect(recovered?.fields).toMatchObject({ failures: 1 });
    const outageMs = (recovered?.fields as { outageMs?: number } | undefined)?.outageMs;
    expect(outageMs).toBeGreaterThanOrEqual(300);
    await audit.close();
    await served.close();
  });

  it('is reported by a writer on a thread of its own too (0 at rest)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'toolgate-writing-ms-'));
    try {
      const audit = createAudit({
        sink: createFileSink(join(dir, 'audit.jsonl')),
        thread: true,
        logger: recordingLogger([]),
      });
      const served = await serve([audit]);
      await served.callTool('echo', { value: 'one' });
      await audit.flush();
      const stats = audit.stats();
      expect(stats.written).toBe(1);
      expect(stats.writingMs).toBe(0);
      await audit.close();
      expect(audit.stats().writingMs).toBe(0);
      await served.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

// Red team AA (session 38): batches were bounded by count alone, so a buffer of large records became one
// write of up to maxBufferBytes (64 MiB). Behind a link slower than 13 MB/s the PostgreSQL sink's 5 s
// statement limit (the order service's) failed that write every time: it was retried for good, nothing
// more was stored, and /ready stayed 503. A write now holds at most maxBatchBytes.
import { recordingLogger } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import { type AuditRecord, createAudit, createFunctionSink } from '../src/index.js';
import { serve } from './helpers.js';

describe('maxBatchBytes', () => {
  it('splits what waits into writes of at most maxBatchBytes, each record once and in order', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const batches: AuditRecord[][] = [];
    const audit = createAudit({
      sink: createFunctionSink(async (records) => {
        batches.push([...records]);
        if (batches.length === 1) await gate;
      }),
      logger: recordingLogger([]),
      maxBatchBytes: 100_000,
    });
    const served = await serve([audit]);
    // The first write holds the sink; nine calls of about 30 KB each wait behind it.
    await served.callTool('echo', { value: 'first' });
    for (let index = 0; index < 9; index += 1) {
      await served.callTool('echo', { value: `${index}`.padEnd(30_000, 'x') });
    }
    release();
    await audit.flush();
    // Three 30 KB records fit in 100,000 bytes, a fourth does not.
    for (const batch of batches) {
      expect(batch.filter((record) => JSON.stringify(record).length > 30_000).length).toBeLessThanOrEqual(3);
      expect(JSON.stringify(batch).length).toBeLessThan(100_000 + 4_096);
    }
    expect(batches.flat().map((record) => record.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(audit.stats()).toMatchObject({ written: 10, dropped: 0 });
    await audit.close();
  });

  it('writes a record larger than maxBatchBytes alone, and refuses a bound that is not a positive integer', async () => {
    const batches: number[] = [];
    const audit = createAudit({
      sink: createFunctionSink(async (records) => void batches.push(records.length)),
      logger: recordingLogger([]),
      maxBatchBytes: 1_000,
    });
    const served = await serve([audit]);
    await Promise.all([
      served.callTool('echo', { value: 'y'.repeat(5_000) }),
      served.callTool('echo', { value: 'z'.repeat(5_000) }),
    ]);
    await audit.flush();
    expect(batches).toEqual([1, 1]);
    await audit.close();
    expect(() => createAudit({ maxBatchBytes: 0 })).toThrow(
      'createAudit: maxBatchBytes must be a positive integer',
    );
  });
});

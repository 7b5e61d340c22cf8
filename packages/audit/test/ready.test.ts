import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type AuditSink,
  AuditSinkError,
  type ChainHead,
  createAudit,
  createPostgresSink,
  verifyAuditTable,
} from '../src/index.js';
import { databases, suiteDatabase } from './database.js';
import { closeConnections, serve } from './helpers.js';

afterEach(closeConnections);

describe.each(databases)('ready() on $name', ({ open }) => {
  const suite = suiteDatabase(open);

  it('creates the table and reads the head before any call; the first records then link to it', async () => {
    const table = suite.newTable();
    const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
    const exists = async () =>
      (
        (await suite.db.client.query('SELECT to_regclass($1) IS NOT NULL AS found', [table])).rows[0] as {
          found: boolean;
        }
      ).found;
    expect(await exists()).toBe(false);
    await audit.ready();
    expect(await exists()).toBe(true);
    await audit.ready(); // idempotent once set up
    const client = await serve([audit]);
    for (const id of ['A-1', 'A-2', 'A-3']) await client.callTool('get_order', { id });
    await audit.close();
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: true,
      records: 3,
    });
  });
});

/** A sink that counts its head() calls and can be made to fail them. */
function countingSink(fail?: () => unknown): AuditSink & { heads: number; stored: string[] } {
  const sink = {
    heads: 0,
    stored: [] as string[],
    async head(): Promise<ChainHead | undefined> {
      sink.heads += 1;
      await new Promise((resolve) => setTimeout(resolve, 5));
      const error = fail?.();
      if (error !== undefined) throw error;
      return undefined;
    },
    async write(batch: Parameters<AuditSink['write']>[0]): Promise<void> {
      sink.stored.push(...batch.lines);
    },
  };
  return sink;
}

describe('ready()', () => {
  it('shares one head load with the records that arrive meanwhile: head() runs once', async () => {
    const sink = countingSink();
    const audit = createAudit({ sink });
    const client = await serve([audit]);
    const readies = [audit.ready(), audit.ready()];
    await Promise.all([
      ...readies,
      client.callTool('get_order', { id: 'A-1' }),
      client.callTool('get_order', { id: 'A-2' }),
    ]);
    await audit.flush();
    expect(sink.heads).toBe(1);
    expect(sink.stored).toHaveLength(2);
    await audit.close();
  });

  it('retries a transient failure with backoff, then resolves', async () => {
    let failures = 2;
    const sink = countingSink(() =>
      failures-- > 0 ? new AuditSinkError('connection reset', { permanent: false }) : undefined,
    );
    const audit = createAudit({ sink, logger: recordingLogger([]) });
    await audit.ready();
    expect(sink.heads).toBe(3);
    expect(audit.stats().retries).toBe(2);
    await audit.close();
  });

  it('rejects when the sink refuses for good (logged); the next record tries the head again', async () => {
    let refuse = true;
    const sink = countingSink(() =>
      refuse ? new AuditSinkError('permission denied for schema audit', { permanent: true }) : undefined,
    );
    const log: LogEntry[] = [];
    const audit = createAudit({ sink, logger: recordingLogger(log) });
    await expect(audit.ready()).rejects.toThrow(
      'audit sink refused to set up the chain (permanent error, logged)',
    );
    expect(log.map((entry) => entry.level)).toEqual(['error']);
    refuse = false;
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await audit.flush();
    expect(sink.heads).toBe(2);
    expect(sink.stored).toHaveLength(1);
    await audit.close();
  });

  it('rejects after close()', async () => {
    const audit = createAudit({ sink: countingSink() });
    await audit.close();
    await expect(audit.ready()).rejects.toThrow('audit is closed: its sink was not set up');
  });
});

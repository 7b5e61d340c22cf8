import { createHash } from 'node:crypto';
import { canonicalJson } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import { createAudit, createPostgresSink, GENESIS_HASH, verifyAuditTable } from '../src/index.js';
import { databases, suiteDatabase, TEST_SCHEMA } from './database.js';
import { closeConnections, serve } from './helpers.js';

describe.each(databases)('PostgreSQL sink on $name', ({ open }) => {
  const suite = suiteDatabase(open);
  const newTable = suite.newTable;

  it('creates the table, takes 1,000 concurrent calls, and holds exactly 1,000 chained rows after close()', async () => {
    const table = newTable();
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createPostgresSink({ client: suite.db.client, table }),
      logger: recordingLogger(log),
    });
    const client = await serve([audit], undefined, { authInfo: { token: 't', clientId: 'c-1', scopes: [] } });
    await Promise.all(
      Array.from({ length: 1000 }, (_, index) => client.callTool('get_order', { id: `A-${index}` })),
    );
    await audit.close();
    await closeConnections();
    const { rows } = await suite.db.client.query(
      `SELECT count(*)::int AS n, min(seq)::int AS first, max(seq)::int AS last, count(DISTINCT hash)::int AS hashes FROM ${table}`,
    );
    expect(rows[0]).toEqual({ n: 1000, first: 1, last: 1000, hashes: 1000 });
    expect(log).toEqual([]);
    const first = await suite.db.client.query(
      `SELECT chain, seq::int AS seq, tool, outcome, principal, caller, incident_id, record::text AS record FROM ${table} WHERE seq = 1`,
    );
    const row = first.rows[0] as Record<string, unknown>;
    expect(row).toMatchObject({
      chain: audit.stats().chainId,
      seq: 1,
      tool: 'get_order',
      outcome: 'ok',
      principal: 'c-1',
      caller: expect.stringMatching(/^client:c-1#[A-Za-z0-9_-]{22}$/),
      incident_id: null,
    });
    expect(JSON.parse(row.record as string)).toMatchObject({
      seq: 1,
      prevHash: GENESIS_HASH,
      clientId: 'c-1',
      caller: row.caller,
    });
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: true,
      records: 1000,
    });
  });

  it('a table made before the caller column gets it (ADD COLUMN IF NOT EXISTS); old rows without caller still verify', async () => {
    const table = newTable();
    await suite.db.client.query(`CREATE SCHEMA IF NOT EXISTS ${TEST_SCHEMA}`);
    // The previous version's table: no caller column.
    await suite.db.client.query(
      `CREATE TABLE ${table} (chain text NOT NULL, seq bigint NOT NULL, time timestamptz NOT NULL, tool text NOT NULL,
        outcome text NOT NULL, principal text, incident_id text, hash text NOT NULL, record json NOT NULL,
        PRIMARY KEY (chain, seq))`,
    );
    // A record the old version wrote (no caller field), chained by hand.
    const body = {
      args: { id: 'A-0' },
      chainId: 'old',
      decisions: [],
      durationMs: 1,
      outcome: 'ok',
      prevHash: GENESIS_HASH,
      requestId: 1,
      resultBytes: 10,
      seq: 1,
      time: '2026-01-02T03:04:05.006Z',
      tool: 'get_order',
    };
    const hash = createHash('sha256').update(canonicalJson(body)).digest('hex');
    await suite.db.client.query(
      `INSERT INTO ${table} (chain, seq, time, tool, outcome, hash, record) VALUES ('old', 1, $1, 'get_order', 'ok', $2, $3::json)`,
      [body.time, hash, canonicalJson({ ...body, hash })],
    );
    const audit = createAudit({
      sink: createPostgresSink({ client: suite.db.client, table }),
      chainId: 'new',
    });
    await (await serve([audit])).callTool('get_order', { id: 'A-1' });
    await audit.close();
    await closeConnections();
    const { rows } = await suite.db.client.query(`SELECT chain, caller FROM ${table} ORDER BY chain`);
    expect(rows).toEqual([
      { chain: 'new', caller: 'local' },
      { chain: 'old', caller: null },
    ]);
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: true,
      records: 2,
    });
  });

  it('a restart with the same chainId continues its chain from the table; chains are kept apart', async () => {
    const table = newTable();
    for (const [chainId, id] of [
      ['default', 'one'],
      ['default', 'two'],
      ['replica-b', 'three'],
    ] as const) {
      const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }), chainId });
      await (await serve([audit])).callTool('get_order', { id });
      await audit.close();
      await closeConnections();
    }
    const { rows } = await suite.db.client.query(
      `SELECT chain, seq::int AS seq, record->'args'->>'id' AS id FROM ${table} ORDER BY chain, seq`,
    );
    expect(rows).toEqual([
      { chain: 'default', seq: 1, id: 'one' },
      { chain: 'default', seq: 2, id: 'two' },
      { chain: 'replica-b', seq: 1, id: 'three' },
    ]);
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: true,
      records: 3,
      chains: [
        { chain: 'default', intact: true, records: 2 },
        { chain: 'replica-b', intact: true, records: 1 },
      ],
    });
    await expect(
      verifyAuditTable({ client: suite.db.client, table, chain: 'replica-b' }),
    ).resolves.toMatchObject({
      intact: true,
      records: 1,
    });
  });

  it('a chain deleted whole is found: the chain that began after it names the newest record before it', async () => {
    const table = newTable();
    for (const chainId of ['replica-a', 'replica-b', 'replica-c']) {
      const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }), chainId });
      const client = await serve([audit]);
      await client.callTool('get_order', { id: `${chainId}-1` });
      await client.callTool('get_order', { id: `${chainId}-2` });
      await audit.close();
      await closeConnections();
    }
    const { rows } = await suite.db.client.query(
      `SELECT chain, record->'after' AS after FROM ${table} WHERE seq = 1 ORDER BY chain`,
    );
    const hashOf = async (chain: string, seq: number) =>
      (
        (await suite.db.client.query(`SELECT hash FROM ${table} WHERE chain = $1 AND seq = $2`, [chain, seq]))
          .rows[0] as { hash: string }
      ).hash;
    expect(rows).toEqual([
      { chain: 'replica-a', after: null },
      { chain: 'replica-b', after: { chainId: 'replica-a', hash: await hashOf('replica-a', 2), seq: 2 } },
      { chain: 'replica-c', after: { chainId: 'replica-b', hash: await hashOf('replica-b', 2), seq: 2 } },
    ]);
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: true,
      records: 6,
    });
    await suite.db.client.query(`DELETE FROM ${table} WHERE chain = 'replica-b'`);
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: false,
      reason:
        'record 1 (seq 1) starts after record 2 of chain replica-b, which is missing: a chain or its last records were deleted',
      chains: [
        { chain: 'replica-a', intact: true, records: 2 },
        { chain: 'replica-c', intact: false, brokenAt: 1 },
      ],
    });
  });

  it('stores hostile values exactly: NUL bytes, quotes, a tool name built to break SQL', async () => {
    const table = newTable();
    const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
    const client = await serve([audit]);
    const name = `x'); DROP TABLE ${TEST_SCHEMA}.victim; --\u0000`;
    await expect(client.callTool(name, { q: '\'\u0000"\\' })).rejects.toThrow(/Unknown tool/);
    await audit.close();
    const { rows } = await suite.db.client.query(`SELECT tool, record::text AS record FROM ${table}`);
    const row = rows[0] as { tool: string; record: string };
    expect(row.tool).toBe(name.replace('\u0000', '\uFFFD'));
    expect(JSON.parse(row.record)).toMatchObject({
      tool: name,
      args: { q: '\'\u0000"\\' },
      unknownTool: true,
    });
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: true,
      records: 1,
    });
  });

  it("COPY's text format cannot be broken: tabs, newlines, CR, backslashes, \\N and \\. in a tool name and args are stored exactly", async () => {
    const table = newTable();
    const audit = createAudit({
      sink: createPostgresSink({ client: suite.db.client, table }),
      chainId: 'c\\N\\.',
    });
    const client = await serve([audit]);
    const name = 'a\tb\nc\rd\\N\n\\.\ne\\';
    const args = { q: 'x\ty\nz\\N\\.\r\\', '\t\\': '\\\\' };
    await client.callTool('get_order', { id: 'A-1' });
    await expect(client.callTool(name, args)).rejects.toThrow(/Unknown tool/);
    await client.callTool('get_order', { id: 'A-3' });
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 3, dropped: 0 });
    const { rows } = await suite.db.client.query(
      `SELECT chain, tool, record::text AS record FROM ${table} ORDER BY seq`,
    );
    const stored = rows as { chain: string; tool: string; record: string }[];
    expect(stored.map((row) => row.chain)).toEqual(['c\\N\\.', 'c\\N\\.', 'c\\N\\.']);
    expect(stored[1]!.tool).toBe(name);
    expect(JSON.parse(stored[1]!.record)).toMatchObject({ tool: name, args, unknownTool: true });
    expect(JSON.parse(stored[2]!.record)).toMatchObject({ args: { id: 'A-3' } });
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: true,
      records: 3,
    });
  });

  it('lone surrogates from the client (tool name, args) are stored and the table still verifies', async () => {
    const table = newTable();
    const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await expect(client.callTool('no\udc00such\ud800', { q: 'x\ud800y' })).rejects.toThrow(/Unknown tool/);
    await client.callTool('get_order', { id: 'A-3' });
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 3, dropped: 0 });
    const { rows } = await suite.db.client.query(
      `SELECT tool, record::text AS record FROM ${table} WHERE seq = 2`,
    );
    const row = rows[0] as { tool: string; record: string };
    // PostgreSQL text is UTF-8: a lone surrogate arrives as U+FFFD; the JSON line keeps its escape.
    expect(row.tool).toBe('no\uFFFDsuch\uFFFD');
    expect(JSON.parse(row.record)).toMatchObject({ tool: 'no\udc00such\ud800', args: { q: 'x\ud800y' } });
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: true,
      records: 3,
    });
  });

  it('an UPDATE that puts a duplicate key before the hashed one is found', async () => {
    const table = newTable();
    const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
    const client = await serve([audit]);
    for (let index = 1; index <= 3; index += 1) await client.callTool('get_order', { id: `A-${index}` });
    await audit.close();
    await suite.db.client.query(
      `UPDATE ${table} SET record = replace(record::text, '{"args"', '{"outcome":"internal","args"')::json WHERE seq = 2`,
    );
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: false,
      records: 1,
      brokenAt: 2,
      reason:
        'record 2 (seq 2) was altered: its text is not the exact text that was hashed (a duplicate key, spacing or another spelling)',
    });
  });

  it('a row forged with a number where a text field was (its hash recomputed) is reported at the next link, not thrown', async () => {
    const table = newTable();
    const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
    const client = await serve([audit]);
    for (let index = 1; index <= 3; index += 1) await client.callTool('get_order', { id: `A-${index}` });
    await audit.close();
    const { rows } = await suite.db.client.query(`SELECT record::text AS record FROM ${table} WHERE seq = 2`);
    const { hash: _old, ...rest } = JSON.parse((rows[0] as { record: string }).record) as Record<
      string,
      unknown
    >;
    const forged = { ...rest, caller: 7 };
    const hash = createHash('sha256').update(canonicalJson(forged)).digest('hex');
    await suite.db.client.query(
      `UPDATE ${table} SET caller = '7', hash = $1, record = $2::json WHERE seq = 2`,
      [hash, `${canonicalJson(forged).slice(0, -1)},"hash":"${hash}"}`],
    );
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: false,
      records: 2,
      brokenAt: 3,
      reason:
        'record 3 (seq 3) does not link to the previous record of its chain: its prevHash differs (a record was inserted or replaced)',
    });
  });

  it('the verifier finds an edited, a deleted and a reordered row', async () => {
    const table = newTable();
    const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
    const client = await serve([audit]);
    for (let index = 1; index <= 5; index += 1) await client.callTool('get_order', { id: `A-${index}` });
    await audit.close();
    await suite.db.client.query(
      `UPDATE ${table} SET record = replace(record::text, '"A-4"', '"B-4"')::json WHERE seq = 4`,
    );
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: false,
      records: 3,
      brokenAt: 4,
      reason: 'record 4 (seq 4) was altered: its content does not match its hash',
    });
    await suite.db.client.query(`DELETE FROM ${table} WHERE seq >= 4`);
    await suite.db.client.query(`DELETE FROM ${table} WHERE seq = 2`);
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: false,
      records: 1,
      brokenAt: 2,
      reason:
        'record 2 does not follow the previous record of its chain: seq jumps from 1 to 3 (a record was deleted or moved)',
    });
    await suite.db.client.query(`UPDATE ${table} SET seq = 2 WHERE seq = 3`);
    await suite.db.client.query(`UPDATE ${table} SET seq = 3 WHERE seq = 1`);
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: false,
      records: 0,
      brokenAt: 1,
      reason: 'record 1 (seq 3) does not start the chain: the records before it were deleted',
    });
  });
});

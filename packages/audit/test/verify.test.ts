import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAudit,
  createFileSink,
  createPostgresSink,
  verifyAuditFile,
  verifyAuditLines,
} from '../src/index.js';
import { databases, uniqueTable } from './database.js';
import { cli, closeConnections, serve } from './helpers.js';

let dir: string;
let path: string;
let original: string[];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-verify-'));
  path = join(dir, 'audit.jsonl');
  const audit = createAudit({ sink: createFileSink(path) });
  const client = await serve([audit]);
  for (let index = 1; index <= 5; index += 1) await client.callTool('get_order', { id: `A-${index}` });
  await audit.close();
  await closeConnections();
  original = (await readFile(path, 'utf8')).split('\n').slice(0, -1);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('verifier: each kind of tampering, first broken link', () => {
  it('an untouched file is intact', async () => {
    expect(original).toHaveLength(5);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: true,
      records: 5,
      head: JSON.parse(original[4]!).hash,
    });
  });

  it('an edited record', async () => {
    const lines = [...original];
    lines[2] = lines[2]!.replace('"A-3"', '"A-9"');
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({
      intact: false,
      records: 2,
      brokenAt: 3,
      reason: 'record 3 (seq 3) was altered: its content does not match its hash',
    });
  });

  it('an edited record whose hash was recomputed breaks the next link', async () => {
    const { createHash } = await import('node:crypto');
    const { canonicalJson } = await import('@toolgate/core');
    const { hash: _old, ...rest } = JSON.parse(original[2]!) as Record<string, unknown>;
    const forged = { ...rest, args: { id: 'A-9' } };
    const lines = [...original];
    lines[2] = JSON.stringify({
      ...forged,
      hash: createHash('sha256').update(canonicalJson(forged)).digest('hex'),
    });
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({
      intact: false,
      records: 3,
      brokenAt: 4,
      reason:
        'record 4 (seq 4) does not link to the previous record of its chain: its prevHash differs (a record was inserted or replaced)',
    });
  });

  it('a deleted record', async () => {
    const lines = original.filter((_, index) => index !== 1);
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({
      intact: false,
      records: 1,
      brokenAt: 2,
      reason:
        'record 2 does not follow the previous record of its chain: seq jumps from 1 to 3 (a record was deleted or moved)',
    });
  });

  it('the first record deleted', async () => {
    await expect(verifyAuditLines(original.slice(1))).resolves.toMatchObject({
      intact: false,
      records: 0,
      brokenAt: 1,
      reason: 'record 1 (seq 2) does not start the chain: the records before it were deleted',
    });
  });

  it('an inserted record (a copy of another)', async () => {
    const lines = [...original.slice(0, 3), original[1]!, ...original.slice(3)];
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({
      intact: false,
      records: 3,
      brokenAt: 4,
      reason: 'record 4 is out of order: seq 2 after seq 3 (a record was inserted or moved)',
    });
  });

  it('two records swapped', async () => {
    const lines = [original[0]!, original[2]!, original[1]!, ...original.slice(3)];
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({
      intact: false,
      records: 1,
      brokenAt: 2,
      reason:
        'record 2 does not follow the previous record of its chain: seq jumps from 1 to 3 (a record was deleted or moved)',
    });
  });

  it('a line that parses to its hashed record but is not its exact text (a duplicate key, spacing, an escape, another number form)', async () => {
    // JSON.parse keeps the last of two equal keys; a reader that keeps the first, or a person, would
    // see `outcome: internal` and `tool: delete_all` in a line whose hash still matched.
    const variants = [
      original[2]!.replace('{"args"', '{"outcome":"internal","tool":"delete_all","args"'),
      original[2]!.replace('"A-3"', '"A-3","id":"A-3"'),
      `${original[2]!}  `,
      `\uFEFF${original[2]!}`,
      original[2]!.replace('"tool":"get_order"', '"tool":"\\u0067et_order"'),
      original[2]!.replace('"seq":3', '"seq":3.0'),
      original[2]!.replace('"caller":', '"caller" :'),
    ];
    for (const variant of variants) {
      expect(JSON.parse(variant.replace(/^\uFEFF/, ''))).toEqual(JSON.parse(original[2]!));
      await expect(
        verifyAuditLines([...original.slice(0, 2), variant, ...original.slice(3)]),
      ).resolves.toMatchObject({
        intact: false,
        records: 2,
        brokenAt: 3,
        reason: expect.stringMatching(
          /^record 3 (is not an audit record|\(seq 3\) was altered: its text is not the exact text that was hashed)/,
        ),
      });
    }
    // A BOM makes the line unreadable as JSON; the others parse, and are refused for their text.
    await expect(
      verifyAuditLines([...original.slice(0, 2), variants[0]!, ...original.slice(3)]),
    ).resolves.toMatchObject({
      reason:
        'record 3 (seq 3) was altered: its text is not the exact text that was hashed (a duplicate key, spacing or another spelling)',
    });
  });

  it('a line that is not a record', async () => {
    const lines = [...original.slice(0, 2), '{"seq":3,"hash":"nope"}', ...original.slice(2)];
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({
      intact: false,
      records: 2,
      brokenAt: 3,
      reason: 'record 3 is not an audit record (not JSON, or no seq, hash and prevHash)',
    });
  });
});

describe('toolgate-audit verify (the built CLI, in a child process)', () => {
  it('prints "intact" and exits 0 for the file the sink wrote', async () => {
    const result = await cli('verify', path);
    expect(result).toEqual({
      code: 0,
      stdout: `chain ${JSON.parse(original[4]!).chainId}: intact, 5 records, head ${JSON.parse(original[4]!).hash}\nintact: 5 records in 1 chains\n`,
      stderr: '',
    });
  });

  it('prints the first broken link and exits 1 for an edited file', async () => {
    const edited = join(dir, 'edited.jsonl');
    await writeFile(
      edited,
      `${original.map((line, index) => (index === 3 ? line.replace('"ok"', '"internal"') : line)).join('\n')}\n`,
    );
    await expect(cli('verify', edited)).resolves.toEqual({
      code: 1,
      stdout: `chain ${JSON.parse(original[2]!).chainId}: broken at record 4: record 4 (seq 4) was altered: its content does not match its hash\nbroken at record 4: record 4 (seq 4) was altered: its content does not match its hash\n`,
      stderr: '',
    });
  });

  it('prints a chain id that holds control characters escaped, so a record cannot write lines of the report', async () => {
    const { createHash } = await import('node:crypto');
    const { canonicalJson } = await import('@toolgate/core');
    // A chain anyone can hash (no key): its id is the file's text, not one a writer would choose.
    const chainId = 'x\nintact: 9 records in 1 chains\u001b[2K\r';
    const body = {
      args: {},
      caller: 'local',
      chainId,
      decisions: [],
      durationMs: 1,
      outcome: 'ok',
      prevHash: '0'.repeat(64),
      requestId: 1,
      resultBytes: 0,
      seq: 1,
      time: '2026-01-02T03:04:05.006Z',
      tool: 'get_order',
    };
    const canonical = canonicalJson(body);
    const hash = createHash('sha256').update(canonical).digest('hex');
    const forged = join(dir, 'control.jsonl');
    await writeFile(
      forged,
      `${canonical.slice(0, -1)},"hash":"${hash}"}\n${original[0]!.replace('"A-1"', '"B-1"')}\n`,
    );
    const result = await cli('verify', forged);
    expect(result).toEqual({
      code: 1,
      stdout: `chain "x\\nintact: 9 records in 1 chains\\u001b[2K\\r": intact, 1 records, head ${hash}\nchain ${JSON.parse(original[0]!).chainId}: broken at record 2: record 2 (seq 1) was altered: its content does not match its hash\nbroken at record 2: record 2 (seq 1) was altered: its content does not match its hash\n`,
      stderr: '',
    });
  });

  it('exits 2 with usage for bad arguments, and with a message for a missing file', async () => {
    const usage = await cli('check', path);
    expect(usage.code).toBe(2);
    expect(usage.stdout).toBe('');
    expect(usage.stderr).toMatch(/^usage:\n {2}toolgate-audit verify FILE/);
    const missing = await cli('verify', join(dir, 'absent.jsonl'));
    expect(missing).toMatchObject({ code: 2, stdout: '' });
    expect(missing.stderr).toMatch(/^toolgate-audit: ENOENT/);
  });

  // The CLI reaches a table over the network, so this runs where TEST_DATABASE_URL names a server
  // (always in CI: database.ts throws there without it).
  const servers = databases.filter((database) => database.name === 'PostgreSQL');
  it.each(servers)(
    'verify --table on $name: intact, then broken after a row is deleted',
    async ({ open }) => {
      const db = await open();
      const table = uniqueTable();
      try {
        const audit = createAudit({
          sink: createPostgresSink({ client: db.client, table }),
        });
        const client = await serve([audit]);
        for (let index = 1; index <= 3; index += 1) await client.callTool('get_order', { id: `A-${index}` });
        await audit.close();
        await closeConnections();
        const intact = await cli(
          'verify',
          '--table',
          table,
          '--database-url',
          process.env.TEST_DATABASE_URL!,
        );
        expect(intact).toMatchObject({ code: 0, stderr: '' });
        expect(intact.stdout).toMatch(
          /^chain \S+: intact, 3 records, head [0-9a-f]{64}\nintact: 3 records in 1 chains\n$/,
        );
        await db.client.query(`DELETE FROM ${table} WHERE seq = 2`);
        await expect(
          cli('verify', '--table', table, '--database-url', process.env.TEST_DATABASE_URL!),
        ).resolves.toEqual({
          code: 1,
          stdout: `chain ${audit.stats().chainId}: broken at record 2: record 2 does not follow the previous record of its chain: seq jumps from 1 to 3 (a record was deleted or moved)\nbroken at record 2: record 2 does not follow the previous record of its chain: seq jumps from 1 to 3 (a record was deleted or moved)\n`,
          stderr: '',
        });
      } finally {
        await db.client.query(`DROP TABLE IF EXISTS ${table}`);
        await db.end();
      }
    },
  );
});

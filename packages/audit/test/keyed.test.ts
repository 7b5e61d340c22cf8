// Keyed chains: records hashed with HMAC-SHA256 under a secret, written through real tools/call round
// trips into a real file or table, then attacked by someone who can write the file but has not got
// the key.
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canonicalJson } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type AuditKey,
  type AuditRecord,
  createAudit,
  createFileSink,
  createPostgresSink,
  readAuditKeyFile,
  verifyAuditFile,
  verifyAuditLines,
  verifyAuditTable,
} from '../src/index.js';
import { databases, losingFirstInsertReply, suiteDatabase } from './database.js';
import { closeConnections, serve } from './helpers.js';

const KEY = 'k'.repeat(16) + randomBytes(16).toString('hex');
const OTHER_KEY = randomBytes(32);
const BINARY_KEY = Buffer.from([0x00, 0x0d, 0x0a, 0xff, 0x0a, 0x0d, 0x80, 0x7f, 0x0a, 0x0d, 0x0a, 0x42]);

/** The key id, computed here from its definition: SHA-256 of the label and the key, 16 hex digits. */
function keyIdOf(key: AuditKey): string {
  return createHash('sha256').update('toolgate-audit key id\0').update(key).digest('hex').slice(0, 16);
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const hmac = (key: AuditKey, text: string): string => createHmac('sha256', key).update(text).digest('hex');

/**
 * What someone with write access does: re-link records into a chain, each hashed by `hashOf` (plain
 * SHA-256 when they have no key), from `prevHash` on.
 */
function relink(
  records: readonly object[],
  hashOf: (canonical: string) => string,
  prevHash = '0'.repeat(64),
): string[] {
  let previous = prevHash;
  return records.map((record) => {
    const { hash: _dropped, ...rest } = record as Record<string, unknown>;
    const canonical = canonicalJson({ ...rest, prevHash: previous });
    previous = hashOf(canonical);
    return `${canonical.slice(0, -1)},"hash":"${previous}"}`;
  });
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-keyed-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(closeConnections);

/** Runs one writer on `path`: `calls` calls through a real client, then close(); returns the file's lines. */
async function writeRun(
  path: string,
  chainId: string,
  calls: number,
  key: AuditKey | undefined,
): Promise<string[]> {
  const audit = createAudit({ sink: createFileSink(path), chainId, ...(key !== undefined && { key }) });
  const client = await serve([audit]);
  for (let index = 1; index <= calls; index += 1) {
    await client.callTool('get_order', { id: `${chainId}-${index}` });
  }
  await audit.close();
  await closeConnections();
  return (await readFile(path, 'utf8')).split('\n').filter((line) => line !== '');
}

describe('createAudit({ key })', () => {
  it('refuses a key shorter than 32 bytes with a RangeError naming the option', () => {
    expect(() => createAudit({ key: 'too short' })).toThrow(
      new RangeError('createAudit: key must be at least 32 bytes (got 9)'),
    );
    expect(() => createAudit({ key: randomBytes(31) })).toThrow(
      new RangeError('createAudit: key must be at least 32 bytes (got 31)'),
    );
    // Bytes, not characters: 11 three-byte characters are 33 bytes.
    expect(() => createAudit({ key: '€'.repeat(11) })).not.toThrow();
    expect(() => createAudit({ key: new Uint8Array(32) })).not.toThrow();
    expect(() => createAudit({ key: 42 as unknown as string })).toThrow(
      new TypeError('createAudit: key must be a string, a Buffer or a Uint8Array'),
    );
  });

  it('a keyed record is the canonical JSON with keyId in its sorted place, hashed with HMAC-SHA256 under the key', async () => {
    const path = join(dir, 'format.jsonl');
    const lines = await writeRun(path, 'pod-k', 2, KEY);
    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    let prevHash = '0'.repeat(64);
    for (const [index, line] of lines.entries()) {
      const { hash, ...rest } = records[index]!;
      expect(rest).toMatchObject({ chainId: 'pod-k', keyId: keyIdOf(KEY), seq: index + 1, prevHash });
      // Exactly what core's canonicalJson gives for the record, then the hash: keyId between
      // incidentId and outcome.
      expect(line).toBe(`${canonicalJson(rest).slice(0, -1)},"hash":"${hash}"}`);
      expect(line).toMatch(/"durationMs":[0-9.]+,"keyId":"[0-9a-f]{16}","outcome":"ok"/);
      expect(hash).toBe(hmac(KEY, canonicalJson(rest)));
      expect(hash).not.toBe(sha256(canonicalJson(rest)));
      prevHash = hash as string;
    }
    // The id names the key without being it, nor a plain digest of it.
    expect(keyIdOf(KEY)).not.toBe(sha256(KEY).slice(0, 16));
    expect(lines.join('\n')).not.toContain(KEY);
  });

  it('without a key, records carry no keyId and plain SHA-256, as before', async () => {
    const lines = await writeRun(join(dir, 'plain.jsonl'), 'pod-p', 2, undefined);
    for (const line of lines) {
      const { hash, ...rest } = JSON.parse(line) as Record<string, unknown>;
      expect(rest).not.toHaveProperty('keyId');
      expect(hash).toBe(sha256(canonicalJson(rest)));
    }
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({ intact: true, records: 2 });
  });
});

describe('readAuditKeyFile', () => {
  it('gives the file bytes less exactly one trailing LF or CRLF, and throws ENOENT for a missing file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-keyfile-'));
    try {
      const cases: Array<[string, Buffer, Buffer]> = [
        ['plain', Buffer.from(KEY), Buffer.from(KEY)],
        ['lf', Buffer.from(`${KEY}\n`), Buffer.from(KEY)],
        ['crlf', Buffer.from(`${KEY}\r\n`), Buffer.from(KEY)],
        ['two newlines', Buffer.from(`${KEY}\n\n`), Buffer.from(`${KEY}\n`)],
        ['a lone CR', Buffer.from(`${KEY}\r`), Buffer.from(`${KEY}\r`)],
        // A binary key keeps CR and LF bytes inside it. (Not a random key: one ending in 0x0d,
        // one time in 256, would read as a CRLF ending; the README says to write binary keys
        // without a newline.)
        ['binary', Buffer.concat([BINARY_KEY, Buffer.from([0x0a])]), BINARY_KEY],
        ['binary without newline', BINARY_KEY, BINARY_KEY],
      ];
      for (const [name, bytes, expected] of cases) {
        const path = join(dir, `${name}.key`);
        await writeFile(path, bytes);
        expect(readAuditKeyFile(path).equals(expected), name).toBe(true);
      }
      expect(() => readAuditKeyFile(join(dir, 'absent.key'))).toThrow(
        expect.objectContaining({ code: 'ENOENT' }),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('verifying a keyed chain', () => {
  let path: string;
  let lines: string[];
  let records: AuditRecord[];
  const id = keyIdOf(KEY);

  beforeAll(async () => {
    path = join(dir, 'keyed.jsonl');
    lines = await writeRun(path, 'pod-a', 5, KEY);
    records = lines.map((line) => JSON.parse(line) as AuditRecord);
  });

  it('verifies with its key (a string, or the same bytes as a Buffer, alone or in a list)', async () => {
    for (const keys of [KEY, Buffer.from(KEY), [OTHER_KEY, KEY]]) {
      await expect(verifyAuditFile(path, { keys })).resolves.toEqual({
        intact: true,
        records: 5,
        head: records[4]!.hash,
        chains: [{ chain: 'pod-a', intact: true, records: 5, head: records[4]!.hash }],
      });
    }
  });

  it('without its key, the first record is reported with the key id it needs', async () => {
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      records: 0,
      brokenAt: 1,
      reason: `record 1 (seq 1) is keyed with key ${id}: pass its key to verify`,
    });
  });

  it('with the wrong key, likewise: no key of that id was given', async () => {
    await expect(verifyAuditFile(path, { keys: OTHER_KEY })).resolves.toMatchObject({
      intact: false,
      brokenAt: 1,
      reason: `record 1 (seq 1) is keyed with key ${id}: pass its key to verify`,
    });
  });

  it('refuses verifier keys shorter than 32 bytes, and an empty list', async () => {
    await expect(verifyAuditFile(path, { keys: [KEY, 'short'] })).rejects.toThrow(
      new RangeError('verifyAuditFile: keys must be at least 32 bytes (got 5)'),
    );
    await expect(verifyAuditLines(lines, { keys: [] })).rejects.toThrow(
      new RangeError('verifyAuditLines: keys must hold at least one key'),
    );
  });

  describe('an attacker who can write the file but has not got the key', () => {
    it('edits one record and recomputes every later hash with plain SHA-256: broken at the edit', async () => {
      const edited = relink(
        [{ ...records[2]!, args: { id: 'pod-a-9' } }, records[3]!, records[4]!],
        sha256,
        records[1]!.hash,
      );
      await expect(verifyAuditLines([...lines.slice(0, 2), ...edited], { keys: KEY })).resolves.toMatchObject(
        {
          intact: false,
          records: 2,
          brokenAt: 3,
          reason: 'record 3 (seq 3) was altered: its content does not match its hash',
        },
      );
    });

    it('strips keyId from every record and recomputes plain SHA-256: refused once keys are given', async () => {
      const stripped = relink(
        records.map(({ keyId: _keyId, ...rest }) => rest),
        sha256,
      );
      // Without keys the verifier cannot tell a forged chain from a plain one: pass the keys.
      await expect(verifyAuditLines(stripped)).resolves.toMatchObject({ intact: true, records: 5 });
      await expect(verifyAuditLines(stripped, { keys: KEY })).resolves.toMatchObject({
        intact: false,
        records: 0,
        brokenAt: 1,
        reason:
          'record 1 (seq 1) is not keyed: its hash is plain SHA-256, which anyone can recompute (a log begun without a key is verified with allowUnkeyed)',
      });
    });

    it('strips keyId from the records after an edit: refused even with allowUnkeyed (a downgrade after keyed records)', async () => {
      const stripped = relink(
        [{ ...records[2]!, outcome: 'permission_denied' }, records[3]!, records[4]!].map(
          ({ keyId: _keyId, ...rest }) => rest,
        ),
        sha256,
        records[1]!.hash,
      );
      await expect(
        verifyAuditLines([...lines.slice(0, 2), ...stripped], { keys: KEY, allowUnkeyed: true }),
      ).resolves.toMatchObject({
        intact: false,
        records: 2,
        brokenAt: 3,
        reason:
          'record 3 (seq 3) is not keyed, after keyed records of its chain: its keyId was stripped (a downgrade)',
      });
    });

    it('appends a record with a guessed HMAC: broken at the forged record', async () => {
      const { hash: _hash, ...last } = records[4]!;
      const guess = { ...last, seq: 6, prevHash: records[4]!.hash, args: { id: 'forged' } };
      const forged = `${canonicalJson(guess).slice(0, -1)},"hash":"${randomBytes(32).toString('hex')}"}`;
      await expect(verifyAuditLines([...lines, forged], { keys: KEY })).resolves.toMatchObject({
        intact: false,
        records: 5,
        brokenAt: 6,
        reason: 'record 6 (seq 6) was altered: its content does not match its hash',
      });
    });

    it('re-keys the chain under a key of their own: its key id is not one the verifier holds', async () => {
      const rekeyed = relink(
        records.map((record) => ({ ...record, keyId: keyIdOf(OTHER_KEY), outcome: 'internal' })),
        (canonical) => hmac(OTHER_KEY, canonical),
      );
      await expect(verifyAuditLines(rekeyed, { keys: KEY })).resolves.toMatchObject({
        intact: false,
        brokenAt: 1,
        reason: `record 1 (seq 1) is keyed with key ${keyIdOf(OTHER_KEY)}: pass its key to verify`,
      });
      const malformed = relink([{ ...records[0]!, keyId: 'KEY' }], sha256);
      await expect(verifyAuditLines(malformed, { keys: KEY })).resolves.toMatchObject({
        brokenAt: 1,
        reason: 'record 1 (seq 1) has a malformed keyId',
      });
    });
  });
});

describe('key rotation and a log begun without a key', () => {
  it('a restart with a new key continues the same chain; it verifies with both keys, and names the one missing', async () => {
    const path = join(dir, 'rotated.jsonl');
    await writeRun(path, 'pod-r', 3, KEY);
    const lines = await writeRun(path, 'pod-r', 2, OTHER_KEY);
    const records = lines.map((line) => JSON.parse(line) as AuditRecord);
    expect(records.map(({ seq, keyId }) => [seq, keyId])).toEqual([
      [1, keyIdOf(KEY)],
      [2, keyIdOf(KEY)],
      [3, keyIdOf(KEY)],
      [4, keyIdOf(OTHER_KEY)],
      [5, keyIdOf(OTHER_KEY)],
    ]);
    // The new key's first record links to the old key's last.
    expect(records[3]!.prevHash).toBe(records[2]!.hash);
    await expect(verifyAuditFile(path, { keys: [KEY, OTHER_KEY] })).resolves.toMatchObject({
      intact: true,
      records: 5,
      head: records[4]!.hash,
    });
    await expect(verifyAuditFile(path, { keys: KEY })).resolves.toMatchObject({
      intact: false,
      records: 3,
      brokenAt: 4,
      reason: `record 4 (seq 4) is keyed with key ${keyIdOf(OTHER_KEY)}: pass its key to verify`,
    });
  });

  it('two writers with two keys on one file: each chain verified with its own key', async () => {
    const path = join(dir, 'two-keys.jsonl');
    await writeRun(path, 'pod-1', 2, KEY);
    const lines = await writeRun(path, 'pod-2', 2, OTHER_KEY);
    await expect(verifyAuditFile(path, { keys: [OTHER_KEY, KEY] })).resolves.toMatchObject({
      intact: true,
      records: 4,
      chains: [
        { chain: 'pod-1', intact: true, records: 2 },
        { chain: 'pod-2', intact: true, records: 2 },
      ],
    });
    // pod-2's first record names pod-1's last (`after`), under pod-2's key.
    expect(JSON.parse(lines[2]!)).toMatchObject({ after: { chainId: 'pod-1', seq: 2 } });
  });

  it('a chain begun without a key and continued with one verifies with allowUnkeyed, and only with it', async () => {
    const path = join(dir, 'upgraded.jsonl');
    await writeRun(path, 'pod-u', 2, undefined);
    const lines = await writeRun(path, 'pod-u', 2, KEY);
    expect(lines.map((line) => (JSON.parse(line) as AuditRecord).keyId)).toEqual([
      undefined,
      undefined,
      keyIdOf(KEY),
      keyIdOf(KEY),
    ]);
    await expect(verifyAuditFile(path, { keys: KEY, allowUnkeyed: true })).resolves.toMatchObject({
      intact: true,
      records: 4,
    });
    await expect(verifyAuditFile(path, { keys: KEY })).resolves.toMatchObject({
      intact: false,
      brokenAt: 1,
      reason: expect.stringMatching(/^record 1 \(seq 1\) is not keyed: /),
    });
    // An edit of the unkeyed part, its hashes recomputed: the first keyed record names the real one.
    const records = lines.map((line) => JSON.parse(line) as AuditRecord);
    const edited = relink([records[0]!, { ...records[1]!, outcome: 'internal' }], sha256);
    await expect(
      verifyAuditLines([...edited, ...lines.slice(2)], { keys: KEY, allowUnkeyed: true }),
    ).resolves.toMatchObject({
      intact: false,
      brokenAt: 3,
      reason:
        'record 3 (seq 3) does not link to the previous record of its chain: its prevHash differs (a record was inserted or replaced)',
    });
  });
});

describe.each(databases)('keyed chains in a table, on $name', ({ open }) => {
  const suite = suiteDatabase(open);

  it('two replicas with their own keys: the table verifies with both keys, its columns checked; an edited row with a plain hash is found', async () => {
    const table = suite.newTable();
    const { client } = suite.db;
    for (const [chainId, key] of [
      ['pod-a', KEY],
      ['pod-b', OTHER_KEY],
    ] as const) {
      const audit = createAudit({ sink: createPostgresSink({ client, table }), chainId, key });
      // The table made and the head read before the calls, as an app starts: on a loaded machine PGlite
      // took most of close()'s 10 s deadline making the table, and the records were counted lost.
      await audit.ready();
      const served = await serve([audit]);
      for (let index = 1; index <= 3; index += 1)
        await served.callTool('get_order', { id: `${chainId}-${index}` });
      await audit.close();
      await closeConnections();
    }
    await expect(verifyAuditTable({ client, table, keys: [KEY, OTHER_KEY] })).resolves.toMatchObject({
      intact: true,
      records: 6,
      chains: [
        { chain: 'pod-a', intact: true, records: 3 },
        { chain: 'pod-b', intact: true, records: 3 },
      ],
    });
    await expect(verifyAuditTable({ client, table, keys: KEY })).resolves.toMatchObject({
      intact: false,
      brokenAt: 1,
      reason: `record 1 (seq 1) is keyed with key ${keyIdOf(OTHER_KEY)}: pass its key to verify`,
    });
    // Row 2 of pod-a rewritten with a recomputed plain SHA-256 (record and hash column alike).
    const { rows } = await client.query(
      `SELECT record::text AS r FROM ${table} WHERE chain = 'pod-a' AND seq = 2`,
    );
    const original = JSON.parse((rows[0] as { r: string }).r) as AuditRecord;
    const [forged] = relink([{ ...original, outcome: 'permission_denied' }], sha256, original.prevHash);
    await client.query(
      `UPDATE ${table} SET record = $1::json, outcome = 'permission_denied', hash = $2 WHERE chain = 'pod-a' AND seq = 2`,
      [forged, JSON.parse(forged!).hash],
    );
    await expect(
      verifyAuditTable({ client, table, keys: [KEY, OTHER_KEY], chain: 'pod-a' }),
    ).resolves.toMatchObject({
      intact: false,
      records: 1,
      brokenAt: 2,
      reason: 'record 2 (seq 2) was altered: its content does not match its hash',
    });
  });

  it('a lost acknowledgement of a committed keyed batch: the retry compares the keyed hashes and recognises it', async () => {
    const table = suite.newTable();
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createPostgresSink({ client: losingFirstInsertReply(suite.db.client), table, copy: false }),
      key: KEY,
      logger: recordingLogger(log),
    });
    const served = await serve([audit]);
    await Promise.all(
      Array.from({ length: 20 }, (_, index) => served.callTool('get_order', { id: `A-${index}` })),
    );
    await audit.close();
    expect(audit.stats()).toMatchObject({ written: 20, dropped: 0, rejected: 0, duplicateBatches: 1 });
    expect(log.map((entry) => entry.message)).toEqual([
      'audit sink failing (transient); retrying the same batch with backoff while records wait in the buffer',
      'audit sink recovered',
    ]);
    await expect(verifyAuditTable({ client: suite.db.client, table, keys: KEY })).resolves.toMatchObject({
      intact: true,
      records: 20,
      head: audit.head()!.hash,
    });
  });
});

// toolgate-audit verify with keys and expected heads: the built CLI, in a child process, on files and
// tables the sinks wrote through real calls.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditHead, createAudit, createFileSink, createPostgresSink } from '../src/index.js';
import { databases, uniqueTable } from './database.js';
import { cli, cliWithEnv, closeConnections, serve } from './helpers.js';

// A key as `openssl rand -hex 32` writes it: 64 hex characters, used as they are.
const KEY = randomBytes(32).toString('hex');
const OLD_KEY = randomBytes(32).toString('hex');

let dir: string;
let path: string;
let keyFile: string;
let oldKeyFile: string;
let head: AuditHead;
let lines: string[];

const headText = ({ chainId, seq, hash }: AuditHead): string => `${chainId}:${seq}:${hash}`;

/** Neither output holds a key. */
function expectNoKey(result: { stdout: string; stderr: string }): void {
  for (const key of [KEY, OLD_KEY]) {
    expect(result.stdout).not.toContain(key);
    expect(result.stderr).not.toContain(key);
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-cli-keys-'));
  path = join(dir, 'audit.jsonl');
  keyFile = join(dir, 'audit.key');
  oldKeyFile = join(dir, 'old.key');
  await writeFile(keyFile, `${KEY}\n`, { mode: 0o600 });
  await writeFile(oldKeyFile, OLD_KEY, { mode: 0o600 });
  // A chain id with colons: --expect-head splits from the right.
  for (const key of [OLD_KEY, KEY]) {
    const audit = createAudit({ sink: createFileSink(path), chainId: 'pod:a', key });
    const client = await serve([audit]);
    for (let index = 1; index <= 3; index += 1) await client.callTool('get_order', { id: `A-${index}` });
    await audit.close();
    head = audit.head()!;
    await closeConnections();
  }
  lines = (await readFile(path, 'utf8')).split('\n').slice(0, -1);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('toolgate-audit verify --key-file / --key-env', () => {
  it('a rotated keyed chain: intact with both key files (a trailing newline trimmed), exit 0', async () => {
    const result = await cli('verify', path, '--key-file', oldKeyFile, '--key-file', keyFile);
    expect(result).toEqual({
      code: 0,
      stdout: `chain pod:a: intact, 6 records, head ${head.hash}\nintact: 6 records in 1 chains\n`,
      stderr: '',
    });
    expect(head.seq).toBe(6);
  });

  it('a key from the environment, beside a key file', async () => {
    const result = await cliWithEnv(
      { AUDIT_KEY: KEY },
      'verify',
      path,
      '--key-file',
      oldKeyFile,
      '--key-env',
      'AUDIT_KEY',
    );
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/^chain pod:a: intact, 6 records/);
  });

  it('without the keys, or without the newer one: broken, naming the key id needed, exit 1', async () => {
    const none = await cli('verify', path);
    expect(none.code).toBe(1);
    expect(none.stdout).toMatch(
      /^chain pod:a: broken at record 1: record 1 \(seq 1\) is keyed with key [0-9a-f]{16}: pass its key to verify\n/,
    );
    const newId = JSON.parse(lines[3]!).keyId as string;
    await expect(cli('verify', path, '--key-file', oldKeyFile)).resolves.toEqual({
      code: 1,
      stdout: `chain pod:a: broken at record 4: record 4 (seq 4) is keyed with key ${newId}: pass its key to verify\nbroken at record 4: record 4 (seq 4) is keyed with key ${newId}: pass its key to verify\n`,
      stderr: '',
    });
    expectNoKey(none);
  });

  it('a wrong key: broken, exit 1, and no key printed', async () => {
    const wrong = join(dir, 'wrong.key');
    await writeFile(wrong, randomBytes(32).toString('hex'));
    const result = await cli('verify', path, '--key-file', wrong);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/is keyed with key [0-9a-f]{16}: pass its key to verify\n$/);
    expectNoKey(result);
  });

  it('usage errors exit 2: a short key file, an unset variable, --allow-unkeyed without a key, a missing key file', async () => {
    const short = join(dir, 'short.key');
    await writeFile(short, 'abc\n');
    await expect(cli('verify', path, '--key-file', short)).resolves.toEqual({
      code: 2,
      stdout: '',
      stderr: `toolgate-audit: --key-file ${short}: a key must be at least 32 bytes (got 3)\n`,
    });
    await expect(cliWithEnv({ AUDIT_KEY: '' }, 'verify', path, '--key-env', 'AUDIT_KEY')).resolves.toEqual({
      code: 2,
      stdout: '',
      stderr: 'toolgate-audit: --key-env AUDIT_KEY: $AUDIT_KEY is not set\n',
    });
    await expect(cli('verify', path, '--allow-unkeyed')).resolves.toEqual({
      code: 2,
      stdout: '',
      stderr: 'toolgate-audit: --allow-unkeyed needs a key (--key-file or --key-env)\n',
    });
    const missing = await cli('verify', path, '--key-file', join(dir, 'absent.key'));
    expect(missing).toMatchObject({ code: 2, stdout: '' });
    expect(missing.stderr).toMatch(/^toolgate-audit: ENOENT/);
  });
});

describe('toolgate-audit verify --expect-head', () => {
  it('the head the writer gave: intact, exit 0', async () => {
    const result = await cli(
      'verify',
      path,
      '--key-file',
      oldKeyFile,
      '--key-file',
      keyFile,
      '--expect-head',
      headText(head),
    );
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/\nintact: 6 records in 1 chains\n$/);
  });

  it('the last records cut off the file (a real edit): broken, the cut named, exit 1', async () => {
    const cut = join(dir, 'cut.jsonl');
    await writeFile(cut, `${lines.slice(0, 4).join('\n')}\n`);
    const keys = ['--key-file', oldKeyFile, '--key-file', keyFile];
    await expect(cli('verify', cut, ...keys)).resolves.toMatchObject({ code: 0 });
    const reason = `chain pod:a ends at seq 4 but seq 6 (hash ${head.hash}) was expected: records were cut off the end`;
    await expect(cli('verify', cut, ...keys, '--expect-head', headText(head))).resolves.toEqual({
      code: 1,
      stdout: `chain pod:a: broken at record 5: ${reason}\nbroken at record 5: ${reason}\n`,
      stderr: '',
    });
  });

  it('a malformed head is a usage error, exit 2', async () => {
    for (const bad of ['pod:a:6', `pod:a:0:${head.hash}`, `pod:a:6:${head.hash.toUpperCase()}`, 'x']) {
      const result = await cli('verify', path, '--expect-head', bad);
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^toolgate-audit: --expect-head .*: expected CHAIN:SEQ:HASH/);
    }
  });

  // The CLI reaches a table over the network: where TEST_DATABASE_URL names a server (always in CI).
  const servers = databases.filter((database) => database.name === 'PostgreSQL');
  it.each(servers)('verify --table on $name with --key-file and --expect-head', async ({ open }) => {
    const db = await open();
    const table = uniqueTable();
    try {
      const audit = createAudit({ sink: createPostgresSink({ client: db.client, table }), key: KEY });
      const client = await serve([audit]);
      for (let index = 1; index <= 3; index += 1) await client.callTool('get_order', { id: `A-${index}` });
      await audit.close();
      await closeConnections();
      const tableHead = audit.head()!;
      const args = ['verify', '--table', table, '--database-url', process.env.TEST_DATABASE_URL!];
      await expect(
        cli(...args, '--key-file', keyFile, '--expect-head', headText(tableHead)),
      ).resolves.toEqual({
        code: 0,
        stdout: `chain ${tableHead.chainId}: intact, 3 records, head ${tableHead.hash}\nintact: 3 records in 1 chains\n`,
        stderr: '',
      });
      const unkeyed = await cli(...args);
      expect(unkeyed.code).toBe(1);
      expect(unkeyed.stdout).toMatch(
        /record 1 \(seq 1\) is keyed with key [0-9a-f]{16}: pass its key to verify\n$/,
      );
      await db.client.query(`DELETE FROM ${table} WHERE seq = 3`);
      const reason = `chain ${tableHead.chainId} ends at seq 2 but seq 3 (hash ${tableHead.hash}) was expected: records were cut off the end`;
      await expect(
        cli(...args, '--key-file', keyFile, '--expect-head', headText(tableHead)),
      ).resolves.toEqual({
        code: 1,
        stdout: `chain ${tableHead.chainId}: broken at record 3: ${reason}\nbroken at record 3: ${reason}\n`,
        stderr: '',
      });
    } finally {
      await db.client.query(`DROP TABLE IF EXISTS ${table}`);
      await db.end();
    }
  });
});

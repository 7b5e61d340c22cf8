// TOOLGATE_AUDIT_KEY_FILE: the real app over stdio keys its audit chain with HMAC-SHA256, and the real
// `toolgate-audit verify` checks it with the same file; a chain recomputed with plain SHA-256 (what
// someone who can write the file but lacks the key can do) no longer verifies.
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterEach, describe, expect, it } from 'vitest';
import { readConfig, UsageError } from '../src/config.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MAIN = join(ROOT, 'dist', 'main.js');
const AUDIT_CLI = join(ROOT, 'node_modules', '@toolgate', 'audit', 'dist', 'cli.js');
const run = promisify(execFile);

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** The CLI's exit code and report. */
async function verify(...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout } = await run(process.execPath, [AUDIT_CLI, 'verify', ...args]);
    return { code: 0, out: stdout };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, out: failed.stdout + failed.stderr };
  }
}

describe('order-service: a keyed audit chain (TOOLGATE_AUDIT_KEY_FILE)', () => {
  it('records calls under the key; the CLI verifies them with the key file and refuses a plain-SHA-256 rewrite', async () => {
    dir = mkdtempSync(join(tmpdir(), 'order-service-audit-key-'));
    const keyFile = join(dir, 'audit.key');
    const auditFile = join(dir, 'audit.jsonl');
    // As `openssl rand -hex 32 > audit.key` writes it: 64 characters and a newline.
    const keyText = createHash('sha256').update(dir).digest('hex');
    writeFileSync(keyFile, `${keyText}\n`, { mode: 0o600 });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [MAIN],
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        AUDIT_FILE: auditFile,
        TOOLGATE_AUDIT_KEY_FILE: keyFile,
        CARRIER_URL: 'http://127.0.0.1:9',
      },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const client = new Client({ name: 'audit-key-test', version: '1' });
    await client.connect(transport, { timeout: 120_000 });
    await client.callTool({ name: 'search_docs', arguments: { query: 'refund' } });
    await client.callTool({ name: 'get_order_status', arguments: { order_id: 'nope' } });
    await client.close(); // stdin closes: the app flushes audit and exits
    expect(stderr).not.toContain(keyText);

    const lines = readFileSync(auditFile, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(2);
    for (const line of lines)
      expect(JSON.parse(line)).toMatchObject({ keyId: expect.stringMatching(/^[0-9a-f]{16}$/) });
    expect(await verify(auditFile, '--key-file', keyFile)).toMatchObject({
      code: 0,
      out: expect.stringContaining('intact: 2 records'),
    });
    const unkeyed = await verify(auditFile);
    expect(unkeyed.code).toBe(1);
    expect(unkeyed.out).toContain('is keyed with key');

    // Someone who can write the file edits a record and recomputes every hash with SHA-256.
    let prevHash = '0'.repeat(64);
    const forged = lines.map((line) => {
      const { hash: _old, keyId: _id, ...record } = JSON.parse(line) as Record<string, unknown>;
      if (record.seq === 2) record.tool = 'search_docs';
      record.prevHash = prevHash;
      const canonical = JSON.stringify(
        Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : 1))),
      );
      prevHash = createHash('sha256').update(canonical).digest('hex');
      return `${canonical.slice(0, -1)},"hash":"${prevHash}"}`;
    });
    writeFileSync(auditFile, `${forged.join('\n')}\n`);
    expect((await verify(auditFile)).code).toBe(0); // without the key, a plain chain verifies...
    const refused = await verify(auditFile, '--key-file', keyFile);
    expect(refused.code).toBe(1); // ...with it, the rewrite is found
    expect(refused.out).toContain('is not keyed');
  }, 120_000);

  it('a key file shorter than 32 bytes stops start-up with a usage error naming the variable', async () => {
    dir = mkdtempSync(join(tmpdir(), 'order-service-audit-key-'));
    const keyFile = join(dir, 'short.key');
    writeFileSync(keyFile, 'too-short\n');
    const child = spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TOOLGATE_AUDIT_KEY_FILE: keyFile },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const code = await new Promise<number | null>((done) => child.once('exit', done));
    expect(code).not.toBe(0);
    expect(stderr).toContain('TOOLGATE_AUDIT_KEY_FILE must hold at least 32 bytes');
    expect(stderr).not.toContain('too-short');
  }, 60_000);

  it('readConfig: a deployment name (TOOLGATE_CONFIRM_AUDIENCE) that cannot start a Redis key is a usage error naming the variable', () => {
    expect(readConfig([], { TOOLGATE_CONFIRM_AUDIENCE: 'orders-prod' }).confirmAudience).toBe('orders-prod');
    for (const bad of ['prod{x}', 'prod:idem', 'prod\nx', '-prod', 'x'.repeat(65)]) {
      expect(() => readConfig([], { TOOLGATE_CONFIRM_AUDIENCE: bad }), bad).toThrow(
        /^TOOLGATE_CONFIRM_AUDIENCE must be 1 to 64 letters/,
      );
    }
  });

  it('readConfig: the key is the file less its newline; a missing file is a usage error naming the variable, not the path', () => {
    dir = mkdtempSync(join(tmpdir(), 'order-service-audit-key-'));
    const keyFile = join(dir, 'audit.key');
    writeFileSync(keyFile, `${'a'.repeat(64)}\r\n`);
    const config = readConfig([], { TOOLGATE_AUDIT_KEY_FILE: keyFile });
    expect(config.auditKey?.toString('utf8')).toBe('a'.repeat(64));
    expect(readConfig([], {}).auditKey).toBeUndefined();
    const missing = join(dir, 'secret-dir', 'absent.key');
    let thrown: unknown;
    try {
      readConfig([], { TOOLGATE_AUDIT_KEY_FILE: missing });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(UsageError);
    expect((thrown as Error).message).toBe('TOOLGATE_AUDIT_KEY_FILE cannot be read: ENOENT');
  });
});

import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { reportMissingService } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, type ScratchDatabase, TEST_DATABASE_URL } from './fleet-harness.js';

const MAIN = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'main.js');

if (!TEST_DATABASE_URL) {
  reportMissingService(
    it,
    'the audit start-up test',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
}

describe.runIf(TEST_DATABASE_URL)('start-up with audit on PostgreSQL', () => {
  let database: ScratchDatabase;
  beforeAll(async () => {
    database = await createScratchDatabase(TEST_DATABASE_URL!);
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('sets the audit table up before it serves: the table exists when the service says ready, before any call', async () => {
    const child = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        CARRIER_URL: 'http://127.0.0.1:9',
        // The orders on the same (empty) PostgreSQL database, as a deployment may have them: the start-up
        // tolerates a schema not set up yet, and the child spends nothing on loading the embedded
        // database, which is not what this test is about.
        DATABASE_URL: database.url,
        AUDIT_DATABASE_URL: database.url,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    const serving = new Promise<void>((resolveReady, reject) => {
      const timer = setTimeout(() => reject(new Error(`never ready; stderr:\n${stderr}`)), 60_000);
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
        stderr += chunk;
        if (/"msg":"ready"/.test(stderr)) {
          clearTimeout(timer);
          resolveReady();
        }
      });
    });
    try {
      await serving;
      // No call was sent: the table and its chain exist because start-up waited for the sink.
      const [row] = await database.query<{ found: boolean }>(
        "SELECT to_regclass('toolgate_audit') IS NOT NULL AS found",
      );
      expect(row!.found).toBe(true);
      expect(stderr).not.toMatch(/audit sink not set up yet/);
    } finally {
      child.stdin.end();
      await new Promise<void>((done) => child.once('exit', () => done()));
    }
    // Its own 60 s limit on start-up above is the hang to report; the test's must not cut it short.
  }, 90_000);
});

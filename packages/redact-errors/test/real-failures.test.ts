import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { defineTool, ERROR_CODE_DEFAULTS } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { closeAll, INCIDENT_ID, seenEnvelope, serve } from './helpers.js';

// PostgreSQL: TEST_DATABASE_URL when set; in CI it must be set; elsewhere the pg cases fall back to
// errors constructed with the same SQLSTATE (their test names say so).
const DATABASE_URL = process.env.TEST_DATABASE_URL;
if (DATABASE_URL === undefined && process.env.CI === 'true') {
  throw new Error('TEST_DATABASE_URL must be set in CI: the real PostgreSQL failures are tested against it');
}
const SOURCE = DATABASE_URL === undefined ? 'constructed (no TEST_DATABASE_URL)' : 'real PostgreSQL';
const SCHEMA = 'toolgate_redact_errors_test';
const ROLE = 'toolgate_redact_errors_reader';

function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, severity: 'ERROR' });
}

async function withClient<T>(run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  // A terminated backend also emits 'error' on the client; the query's rejection is what we test.
  client.on('error', () => {});
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end().catch(() => {});
  }
}

async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

let silent: Server;
let silentUrl: string;
beforeAll(async () => {
  // Accepts requests and never answers them: a dependency that hangs.
  silent = createServer(() => {});
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  silentUrl = `http://127.0.0.1:${(silent.address() as { port: number }).port}/`;
  if (DATABASE_URL !== undefined) {
    await withClient(async (client) => {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
      await client.query(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.payroll (id int)`);
      await client.query(
        `DO $$ BEGIN CREATE ROLE ${ROLE} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
      );
    });
  }
});
afterAll(async () => {
  silent.closeAllConnections();
  await new Promise<void>((resolve) => silent.close(() => resolve()));
});
afterEach(closeAll);

const failures = defineTool({
  name: 'failures',
  description: 'Fails the way real dependencies fail.',
  input: {
    kind: z.enum([
      'pg-refused',
      'pg-timeout',
      'pg-privilege',
      'pg-terminated',
      'fetch-refused',
      'fetch-timeout',
      'abort',
    ]),
  },
  handler: async ({ kind }) => {
    if (kind === 'pg-refused') {
      const client = new pg.Client({
        host: '127.0.0.1',
        port: await closedPort(),
        user: 'postgres',
        database: 'test',
      });
      await client.connect();
    }
    if (kind === 'fetch-refused') await fetch(`http://127.0.0.1:${await closedPort()}/orders`);
    if (kind === 'fetch-timeout') await fetch(silentUrl, { signal: AbortSignal.timeout(50) });
    if (kind === 'abort') await sleep(10_000, undefined, { signal: AbortSignal.abort() });
    if (DATABASE_URL === undefined) {
      if (kind === 'pg-timeout') throw pgError('57014', 'canceling statement due to statement timeout');
      if (kind === 'pg-privilege') throw pgError('42501', `permission denied for schema ${SCHEMA}`);
      if (kind === 'pg-terminated')
        throw pgError('57P01', 'terminating connection due to administrator command');
    }
    await withClient(async (client) => {
      if (kind === 'pg-timeout') {
        await client.query('SET statement_timeout = 50');
        await client.query('SELECT pg_sleep(5)');
      }
      if (kind === 'pg-privilege') {
        await client.query('BEGIN');
        await client.query(`SET LOCAL ROLE ${ROLE}`);
        await client.query(`SELECT id FROM ${SCHEMA}.payroll`);
      }
      if (kind === 'pg-terminated') await client.query('SELECT pg_terminate_backend(pg_backend_pid())');
    });
    throw new Error(`unreachable: ${kind} did not fail`);
  },
});

async function failureOf(kind: string): Promise<{ envelope: Record<string, unknown>; log: LogEntry }> {
  const entries: LogEntry[] = [];
  const c = await serve([failures], [createRedactErrors()], recordingLogger(entries));
  const envelope = seenEnvelope(await c.callTool('failures', { kind }));
  expect(envelope.incidentId).toMatch(INCIDENT_ID);
  const log = entries.find((entry) => entry.fields.incidentId === envelope.incidentId && entry.fields.error)!;
  expect(log.level).toBe('warn');
  return { envelope: { ...envelope, incidentId: 'checked' }, log };
}

const UNAVAILABLE = {
  ok: false,
  error: 'unavailable',
  hint: ERROR_CODE_DEFAULTS.unavailable.hint,
  retryable: true,
  incidentId: 'checked',
};
const TIMEOUT = {
  ok: false,
  error: 'timeout',
  hint: ERROR_CODE_DEFAULTS.timeout.hint,
  retryable: true,
  incidentId: 'checked',
};

describe('real failures become designed codes through a real client', () => {
  it('a real pg connection refused (127.0.0.1, closed port) is unavailable; the log keeps address and port', async () => {
    const { envelope, log } = await failureOf('pg-refused');
    expect(envelope).toEqual({ ...UNAVAILABLE, message: 'A service this tool depends on is unavailable.' });
    expect(log.fields).toMatchObject({
      reason: 'ECONNREFUSED',
      error: {
        message: expect.stringMatching(/^connect ECONNREFUSED 127\.0\.0\.1:\d+$/),
        fields: { code: 'ECONNREFUSED', address: '127.0.0.1' },
      },
    });
  });

  it(`a pg statement timeout (57014) is timeout with a narrowing hint [${SOURCE}]`, async () => {
    const { envelope, log } = await failureOf('pg-timeout');
    expect(envelope).toEqual({
      ...TIMEOUT,
      message: 'The database query took too long.',
      hint: 'The query ran past its time limit. Retry once with narrower arguments (a shorter period, a lower limit).',
    });
    expect(log.fields).toMatchObject({
      reason: 'pg 57014 statement timeout',
      error: {
        message: 'canceling statement due to statement timeout',
        fields: { code: '57014', severity: 'ERROR' },
      },
    });
  });

  it(`pg insufficient privilege (42501) is permission_denied, naming nothing [${SOURCE}]`, async () => {
    const { envelope, log } = await failureOf('pg-privilege');
    expect(envelope).toEqual({
      ok: false,
      error: 'permission_denied',
      message: 'This operation is not permitted.',
      hint: ERROR_CODE_DEFAULTS.permission_denied.hint,
      retryable: false,
      incidentId: 'checked',
    });
    expect(log.fields).toMatchObject({
      reason: 'pg 42501 insufficient privilege',
      error: { message: `permission denied for schema ${SCHEMA}` },
    });
  });

  it(`a terminated pg backend (57P01) is unavailable [${SOURCE}]`, async () => {
    const { envelope, log } = await failureOf('pg-terminated');
    expect(envelope).toEqual({ ...UNAVAILABLE, message: 'The database is unavailable.' });
    expect(log.fields).toMatchObject({ reason: 'pg 57P01' });
  });

  it('a real fetch to a closed port (TypeError "fetch failed", ECONNREFUSED in its cause) is unavailable', async () => {
    const { envelope, log } = await failureOf('fetch-refused');
    expect(envelope).toEqual({ ...UNAVAILABLE, message: 'A service this tool depends on is unavailable.' });
    expect(log.fields).toMatchObject({
      reason: 'ECONNREFUSED',
      error: { name: 'TypeError', message: 'fetch failed', cause: { fields: { code: 'ECONNREFUSED' } } },
    });
  });

  it('a real AbortSignal.timeout on a hanging fetch (TimeoutError) is timeout', async () => {
    const { envelope, log } = await failureOf('fetch-timeout');
    expect(envelope).toEqual({ ...TIMEOUT, message: 'The call was stopped before it finished.' });
    expect(log.fields).toMatchObject({ reason: 'TimeoutError', error: { name: 'TimeoutError' } });
  });

  it('a real AbortError is timeout', async () => {
    const { envelope, log } = await failureOf('abort');
    expect(envelope).toEqual({ ...TIMEOUT, message: 'The call was stopped before it finished.' });
    expect(log.fields).toMatchObject({
      reason: 'AbortError',
      error: { name: 'AbortError', fields: { code: 'ABORT_ERR' } },
    });
  });
});

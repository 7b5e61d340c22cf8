import { promises as fs } from 'node:fs';
import { connect, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { classifyFailure, ToolError } from '../src/index.js';

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function connectError(host: string): Promise<unknown> {
  const port = await closedPort();
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.on('error', resolve);
    socket.on('connect', () => {
      socket.destroy();
      resolve(new Error('connected'));
    });
  });
}

async function rejection(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

// Shaped like node-postgres's DatabaseError (and PGlite's): a message and a SQLSTATE `code`.
function pgError(code: string, message = 'database error'): Error {
  return Object.assign(new Error(message), { code, severity: 'ERROR' });
}

describe('classifyFailure: real Node errors', () => {
  it('a real ECONNREFUSED from a closed loopback port is unavailable (network)', async () => {
    const error = await connectError('127.0.0.1');
    expect(error).toMatchObject({ code: 'ECONNREFUSED' });
    expect(classifyFailure(error)).toEqual({
      code: 'unavailable',
      retryable: true,
      message: 'A service this tool depends on is unavailable.',
      reason: 'ECONNREFUSED',
      source: 'network',
    });
  });

  it('a real fetch to a closed port (TypeError, ECONNREFUSED in its cause) is unavailable', async () => {
    const error = await rejection(async () => fetch(`http://127.0.0.1:${await closedPort()}/`));
    expect(error).toMatchObject({ name: 'TypeError', message: 'fetch failed' });
    expect(classifyFailure(error)).toMatchObject({ code: 'unavailable', reason: 'ECONNREFUSED' });
  });

  it('a connect to localhost (AggregateError over ::1 and 127.0.0.1, or one error) is unavailable', async () => {
    const error = await connectError('localhost');
    expect(classifyFailure(error)).toMatchObject({ code: 'unavailable', reason: 'ECONNREFUSED' });
  });

  it('a real AbortError and a real TimeoutError are timeout (abort)', async () => {
    const abort = await rejection(() => sleep(10_000, undefined, { signal: AbortSignal.abort() }));
    expect(classifyFailure(abort)).toEqual({
      code: 'timeout',
      retryable: true,
      message: 'The call was stopped before it finished.',
      reason: 'AbortError',
      source: 'abort',
    });
    const signal = AbortSignal.timeout(1);
    await new Promise((resolve) => signal.addEventListener('abort', resolve));
    expect(classifyFailure(signal.reason)).toMatchObject({ code: 'timeout', reason: 'TimeoutError' });
  });

  it('a real ENOENT and a plain bug stay unknown (internal)', async () => {
    const enoent = await rejection(() => fs.readFile('/nonexistent/toolgate/x.json'));
    expect(enoent).toMatchObject({ code: 'ENOENT' });
    expect(classifyFailure(enoent)).toBeUndefined();
    expect(
      classifyFailure(new TypeError("Cannot read properties of undefined (reading 'id')")),
    ).toBeUndefined();
    expect(classifyFailure('a string')).toBeUndefined();
    expect(classifyFailure(undefined)).toBeUndefined();
  });
});

describe('classifyFailure: SQLSTATEs (errors shaped like node-postgres DatabaseError)', () => {
  it.each([
    ['08006', 'pg 08006'],
    ['08001', 'pg 08001'],
    ['57P01', 'pg 57P01'],
    ['57P02', 'pg 57P02'],
    ['57P03', 'pg 57P03'],
    ['57P05', 'pg 57P05'],
    ['53300', 'pg 53300'],
    ['53000', 'pg 53000'],
    ['53200', 'pg 53200'],
    ['58000', 'pg 58000'],
    ['58030', 'pg 58030'],
    ['25P03', 'pg 25P03'],
  ])('%s is unavailable and retryable', (code, reason) => {
    expect(classifyFailure(pgError(code))).toEqual({
      code: 'unavailable',
      retryable: true,
      message: 'The database is unavailable.',
      reason,
      source: 'database',
    });
  });

  it('57014 (statement timeout) is timeout with a narrowing hint', () => {
    expect(classifyFailure(pgError('57014', 'canceling statement due to statement timeout'))).toEqual({
      code: 'timeout',
      retryable: true,
      message: 'The database query took too long.',
      hint: 'The query ran past its time limit. Retry once with narrower arguments (a shorter period, a lower limit).',
      reason: 'pg 57014 statement timeout',
      source: 'database',
    });
  });

  it('42501 is permission_denied, not retryable', () => {
    expect(classifyFailure(pgError('42501', 'permission denied for table orders'))).toEqual({
      code: 'permission_denied',
      retryable: false,
      message: 'This operation is not permitted.',
      reason: 'pg 42501 insufficient privilege',
      source: 'database',
    });
  });

  it('28P01/28000 (the server’s own credentials) are unavailable and not retryable', () => {
    for (const code of ['28P01', '28000']) {
      expect(classifyFailure(pgError(code, 'password authentication failed for user "app"'))).toMatchObject({
        code: 'unavailable',
        retryable: false,
        message: 'The database is unavailable.',
        reason: `pg ${code} authentication failed (server credentials)`,
      });
    }
  });

  it('40001 and 40P01 are unavailable, retryable', () => {
    expect(classifyFailure(pgError('40001'))).toMatchObject({
      code: 'unavailable',
      retryable: true,
      reason: 'pg 40001 serialization failure',
    });
    expect(classifyFailure(pgError('40P01'))).toMatchObject({
      code: 'unavailable',
      retryable: true,
      reason: 'pg 40P01 deadlock',
    });
  });

  it('model mistakes and bugs stay unknown: 23505, 42P01, 42601, 22P02', () => {
    for (const code of ['23505', '23502', '42P01', '42601', '22P02', '3D000']) {
      expect(classifyFailure(pgError(code))).toBeUndefined();
    }
  });

  it('pg and PGlite dead-connection messages and sql’s connection mark are unavailable', () => {
    for (const message of [
      'Connection terminated unexpectedly',
      'Client was closed and is not queryable',
      'timeout exceeded when trying to connect',
      'Cannot use a pool after calling end on the pool',
      'PGlite is closed',
    ]) {
      expect(classifyFailure(new Error(message))).toMatchObject({
        code: 'unavailable',
        reason: 'database connection lost',
      });
    }
    const marked = new Error('checkout failed');
    Object.defineProperty(marked, Symbol.for('toolgate.sql.connectionFailure'), { value: true });
    expect(classifyFailure(marked)).toMatchObject({
      code: 'unavailable',
      reason: 'database connection failure',
    });
  });
});

describe('classifyFailure: chains, undici codes and hostile input', () => {
  it('walks cause chains and AggregateError members, outermost known first', () => {
    const wrapped = new Error('query failed', { cause: new Error('socket', { cause: pgError('57P01') }) });
    expect(classifyFailure(wrapped)).toMatchObject({ reason: 'pg 57P01' });
    const aggregate = new AggregateError([
      new Error('x'),
      Object.assign(new Error('y'), { code: 'EHOSTUNREACH' }),
    ]);
    expect(classifyFailure(aggregate)).toMatchObject({ code: 'unavailable', reason: 'EHOSTUNREACH' });
    const outer = Object.assign(new Error('t', { cause: pgError('08006') }), { code: '57014' });
    expect(classifyFailure(outer)).toMatchObject({ code: 'timeout' });
  });

  it('maps undici codes: socket/closed unavailable, timeouts timeout, argument errors unknown', () => {
    const undici = (code: string) => Object.assign(new Error(code), { code });
    expect(classifyFailure(undici('UND_ERR_SOCKET'))).toMatchObject({ code: 'unavailable' });
    expect(classifyFailure(undici('UND_ERR_CLOSED'))).toMatchObject({ code: 'unavailable' });
    expect(classifyFailure(undici('UND_ERR_CONNECT_TIMEOUT'))).toMatchObject({
      code: 'timeout',
      source: 'network',
    });
    expect(classifyFailure(undici('UND_ERR_HEADERS_TIMEOUT'))).toMatchObject({ code: 'timeout' });
    expect(classifyFailure(undici('UND_ERR_ABORTED'))).toMatchObject({ code: 'timeout', source: 'abort' });
    expect(classifyFailure(undici('UND_ERR_INVALID_ARG'))).toBeUndefined();
    expect(classifyFailure(undici('ETIMEDOUT'))).toMatchObject({ code: 'timeout', reason: 'ETIMEDOUT' });
  });

  it('leaves a ToolError to its own code, even with a known cause', () => {
    expect(
      classifyFailure(new ToolError('not_found', 'No order.', { cause: pgError('57P01') })),
    ).toBeUndefined();
  });

  it('survives cycles and throwing getters', () => {
    const a = new Error('a') as Error & { cause?: unknown };
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(classifyFailure(a)).toBeUndefined();
    const hostile = Object.defineProperty(new Error('h'), 'code', {
      get() {
        throw new Error('getter');
      },
    });
    expect(classifyFailure(new Error('outer', { cause: hostile }))).toBeUndefined();
    expect(classifyFailure([hostile, pgError('57P01')])).toBeUndefined();
  });
});

import { describe, expect, it } from 'vitest';
// classifyError is the deprecated wrapper over core's classifyFailure (tested in core); these keep its
// shape for one release.
import { classifyError } from '../src/index.js';

function coded(code: string, message = 'failed', name = 'Error'): Error {
  const error = new Error(message) as Error & { code: string };
  error.code = code;
  error.name = name;
  return error;
}

const DATABASE = { code: 'unavailable', retryable: true, message: 'The database is unavailable.' };
const SERVICE = {
  code: 'unavailable',
  retryable: true,
  message: 'A service this tool depends on is unavailable.',
};
const SERVICE_SLOW = {
  code: 'timeout',
  retryable: true,
  message: 'A service this tool depends on did not answer in time.',
};
const STOPPED = { code: 'timeout', retryable: true, message: 'The call was stopped before it finished.' };

// Constructed errors shaped as node-postgres, Node's net/dns and undici throw them; the real ones
// are in pg.test.ts.
const TABLE: readonly (readonly [string, unknown, Record<string, unknown>])[] = [
  ['pg 08000 connection exception', coded('08000'), { ...DATABASE, reason: 'pg 08000' }],
  ['pg 08001 cannot connect', coded('08001'), { ...DATABASE, reason: 'pg 08001' }],
  ['pg 08003 connection does not exist', coded('08003'), { ...DATABASE, reason: 'pg 08003' }],
  ['pg 08006 connection failure', coded('08006'), { ...DATABASE, reason: 'pg 08006' }],
  ['pg 57P01 admin shutdown', coded('57P01'), { ...DATABASE, reason: 'pg 57P01' }],
  ['pg 57P02 crash shutdown', coded('57P02'), { ...DATABASE, reason: 'pg 57P02' }],
  ['pg 57P03 cannot connect now', coded('57P03'), { ...DATABASE, reason: 'pg 57P03' }],
  ['pg 53300 too many connections', coded('53300'), { ...DATABASE, reason: 'pg 53300' }],
  [
    'pg "Connection terminated unexpectedly"',
    new Error('Connection terminated unexpectedly'),
    { ...DATABASE, reason: 'database connection lost' },
  ],
  ['ECONNREFUSED', coded('ECONNREFUSED'), { ...SERVICE, reason: 'ECONNREFUSED' }],
  ['ENOTFOUND', coded('ENOTFOUND'), { ...SERVICE, reason: 'ENOTFOUND' }],
  ['EAI_AGAIN', coded('EAI_AGAIN'), { ...SERVICE, reason: 'EAI_AGAIN' }],
  ['ECONNRESET', coded('ECONNRESET'), { ...SERVICE, reason: 'ECONNRESET' }],
  ['AbortError', coded('ABORT_ERR', 'aborted', 'AbortError'), { ...STOPPED, reason: 'AbortError' }],
  [
    'TimeoutError',
    new DOMException('signal timed out', 'TimeoutError'),
    { ...STOPPED, reason: 'TimeoutError' },
  ],
  ['ETIMEDOUT', coded('ETIMEDOUT'), { ...SERVICE_SLOW, reason: 'ETIMEDOUT' }],
  [
    'UND_ERR_CONNECT_TIMEOUT',
    coded('UND_ERR_CONNECT_TIMEOUT'),
    { ...SERVICE_SLOW, reason: 'UND_ERR_CONNECT_TIMEOUT' },
  ],
  [
    'UND_ERR_HEADERS_TIMEOUT',
    coded('UND_ERR_HEADERS_TIMEOUT'),
    { ...SERVICE_SLOW, reason: 'UND_ERR_HEADERS_TIMEOUT' },
  ],
  [
    'UND_ERR_BODY_TIMEOUT',
    coded('UND_ERR_BODY_TIMEOUT'),
    { ...SERVICE_SLOW, reason: 'UND_ERR_BODY_TIMEOUT' },
  ],
  [
    'pg 57014 statement timeout',
    coded('57014', 'canceling statement due to statement timeout'),
    {
      code: 'timeout',
      retryable: true,
      message: 'The database query took too long.',
      hint: 'The query ran past its time limit. Retry once with narrower arguments (a shorter period, a lower limit).',
      reason: 'pg 57014 statement timeout',
    },
  ],
  [
    'pg 42501 insufficient privilege',
    coded('42501'),
    {
      code: 'permission_denied',
      retryable: false,
      message: 'This operation is not permitted.',
      reason: 'pg 42501 insufficient privilege',
    },
  ],
  [
    'ECONNREFUSED two causes deep',
    new Error('a', { cause: new Error('b', { cause: coded('ECONNREFUSED') }) }),
    { ...SERVICE, reason: 'ECONNREFUSED' },
  ],
  [
    'ECONNREFUSED inside an AggregateError',
    new AggregateError([new Error('x'), coded('ECONNREFUSED')], 'all failed'),
    { ...SERVICE, reason: 'ECONNREFUSED' },
  ],
];

describe('classifyError: known failures and their codes', () => {
  it.each(TABLE)('%s', (_name, error, expected) => {
    expect(classifyError(error)).toEqual(expected);
  });

  it('the outermost known failure wins over one in its cause', () => {
    const error = new DOMException('aborted', 'AbortError') as DOMException & { cause?: unknown };
    Object.defineProperty(error, 'cause', { value: coded('ECONNREFUSED') });
    expect(classifyError(error)?.code).toBe('timeout');
  });

  it('anything else is unknown (and becomes internal): plain errors, strings, null, other codes', () => {
    expect(classifyError(new TypeError('x is not a function'))).toBeUndefined();
    expect(classifyError('ECONNREFUSED')).toBeUndefined();
    expect(classifyError(null)).toBeUndefined();
    expect(classifyError(coded('23505', 'duplicate key'))).toBeUndefined();
    expect(classifyError(coded('ENOENT'))).toBeUndefined();
  });

  it('a cause chain that loops back on itself ends', () => {
    const a = new Error('a') as Error & { cause?: unknown };
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(classifyError(a)).toBeUndefined();
  });
});

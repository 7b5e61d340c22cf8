/**
 * An error a sink throws to say how the writer must treat it: `permanent: true` drops the batch
 * (counted in `stats().rejected`, logged), `permanent: false` retries it with backoff.
 */
export class AuditSinkError extends Error {
  readonly permanent: boolean;
  constructor(message: string, options: { permanent: boolean; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.name = 'AuditSinkError';
    this.permanent = options.permanent;
  }
}

/**
 * SQLSTATE classes that pass: connection exception (08), insufficient resources (53), operator
 * intervention (57: admin shutdown, statement timeout), transaction rollback (40: serialization,
 * deadlock), system error (58). Every other SQLSTATE (undefined table or column, permission denied,
 * invalid data, ...) fails the same way on every retry.
 */
const TRANSIENT_SQLSTATE_CLASSES = new Set(['08', '53', '57', '40', '58']);
const TRANSIENT_SQLSTATES = new Set(['55P03', '55006']);

/** Node system errors that a retry can outlive: network, a full disk, too many open files. */
const TRANSIENT_NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
  'EAGAIN',
  'EBUSY',
  'EMFILE',
  'ENFILE',
  'ENOSPC',
  'EDQUOT',
]);

/**
 * Whether a sink error will fail the same way on every retry. An `AuditSinkError` (or any error with
 * a boolean `permanent`) says so itself; a PostgreSQL error by its SQLSTATE; a Node system error by
 * its code (EACCES, EROFS, EISDIR, ENOENT, ... are permanent). Anything unknown is treated as
 * transient: retried with backoff while the buffer holds, never silently.
 */
export function isPermanentSinkError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { permanent, code } = error as { permanent?: unknown; code?: unknown };
  if (typeof permanent === 'boolean') return permanent;
  if (typeof code !== 'string') return false;
  if (/^[0-9A-Z]{5}$/.test(code)) {
    return !TRANSIENT_SQLSTATE_CLASSES.has(code.slice(0, 2)) && !TRANSIENT_SQLSTATES.has(code);
  }
  if (/^E[A-Z_]+$/.test(code)) return !TRANSIENT_NODE_CODES.has(code);
  return false;
}

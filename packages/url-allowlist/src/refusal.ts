import { type ErrorCode, ToolError } from '@toolgate/core';

/** Why a URL was refused or could not be fetched: the one word decisions and logs key on. */
export type UrlRefusalReason =
  | 'malformed'
  | 'userinfo'
  | 'scheme'
  | 'host'
  | 'port'
  | 'address'
  | 'metadata'
  | 'unresolvable'
  | 'nonexistent'
  | 'connect'
  | 'timeout'
  | 'redirects'
  | 'request';

const CODE_OF: Readonly<Record<UrlRefusalReason, ErrorCode>> = {
  malformed: 'invalid_argument',
  userinfo: 'invalid_argument',
  scheme: 'permission_denied',
  host: 'permission_denied',
  port: 'permission_denied',
  address: 'permission_denied',
  metadata: 'permission_denied',
  unresolvable: 'unavailable',
  // DNS answered that the name has no addresses: a fact about the name the model chose (an invented
  // subdomain under a `*.` pattern), not the dependency failing, so a circuit breaker must not count it.
  nonexistent: 'not_found',
  connect: 'unavailable',
  timeout: 'timeout',
  redirects: 'unavailable',
  // A method, header or body fetch cannot send: refused before anything is resolved or sent.
  request: 'invalid_argument',
};

export interface UrlRefusalOptions {
  hint?: string;
  /** The refused host as the URL names it (never an address it resolved to). */
  host?: string;
  /** Server-side facts for the log only (resolved addresses, the range that refused them). */
  detail?: Record<string, unknown>;
  cause?: unknown;
  retryable?: boolean;
}

/**
 * A ToolError (so core turns it into the model's fail() result) that also carries the reason and
 * the server-side detail. The message and hint are what the model sees; `detail` is for the log.
 */
export class UrlRefusedError extends ToolError {
  readonly reason: UrlRefusalReason;
  readonly host: string | undefined;
  readonly detail: Readonly<Record<string, unknown>>;

  constructor(reason: UrlRefusalReason, message: string, options: UrlRefusalOptions = {}) {
    super(CODE_OF[reason], message, {
      ...(options.hint !== undefined && { hint: options.hint }),
      ...(options.retryable !== undefined && { retryable: options.retryable }),
      ...(options.cause !== undefined && { cause: options.cause }),
    });
    this.name = 'UrlRefusedError';
    this.reason = reason;
    this.host = options.host;
    this.detail = options.detail ?? {};
  }
}

/** True for a refusal made by this package (same copy). */
export function isUrlRefusedError(value: unknown): value is UrlRefusedError {
  return value instanceof UrlRefusedError;
}

import {
  InsufficientScopeError,
  InvalidTokenError,
  ServerError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';

/** Why a token was refused, for the server log (never more detail than this goes to the client). */
export type InvalidTokenReason =
  | 'malformed'
  | 'algorithm'
  | 'signature'
  | 'unknown_key'
  | 'expired'
  | 'not_yet_valid'
  | 'issuer'
  | 'audience'
  | 'missing_claim'
  | 'claim';

const BRAND = Symbol.for('@toolgate/authz/AccessTokenError');

/** What every verifier error carries; `status` is the HTTP answer (401, 403, or 503 when keys can't be fetched). */
export interface AccessTokenErrorFields {
  readonly kind: 'invalid_token' | 'insufficient_scope' | 'unavailable';
  readonly status: 401 | 403 | 503;
}

/**
 * The token is not acceptable (401, `error="invalid_token"`). Extends the SDK's InvalidTokenError, so
 * `requireBearerAuth` answers it with 401 as it stands.
 */
export class AccessTokenInvalidError extends InvalidTokenError implements AccessTokenErrorFields {
  readonly kind = 'invalid_token' as const;
  readonly status = 401 as const;
  readonly [BRAND] = true;
  constructor(
    message: string,
    /** Which check failed. */
    readonly reason: InvalidTokenReason,
    options?: { cause?: unknown },
  ) {
    super(message);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/** The token is valid but lacks scopes the server requires (403, `error="insufficient_scope"`). */
export class AccessTokenScopeError extends InsufficientScopeError implements AccessTokenErrorFields {
  readonly kind = 'insufficient_scope' as const;
  readonly status = 403 as const;
  readonly [BRAND] = true;
  constructor(
    message: string,
    /** The scopes the request needs (what the `scope` parameter of the challenge names). */
    readonly requiredScopes: readonly string[],
  ) {
    super(message);
  }
}

/**
 * The signing keys could not be fetched (JWKS down, slow or malformed): the server's problem, not the
 * token's, so no 401 that would send the client to re-authenticate in a loop. `requireBearerAuth` answers
 * it (a ServerError) with 500.
 */
export class AccessTokenUnavailableError extends ServerError implements AccessTokenErrorFields {
  readonly kind = 'unavailable' as const;
  readonly status = 503 as const;
  readonly [BRAND] = true;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/** Any error the JWT verifier throws. */
export type AccessTokenError = AccessTokenInvalidError | AccessTokenScopeError | AccessTokenUnavailableError;

/** True for an error of the verifier, also across duplicate copies of this package (`instanceof` is not). */
export function isAccessTokenError(error: unknown): error is AccessTokenError {
  return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[BRAND] === true;
}

import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { MAX_CLAIM_DEPTH, nestedPast } from '@toolgate/core';
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  errors,
  type FetchImplementation,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from 'jose';
import { CLOCK_TOLERANCE, DEFAULT_CLOCK_TOLERANCE_SEC, MAX_CLOCK_TOLERANCE_SEC } from './requirement.js';
import {
  AccessTokenInvalidError,
  AccessTokenScopeError,
  AccessTokenUnavailableError,
  type InvalidTokenReason,
} from './token-errors.js';

export interface JwtVerifierOptions {
  /** Where the authorization server publishes its signing keys (JWKS); https, or http on a loopback host. */
  jwksUrl: string | URL;
  /** The issuer (`iss`) every token must name, exactly. Required. */
  issuer: string;
  /** The server's canonical URL (RFC 8707 resource, e.g. `https://orders.example.com/mcp`): always an accepted audience and the token's `resource`. Required. */
  resource: string;
  /** More accepted audiences (`aud`) beside `resource`. @default [] */
  audiences?: readonly string[];
  /** Accepted signature algorithms (asymmetric only; never `none`). @default ['RS256', 'ES256'] */
  algorithms?: readonly string[];
  /**
   * Allowed clock skew for `exp`, `nbf` and `iat`, in seconds. Noted on each AuthInfo (non-enumerable),
   * so `createAuthz` judges the token's expiry with the same tolerance. @default 5
   */
  clockToleranceSec?: number;
  /** Scopes every token must carry to reach the server at all (403 `insufficient_scope` otherwise). @default [] */
  requiredScopes?: readonly string[];
  /** The `typ` header every token must carry, e.g. `at+jwt` (RFC 9068). @default undefined (not checked) */
  typ?: string;
  /** How long fetched keys are used before the JWKS is fetched again, in ms. @default 600000 */
  jwksCacheMaxAgeMs?: number;
  /** After a fetch, how long an unknown key id waits before it may trigger another fetch, in ms. @default 30000 */
  jwksCooldownMs?: number;
  /** Time limit of one JWKS fetch, in ms. @default 5000 */
  jwksTimeoutMs?: number;
  /** After a failed JWKS fetch, how long requests are answered 503 without fetching again, in ms. @default 5000 */
  jwksFailureCooldownMs?: number;
  /** Longest token accepted, in characters; a longer one is refused before it is parsed. @default 16384 */
  maxTokenLength?: number;
  /** Largest JWKS response accepted, in bytes (after decompression); a larger one is a failed fetch (503). @default 524288 */
  maxJwksBytes?: number;
}

/** Verifies bearer tokens; `verifyAccessToken` makes it the SDK's OAuthTokenVerifier (`requireBearerAuth({ verifier })`). */
export interface JwtVerifier {
  /** The token's AuthInfo, or a thrown AccessTokenError (401 invalid, 403 insufficient scope, 503 keys unavailable). */
  verify(token: string): Promise<AuthInfo>;
  /** The same as `verify`, under the name the SDK's OAuthTokenVerifier interface uses. */
  verifyAccessToken(token: string): Promise<AuthInfo>;
}

const ASYMMETRIC = new Set([
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
]);
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/**
 * A JWT access-token verifier on jose: keys from a JWKS URL (cached), issuer, audience (the server's
 * own URL plus configured ones), explicit algorithms, `exp` required. Claims map onto the SDK's
 * AuthInfo: `scope` (space separated) or `scp` to scopes, `client_id` or `azp` to clientId, `exp` to
 * expiresAt, and every claim (with `sub` and `iss`, which core's caller identity reads) to `extra`.
 */
export function createJwtVerifier(options: JwtVerifierOptions): JwtVerifier {
  const settings = checkOptions(options);
  const outage: Outage = { failure: undefined };
  const keys = withFailureCooldown(
    createRemoteJWKSet(settings.jwksUrl, {
      cacheMaxAge: settings.cacheMaxAge,
      cooldownDuration: settings.cooldown,
      timeoutDuration: settings.timeout,
      [customFetch]: boundedFetch(settings.maxJwksBytes, outage),
    }),
    settings.failureCooldown,
    outage,
  );
  const verifyOptions = {
    issuer: settings.issuer,
    audience: settings.audiences,
    algorithms: settings.algorithms,
    clockTolerance: settings.clockTolerance,
    requiredClaims: ['exp'],
    ...(options.typ === undefined ? {} : { typ: options.typ }),
  };

  const verify = async (token: string): Promise<AuthInfo> => {
    if (typeof token !== 'string' || token === '')
      throw new AccessTokenInvalidError('The token is empty.', 'malformed');
    // Decoding and parsing cost grows with the token, and nothing bounds it before jose does.
    if (token.length > settings.maxTokenLength)
      throw new AccessTokenInvalidError('The token is too large.', 'malformed');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, verifyOptions));
    } catch (error) {
      throw tokenError(error);
    }
    // Signed or not, a claim nested thousands of levels deep (a 16 KB token holds ~5,500) is nothing an
    // authorization server issues, and every reader of the claims would have to guard its recursion.
    if (nestedPast(payload, MAX_CLAIM_DEPTH))
      throw new AccessTokenInvalidError('The token holds a claim nested too deeply.', 'malformed');
    const auth = authInfoOf(token, payload, settings.resource);
    // createAuthz judges expiry with the tolerance the token was accepted with, not a second one.
    Object.defineProperty(auth, CLOCK_TOLERANCE, { value: settings.clockTolerance });
    const missing = settings.requiredScopes.filter((scope) => !auth.scopes.includes(scope));
    if (missing.length > 0) {
      throw new AccessTokenScopeError(
        `The token lacks the scope(s) ${missing.join(' ')}.`,
        settings.requiredScopes,
      );
    }
    return auth;
  };
  return { verify, verifyAccessToken: verify };
}

interface Settings {
  jwksUrl: URL;
  issuer: string;
  resource: string;
  audiences: string[];
  algorithms: string[];
  clockTolerance: number;
  requiredScopes: readonly string[];
  cacheMaxAge: number;
  cooldown: number;
  timeout: number;
  failureCooldown: number;
  maxTokenLength: number;
  maxJwksBytes: number;
}

function checkOptions(options: JwtVerifierOptions): Settings {
  if (typeof options !== 'object' || options === null) throw new TypeError('createJwtVerifier: give options');
  let jwksUrl: URL;
  try {
    jwksUrl = new URL(options.jwksUrl);
  } catch {
    throw new TypeError('createJwtVerifier: jwksUrl must be an absolute URL');
  }
  // Keys fetched in clear text let anyone on the path sign tokens this server accepts.
  if (
    jwksUrl.protocol !== 'https:' &&
    !(jwksUrl.protocol === 'http:' && LOOPBACK_HOSTS.has(jwksUrl.hostname))
  ) {
    throw new TypeError('createJwtVerifier: jwksUrl must use https (http only on a loopback host)');
  }
  if (typeof options.issuer !== 'string' || options.issuer === '') {
    throw new TypeError(
      'createJwtVerifier: issuer is required (the authorization server every token must come from)',
    );
  }
  if (
    typeof options.resource !== 'string' ||
    !URL.canParse(options.resource) ||
    options.resource.includes('#')
  ) {
    throw new TypeError(
      "createJwtVerifier: resource is required: the server's canonical URL (absolute, no fragment), the audience tokens must name",
    );
  }
  const extra = options.audiences ?? [];
  if (!Array.isArray(extra) || extra.some((aud) => typeof aud !== 'string' || aud === '')) {
    throw new TypeError('createJwtVerifier: audiences must be an array of non-empty strings');
  }
  const algorithms = [...(options.algorithms ?? ['RS256', 'ES256'])];
  if (algorithms.length === 0 || algorithms.some((alg) => !ASYMMETRIC.has(alg))) {
    throw new TypeError(
      `createJwtVerifier: algorithms must be a non-empty list of asymmetric algorithms (${[...ASYMMETRIC].join(', ')}); never none`,
    );
  }
  const clockTolerance = options.clockToleranceSec ?? DEFAULT_CLOCK_TOLERANCE_SEC;
  if (!Number.isFinite(clockTolerance) || clockTolerance < 0 || clockTolerance > MAX_CLOCK_TOLERANCE_SEC) {
    throw new RangeError('createJwtVerifier: clockToleranceSec must be between 0 and 300 seconds');
  }
  const requiredScopes = options.requiredScopes ?? [];
  if (
    !Array.isArray(requiredScopes) ||
    requiredScopes.some((scope) => typeof scope !== 'string' || !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(scope))
  ) {
    throw new TypeError('createJwtVerifier: requiredScopes must be an array of scope strings');
  }
  const ms = (value: number | undefined, fallback: number, name: string): number => {
    const out = value ?? fallback;
    if (!Number.isInteger(out) || out < 0)
      throw new RangeError(`createJwtVerifier: ${name} must be a non-negative integer (ms)`);
    return out;
  };
  return {
    jwksUrl,
    issuer: options.issuer,
    resource: options.resource,
    audiences: [options.resource, ...extra.filter((aud) => aud !== options.resource)],
    algorithms,
    clockTolerance,
    requiredScopes: Object.freeze([...requiredScopes]),
    cacheMaxAge: ms(options.jwksCacheMaxAgeMs, 600_000, 'jwksCacheMaxAgeMs'),
    cooldown: ms(options.jwksCooldownMs, 30_000, 'jwksCooldownMs'),
    timeout: ms(options.jwksTimeoutMs, 5_000, 'jwksTimeoutMs'),
    failureCooldown: ms(options.jwksFailureCooldownMs, 5_000, 'jwksFailureCooldownMs'),
    maxTokenLength: checkMaxTokenLength(options.maxTokenLength),
    maxJwksBytes: checkMaxJwksBytes(options.maxJwksBytes),
  };
}

// 16 KiB is Node's default limit for all of a request's headers: no token that fits through a default
// node:http server is refused.
function checkMaxTokenLength(value: number | undefined): number {
  const out = value ?? 16_384;
  if (!Number.isInteger(out) || out < 1)
    throw new RangeError('createJwtVerifier: maxTokenLength must be a positive integer (characters)');
  return out;
}

// A JWKS is a few KiB (one with certificate chains, some tens); 512 KiB leaves room for any real one.
function checkMaxJwksBytes(value: number | undefined): number {
  const out = value ?? 524_288;
  if (!Number.isInteger(out) || out < 1)
    throw new RangeError('createJwtVerifier: maxJwksBytes must be a positive integer (bytes)');
  return out;
}

/** The last failed JWKS fetch, written only where a fetch fails (see `boundedFetch`). */
interface Outage {
  failure: { readonly at: number; readonly error: unknown; held?: JWTVerifyGetKey | null } | undefined;
}

/**
 * jose's fetch of the JWKS, reading at most `maxBytes` of the body: jose reads whatever arrives before
 * its timeout, and a key server (or whatever answers for it) that streams without end would fill the
 * heap on every refetch. The limit counts decoded bytes, so a compressed answer cannot get past it.
 *
 * It is also the one place a failed fetch is recorded in `outage` (no answer, a status other than 200,
 * too large, not a key set jose would take): only a fetch, never a token, starts the failure cooldown.
 * A token picks which published key jose imports before its signature is checked, so an unsigned token
 * naming a key the set holds but cannot import would otherwise stop every refetch, for good if sent
 * once per cooldown (no rotation picked up, then every caller 503 once the held keys age out).
 */
function boundedFetch(maxBytes: number, outage: Outage): FetchImplementation {
  const tooLarge = (): Error =>
    new Error(`The JWKS response is larger than maxJwksBytes (${maxBytes} bytes).`);
  const failed = (error: unknown): void => {
    outage.failure = { at: Date.now(), error };
  };
  return async (url, init) => {
    try {
      const response = await fetch(url, init);
      const body = response.body;
      // jose refuses any other status itself; its body is not read.
      if (response.status !== 200 || body === null) {
        await body?.cancel().catch(() => undefined);
        failed(
          new Error(`The JWKS answered HTTP ${response.status}${body === null ? ' without a body' : ''}.`),
        );
        return response;
      }
      if (Number(response.headers.get('content-length')) > maxBytes) {
        await body.cancel().catch(() => undefined);
        throw tooLarge();
      }
      const reader = body.getReader();
      const chunks: Uint8Array[] = [];
      let size = 0;
      for (;;) {
        // Rejects when init.signal (jose's timeout) fires.
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBytes) {
          await reader.cancel().catch(() => undefined);
          throw tooLarge();
        }
        chunks.push(value);
      }
      const bytes = Buffer.concat(chunks);
      // jose parses and checks the set after this returns; the same checks here make a set it will
      // refuse a failed fetch (jose then throws its own error for it).
      const refusal = keySetRefusal(bytes);
      if (refusal !== undefined) failed(refusal);
      return new Response(bytes, { status: 200 });
    } catch (error) {
      failed(error);
      throw error;
    }
  };
}

// What jose does with a fetched body (Response.json(): UTF-8, BOM dropped; then createLocalJWKSet, which
// checks the set's shape but imports no key); undefined when it would take it.
function keySetRefusal(bytes: Uint8Array): unknown {
  try {
    createLocalJWKSet(JSON.parse(new TextDecoder().decode(bytes)));
    return undefined;
  } catch (error) {
    return error;
  }
}

/**
 * The remote key set, fetching at most once per `cooldownMs` after a failed fetch: during an outage the
 * authorization server gets one fetch per cooldown, not one per request. Keys already held (and still
 * within `jwksCacheMaxAgeMs`) keep verifying their tokens meanwhile: a token naming an unknown key,
 * which makes jose fetch, must not lock every caller out.
 */
function withFailureCooldown(
  keys: ReturnType<typeof createRemoteJWKSet>,
  cooldownMs: number,
  outage: Outage,
): JWTVerifyGetKey {
  // `held`: the key set the failed fetch left, built once per failure (no fetch is made during its
  // cooldown, so the set cannot change); jose hands out a fresh copy on every `jwks()`, and building a
  // set per request would clone the JWKS and import its key again on every call of an outage.
  const heldKeys = (current: NonNullable<Outage['failure']>): JWTVerifyGetKey | undefined => {
    if (!keys.fresh) return undefined;
    if (current.held === undefined) {
      const set = keys.jwks();
      current.held = set === undefined ? null : createLocalJWKSet(set);
    }
    return current.held ?? undefined;
  };
  return async (header, token) => {
    const failure = outage.failure;
    if (failure !== undefined && Date.now() - failure.at < cooldownMs) {
      const local = heldKeys(failure);
      if (local !== undefined) {
        try {
          return await local(header, token);
        } catch (error) {
          // Another fault of the token is its own answer; a key not held waits for the next fetch.
          if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
        }
      }
      throw new Error('JWKS not fetched: the previous fetch failed within jwksFailureCooldownMs', {
        cause: failure.error,
      });
    }
    // A failed fetch inside records itself (boundedFetch); any other error is this token's alone.
    return keys(header, token);
  };
}

function authInfoOf(token: string, payload: JWTPayload, resource: string): AuthInfo {
  const auth: AuthInfo = {
    token,
    clientId: stringClaim(payload.client_id) ?? stringClaim(payload.azp) ?? '',
    scopes: scopesOf(payload),
    expiresAt: payload.exp as number,
    extra: { ...payload },
  };
  const aud = payload.aud;
  if (aud === resource || (Array.isArray(aud) && aud.includes(resource))) auth.resource = new URL(resource);
  return auth;
}

function stringClaim(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

// `scope` is RFC 8693/9068's space-separated string; `scp` is the array (or string) some issuers use.
function scopesOf(payload: JWTPayload): string[] {
  const raw = typeof payload.scope === 'string' ? payload.scope : payload.scp;
  if (typeof raw === 'string') return raw.split(' ').filter((scope) => scope !== '');
  if (Array.isArray(raw))
    return raw.filter((scope): scope is string => typeof scope === 'string' && scope !== '');
  return [];
}

/** jose's error, as the 401 (the token's fault) or 503 (the keys could not be had) it stands for. */
function tokenError(error: unknown): Error {
  return (
    invalidTokenOf(error) ??
    new AccessTokenUnavailableError('The signing keys could not be fetched.', { cause: error })
  );
}

/** The 401 for a fault of the token itself; undefined for anything else (fetch, timeout, a bad JWKS). */
function invalidTokenOf(error: unknown): AccessTokenInvalidError | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  const invalid = (message: string, reason: InvalidTokenReason): AccessTokenInvalidError =>
    new AccessTokenInvalidError(message, reason, { cause: error });
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return invalid('The token has expired.', 'expired');
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED': {
      const { claim, reason } = error as { claim?: string; reason?: string };
      // No `"` in these: the SDK's requireBearerAuth writes the message unescaped into a quoted-string.
      if (reason === 'missing')
        return invalid(`The token lacks the required ${claim} claim.`, 'missing_claim');
      if (claim === 'iss') return invalid('The token comes from another issuer.', 'issuer');
      if (claim === 'aud') return invalid('The token was issued for another resource.', 'audience');
      if (claim === 'nbf' || claim === 'iat') return invalid('The token is not valid yet.', 'not_yet_valid');
      return invalid(`The token's ${claim} claim is not acceptable.`, 'claim');
    }
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return invalid('The token is signed with an algorithm this server does not accept.', 'algorithm');
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return invalid('The token signature is invalid.', 'signature');
    case 'ERR_JWKS_NO_MATCHING_KEY':
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return invalid('The token is signed with a key the issuer does not publish.', 'unknown_key');
    case 'ERR_JWS_INVALID':
    case 'ERR_JWT_INVALID':
    // A `crit` extension jose does not implement (an algorithm off the list fails earlier, as not allowed).
    case 'ERR_JOSE_NOT_SUPPORTED':
      return invalid('The token is not a well-formed JWT.', 'malformed');
    default:
      return undefined;
  }
}

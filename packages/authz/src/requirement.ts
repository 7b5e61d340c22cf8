import type { AccessRequest, ToolRequirement } from './types.js';

/** The outcome of one requirement check. `missingScopes` is what a step-up would have to add. */
export type Verdict =
  | { readonly allow: true; readonly reason: string }
  | { readonly allow: false; readonly reason: string; readonly missingScopes: readonly string[] };

/** A requirement normalised once at creation: frozen arrays, entries as a list. */
export interface CheckedRequirement {
  readonly scopes: readonly string[];
  readonly anyOf: readonly (readonly string[])[];
  readonly claims: readonly (readonly [string, (value: unknown) => boolean])[];
  readonly check: ((access: AccessRequest) => boolean) | undefined;
}

const REQUIREMENT_KEYS = new Set(['scopes', 'anyOf', 'claims', 'check']);
const NO_SCOPES: readonly string[] = Object.freeze([]);
const MET: Verdict = Object.freeze({ allow: true, reason: 'requirement met' });
/** The verdict on a token whose `expiresAt` has passed (past the clock tolerance): one object, compared by identity. */
export const EXPIRED: Verdict = Object.freeze({
  allow: false,
  reason: 'token expired',
  missingScopes: NO_SCOPES,
});
/** The JWT verifier's default clock tolerance, and authz's: a token the verifier has just accepted is not refused here. */
export const DEFAULT_CLOCK_TOLERANCE_SEC = 5;
/**
 * Where `createJwtVerifier` notes, on each AuthInfo it returns, the clock tolerance it accepted the token
 * with (a non-enumerable property: not a claim, not copied, not serialised). `Symbol.for`, so a verifier
 * from another copy of this package is read too.
 */
export const CLOCK_TOLERANCE = Symbol.for('@toolgate/authz/clockToleranceSec');
/** The largest clock tolerance either side takes, in seconds. */
export const MAX_CLOCK_TOLERANCE_SEC = 300;

/** Validates a requirement where it is configured, so a typo fails at startup, not as an open door. */
export function checkRequirement(value: unknown, where: string): CheckedRequirement {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`${where}: require must be an object ({} lets every caller through)`);
  }
  const unknown = Object.keys(value).filter((key) => !REQUIREMENT_KEYS.has(key));
  if (unknown.length > 0) {
    throw new TypeError(
      `${where}: require has unknown key(s) ${unknown.join(', ')}; use scopes, anyOf, claims, check`,
    );
  }
  const requirement = value as ToolRequirement;
  const scopes = scopeList(requirement.scopes ?? [], `${where}: require.scopes`);
  if (!Array.isArray(requirement.anyOf ?? []))
    throw new TypeError(`${where}: require.anyOf must be an array of scope arrays`);
  const anyOf = (requirement.anyOf ?? []).map((set, index) => {
    const list = scopeList(set, `${where}: require.anyOf[${index}]`);
    if (list.length === 0)
      throw new TypeError(`${where}: require.anyOf[${index}] is empty (it would let every caller through)`);
    return list;
  });
  const claimsObject = requirement.claims ?? {};
  if (typeof claimsObject !== 'object' || claimsObject === null) {
    throw new TypeError(`${where}: require.claims must be an object of predicates`);
  }
  const claims = Object.entries(claimsObject).map(([claim, predicate]) => {
    if (typeof predicate !== 'function')
      throw new TypeError(`${where}: require.claims.${claim} must be a function`);
    return Object.freeze([claim, predicate] as const);
  });
  if (requirement.check !== undefined && typeof requirement.check !== 'function') {
    throw new TypeError(`${where}: require.check must be a function`);
  }
  return Object.freeze({
    scopes,
    anyOf: Object.freeze(anyOf),
    claims: Object.freeze(claims),
    check: requirement.check,
  });
}

function scopeList(value: unknown, where: string): readonly string[] {
  if (
    !Array.isArray(value) ||
    value.some((scope) => typeof scope !== 'string' || !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(scope))
  ) {
    // RFC 6749 scope-token characters: what a token can carry and a WWW-Authenticate header can quote.
    throw new TypeError(`${where} must be an array of scope strings (RFC 6749 scope-token characters)`);
  }
  return Object.freeze([...value]);
}

/**
 * Checks a requirement against a caller's token (expiry, scopes, then anyOf, then claims, then check;
 * the first failure decides). A caller without a token has no scopes and no claims; an expired token
 * passes no requirement, not even `{}` (`EXPIRED`). `toleranceSec` is the clock tolerance on `expiresAt`
 * for a token without the verifier's own (`CLOCK_TOLERANCE`); null skips the expiry check (what the
 * token's rights alone allow). Runs twice per call (canSee, then the middleware), so the allowed path
 * allocates nothing.
 */
export function evaluate(
  requirement: CheckedRequirement,
  tool: AccessRequest['tool'],
  caller: AccessRequest['caller'],
  request: AccessRequest['request'],
  toleranceSec: number | null = DEFAULT_CLOCK_TOLERANCE_SEC,
): Verdict {
  const auth = request.authInfo;
  // Nothing in the SDK's transports or core checks expiry after the verifier; a verifier that skips it
  // or caches its answers would otherwise keep a dead token's rights alive.
  if (auth != null && toleranceSec !== null && isExpired(auth, toleranceSec)) return EXPIRED;
  // Only an array counts: a raw `scope` string from another verifier would match by substring
  // (`orders:readonly` would hold `orders:read`).
  const held = Array.isArray(auth?.scopes) ? auth.scopes : NO_SCOPES;
  let missing: string[] | undefined;
  for (const scope of requirement.scopes) {
    if (held.includes(scope)) continue;
    missing ??= [];
    missing.push(scope);
  }
  if (requirement.anyOf.length > 0 && !holdsOneSet(held, requirement.anyOf)) {
    missing ??= [];
    for (const scope of closestSet(requirement.anyOf, held))
      if (!missing.includes(scope)) missing.push(scope);
  }
  if (missing !== undefined) {
    return { allow: false, reason: `missing scope(s): ${missing.join(' ')}`, missingScopes: missing };
  }
  if (requirement.claims.length > 0) {
    const claims = auth?.extra;
    for (const [claim, predicate] of requirement.claims) {
      if (!passes(predicate, ownClaim(claims, claim))) {
        return { allow: false, reason: `claim ${claim} refused`, missingScopes: NO_SCOPES };
      }
    }
  }
  if (requirement.check !== undefined && !passes(requirement.check, { tool, caller, auth, request })) {
    return { allow: false, reason: 'check refused', missingScopes: NO_SCOPES };
  }
  return MET;
}

// `expiresAt` is in seconds; absent (or null) means the token does not expire (static tokens). Present
// but not a number (NaN, a string) fails closed. The tolerance is read only for a token past its
// `expiresAt`: a live token's check is one comparison.
function isExpired(auth: NonNullable<AccessRequest['auth']>, toleranceSec: number): boolean {
  const expiresAt: unknown = auth.expiresAt;
  if (expiresAt == null) return false;
  if (typeof expiresAt !== 'number') return true;
  const now = Date.now() / 1000;
  if (expiresAt >= now) return false;
  return !(expiresAt + toleranceOf(auth, toleranceSec) >= now);
}

/** The verifier's tolerance noted on the token (`CLOCK_TOLERANCE`), else `fallback`. */
function toleranceOf(auth: object, fallback: number): number {
  const noted = (auth as Record<symbol, unknown>)[CLOCK_TOLERANCE];
  return typeof noted === 'number' && noted >= 0 && noted <= MAX_CLOCK_TOLERANCE_SEC ? noted : fallback;
}

// Own claims only: a token without a `constructor` claim must read undefined, not Object's.
function ownClaim(claims: Record<string, unknown> | undefined, name: string): unknown {
  return claims !== undefined && claims !== null && Object.hasOwn(claims, name) ? claims[name] : undefined;
}

function holdsOneSet(held: readonly string[], sets: readonly (readonly string[])[]): boolean {
  outer: for (const set of sets) {
    for (const scope of set) if (!held.includes(scope)) continue outer;
    return true;
  }
  return false;
}

// The alternative with the fewest scopes still missing (the first on a tie); only asked when none is met.
function closestSet(sets: readonly (readonly string[])[], held: readonly string[]): readonly string[] {
  let best: string[] | undefined;
  for (const set of sets) {
    const missing = set.filter((scope) => !held.includes(scope));
    if (best === undefined || missing.length < best.length) best = missing;
  }
  return best ?? NO_SCOPES;
}

// A predicate that throws or returns anything but `true` denies: authorization fails closed.
function passes<T>(predicate: (value: T) => unknown, value: T): boolean {
  try {
    return predicate(value) === true;
  } catch {
    return false;
  }
}

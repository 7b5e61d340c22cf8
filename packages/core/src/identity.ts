import { hash } from 'node:crypto';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { canonicalJson } from './canonical-json.js';
import type { ToolRequest } from './types.js';

/** Who is calling, as core derives it once per call from what the transport verified. */
export interface CallerIdentity {
  /**
   * The stable key every per-caller key starts with: `sub:<issuer>|<subject>` (`%` and `|` of the issuer
   * percent-encoded; `sub:<issuer>%T<tenant>|<subject>` when the token names a tenant, see
   * `TENANT_CLAIMS`), `client:<clientId>#<digest>`,
   * `local` (a local transport: stdio, in-memory), `session:<id>` or `anonymous` (any other transport
   * without auth).
   */
  readonly id: string;
  readonly kind: 'subject' | 'client' | 'local' | 'session' | 'anonymous';
  /** The token's subject, when it has one. */
  readonly subject?: string;
  /** The token's issuer, when known. */
  readonly issuer?: string;
  /** The OAuth client id, when the transport verified a token. */
  readonly clientId?: string;
}

/** Replaces core's rule; must return the same id for the same person and distinct ids for distinct ones. */
export type IdentifyCaller = (request: ToolRequest) => CallerIdentity;

// Claims that change on every token refresh or carry a nonce: never part of who someone is.
const VOLATILE_CLAIMS = new Set(['exp', 'iat', 'nbf', 'jti', 'auth_time', 'nonce', 'at_hash', 'c_hash']);

// Claims that single out the person who holds a token when they hold a string or a number that names
// someone (`namesSomeone`: a user's own id, login or mailbox). Without a subject, only these make a
// token's claims name someone: every other claim may be shared by many holders (`groups`, `roles`,
// `scope`, `aud`, `azp`, `tenant`, `tid`, `email_verified`, `plan`, ...), and two holders of one public client's tokens whose
// claims are all shared would otherwise be one caller (one cached answer, one idempotency replay, one
// rate-limit count). `sub` is here for a number (a string `sub` is the subject itself).
const PERSON_CLAIMS = new Set([
  'sub',
  'oid',
  'uid',
  'user_id',
  'userId',
  'username',
  'preferred_username',
  'email',
  'upn',
  'unique_name',
  'login',
]);

// Claims that name the organisation a token acts for, where one person (one issuer and subject) may
// hold tokens for several: Auth0 Organizations (`org_id`, `org_name`), Microsoft Entra (`tid`), and the
// common spellings of a tenant claim. The same person acting for two organisations is two callers: a
// tool that reads the organisation from the token (rather than binding it) must never be answered from
// the other organisation's cached result, idempotency record or rate budget.
export const TENANT_CLAIMS: readonly string[] = Object.freeze([
  'org_id',
  'org_name',
  'org_slug',
  'organization',
  'organization_id',
  'org',
  'tid',
  'tenant',
  'tenant_id',
  'tenantId',
  'tenant_name',
]);

const TENANT_CLAIM_SET: ReadonlySet<string> = new Set(TENANT_CLAIMS);

/**
 * Whether a claim names the tenant: one of TENANT_CLAIMS, or a namespaced custom claim whose last
 * segment is one (`https://app.example/org_id`, `urn:app:tenant`: Auth0 and others namespace the claims
 * an app adds).
 */
function isTenantClaim(claim: string): boolean {
  if (TENANT_CLAIM_SET.has(claim)) return true;
  const cut = Math.max(claim.lastIndexOf('/'), claim.lastIndexOf(':'));
  return cut >= 0 && cut < claim.length - 1 && TENANT_CLAIM_SET.has(claim.slice(cut + 1));
}

/** Past this many characters a tenant part is written as its SHA-256 (a claim may hold a long list). */
const MAX_TENANT_PART = 256;

/**
 * Marks where a subject id's tenant part starts: an issuer part never holds `%T` (its `%` is always
 * written `%25`), and the tenant part's own `%` and `|` are percent-encoded like the issuer's.
 */
const TENANT_MARK = '%T';

const LOCAL: CallerIdentity = Object.freeze({ id: 'local', kind: 'local' });
const ANONYMOUS: CallerIdentity = Object.freeze({ id: 'anonymous', kind: 'anonymous' });

/**
 * Core's identity rule. With a verified token: issuer + subject when there is a subject that names
 * someone (stable across refreshes), plus the token's tenant claims when it has any (`TENANT_CLAIMS`); otherwise the client id plus a digest of the token's stable claims,
 * scopes and resource, so two tokens that differ in a meaningful claim never share an identity, and of
 * the token itself unless a person claim (`PERSON_CLAIMS`) singles out who holds it. A claim nested
 * past 32 levels of arrays and objects is not digested (it is written as a mark) and the token itself
 * then joins the digest, also beside a person claim; an issuer so nested makes the token a `client:`
 * caller, never a `sub:` one. Such a token is thus its own caller, and deriving its identity never
 * overflows the stack (authz's verifier refuses such tokens outright). Without auth: `local` over a local transport (`request.local`: stdio,
 * in-memory, or one the app declared local), else the transport's session id, else `anonymous`.
 */
export function identifyCaller(request: ToolRequest): CallerIdentity {
  const auth = request.authInfo;
  if (auth) return identifyToken(auth);
  // Positive knowledge only: a request without HTTP headers may come from any transport that does not
  // fill them (WebSocket, a queue, an adapter), and `local` is allowed every tool by authz by default.
  if (request.local === true) return LOCAL;
  if (request.sessionId) return Object.freeze({ id: `session:${request.sessionId}`, kind: 'session' });
  return ANONYMOUS;
}

// A verified token's identity, per AuthInfo object: a client that keeps its token (in process, or a
// verifier that caches its answers) is not digested again on every call (canonical JSON + SHA-256 were
// ~3% of a full-stack call's CPU). Keyed by the object, so nothing outlives the token's verification.
const identities = new WeakMap<AuthInfo, CallerIdentity>();

function identifyToken(auth: AuthInfo): CallerIdentity {
  let identity = identities.get(auth);
  if (identity === undefined) {
    identity = deriveIdentity(auth);
    identities.set(auth, identity);
  }
  return identity;
}

function deriveIdentity(auth: AuthInfo): CallerIdentity {
  const extra = auth.extra ?? {};
  // Own claims only: a verifier that copied a token's claims with Object.assign has given a
  // `__proto__` claim the object's prototype, and `sub` or `iss` read through it would be the token's
  // invented identity.
  const iss = ownClaim(extra, 'iss');
  // A claim nested past MAX_CLAIM_DEPTH (a signed token can hold thousands of levels) is never written
  // out: canonical JSON would overflow the stack, and every call of the token would answer `internal`.
  const issTooDeep = typeof iss === 'object' && iss !== null && nestedPast(iss, MAX_CLAIM_DEPTH);
  const subject = issTooDeep ? undefined : subjectOf(extra);
  // An issuer that is not a string (an array, a number) is written as its canonical JSON: dropped, it
  // would make `alice` at `["https://a"]` the same caller as `alice` at no issuer.
  const issuer =
    typeof iss === 'string'
      ? iss === ''
        ? undefined
        : iss
      : iss == null || issTooDeep
        ? undefined
        : canonicalJson(iss);
  const clientId = auth.clientId || undefined;
  const tenant = subject === undefined ? undefined : tenantOf(extra);
  if (subject !== undefined && tenant !== TOO_DEEP) {
    return Object.freeze({
      id: `sub:${iss != null && typeof iss !== 'string' ? NOT_STRING_ISSUER : ''}${issuerPart(issuer)}${tenant === undefined ? '' : `${TENANT_MARK}${escapePart(tenant)}`}|${subject}`,
      kind: 'subject',
      subject,
      ...(issuer === undefined ? {} : { issuer }),
      ...(clientId === undefined ? {} : { clientId }),
    });
  }
  // No prototype: a claim named `__proto__` (an own key of parsed JSON) is kept as a claim, where an
  // assignment to a plain object would set its prototype and leave the claim out of the digest.
  const stable: Record<string, unknown> = Object.create(null);
  let person = false;
  let tooDeep = issTooDeep;
  for (const [claim, value] of Object.entries(extra)) {
    if (VOLATILE_CLAIMS.has(claim)) continue;
    if (typeof value === 'object' && value !== null && nestedPast(value, MAX_CLAIM_DEPTH)) {
      // Not digested: written as a mark, and the token itself joins the digest (below), so two tokens
      // that differ only deep inside such a claim are never one caller.
      stable[claim] = TOO_DEEP;
      tooDeep = true;
      continue;
    }
    stable[claim] = value;
    if (PERSON_CLAIMS.has(claim) && namesSomeone(value)) person = true;
  }
  // Nothing verified singles out who holds the token (no subject, no person claim: a verifier that
  // reports only the client id and scopes, or claims every holder may share): the token is then the
  // only thing that tells two people apart, so it joins the digest. Tokens with a person claim keep
  // the ids they always had (stable across refreshes).
  const digest = hash(
    'sha256',
    canonicalJson({
      claims: stable,
      scopes: [...(auth.scopes ?? [])].sort(),
      resource: auth.resource?.href,
      token: person && !tooDeep ? undefined : auth.token,
    }),
    'base64url',
  ).slice(0, 22);
  return Object.freeze({
    id: `client:${clientId ?? ''}#${digest}`,
    kind: 'client',
    ...(issuer === undefined ? {} : { issuer }),
    ...(clientId === undefined ? {} : { clientId }),
  });
}

/**
 * How deeply a token's claims may nest arrays and objects: a claim's value nested deeper is not digested
 * here, and authz's verifier refuses such a token (a real token's claims nest two or three levels:
 * `realm_access.roles`, RFC 9396's `authorization_details`).
 */
export const MAX_CLAIM_DEPTH = 32;

/** What stands in the digest for a claim nested past MAX_CLAIM_DEPTH. */
const TOO_DEEP = '[nested too deeply]';

/**
 * Whether a value nests arrays or objects more than `levels` deep (the value itself is the first level).
 * Reads at most `levels` levels down, so it cannot overflow the stack; a cycle counts as too deep. A
 * getter or proxy trap that throws counts as too deep too: what cannot be read is not digested.
 */
export function nestedPast(value: object, levels: number): boolean {
  if (levels <= 0) return true;
  try {
    const items = Array.isArray(value) ? value : Object.values(value);
    for (const item of items) {
      if (typeof item === 'object' && item !== null && nestedPast(item, levels - 1)) return true;
    }
    return false;
  } catch {
    return true;
  }
}

/**
 * Marks an issuer part written from a claim that is not a string (its canonical JSON): a string
 * issuer's part never holds `%J` (its `%` is always written `%25`), so `["https://a"]` the array and
 * `'["https://a"]'` the string are two issuers.
 */
const NOT_STRING_ISSUER = '%J';

/**
 * The token's subject: its own `sub` claim when that is a string naming someone (see `namesSomeone`),
 * else undefined. Core's identity rule and `principalOf` both read the subject here.
 */
export function subjectOf(extra: Readonly<Record<string, unknown>> | undefined): string | undefined {
  if (extra === undefined) return undefined;
  const sub = ownClaim(extra, 'sub');
  return typeof sub === 'string' && namesSomeone(sub) ? sub : undefined;
}

// What a verifier writes for a missing value when it stringifies an absent claim, so every such token
// carries the same text: JavaScript (`String(undefined)`, `${claims.sub}`, `String(null)`, an object's
// or a missing value's `toString`), Python and Rust (`None`), Go (`<nil>`, and `%!s(<nil>)` from a
// format verb), Ruby (`nil`), SQL and Java (`NULL`, `null`), and `0`, what `Number(null)`, `Number('')`
// and `Number(false)` give an absent numeric id. Compared trimmed and in lower case. A real account
// named `nil` or `0` is not told apart from no account by these claims: its tokens then each count as
// their own caller (the token joins the digest), never as one caller with someone else.
const ABSENT_WORDS = new Set([
  'undefined',
  'null',
  'nan',
  '[object object]',
  '[object undefined]',
  '[object null]',
  'none',
  'nil',
  '<nil>',
  '0',
]);

/**
 * Whether a claim's value can single out one holder: a finite number other than 0, or a string with a
 * letter or a digit that is not a word for a missing value (`ABSENT_WORDS`). Blank strings (`' '`,
 * `'\u200b'`, `'-'`), `0`, booleans, arrays, objects and null name no one.
 */
function namesSomeone(value: unknown): boolean {
  if (typeof value === 'number') return Number.isFinite(value) && value !== 0;
  if (typeof value !== 'string' || !/[\p{L}\p{N}]/u.test(value)) return false;
  const word = value.trim().toLowerCase();
  return !ABSENT_WORDS.has(word) && !/^%!\p{L}\(<nil>\)$/u.test(word);
}

/** A claim the token itself holds, never one inherited through the claims object's prototype. */
export function ownClaim(extra: Readonly<Record<string, unknown>>, name: string): unknown {
  return Object.hasOwn(extra, name) ? extra[name] : undefined;
}

/**
 * The issuer as it stands before the `|` of a subject id: `%` and `|` percent-encoded, so the first `|`
 * always ends the issuer (`https://a` + `b|c` and `https://a|b` + `c` are two callers). An issuer
 * without either character (nearly all) reads as it always did, so stored keys stay valid.
 */
function issuerPart(issuer: string | undefined): string {
  if (issuer === undefined) return '';
  return escapePart(issuer);
}

function escapePart(text: string): string {
  return /[%|]/.test(text) ? text.replaceAll('%', '%25').replaceAll('|', '%7C') : text;
}

/**
 * The token's tenant claims (`TENANT_CLAIMS`, own claims that are not null) as canonical JSON, or
 * undefined when it holds none (the subject id then reads as it always did), or TOO_DEEP when one is
 * nested past MAX_CLAIM_DEPTH (the token is then a `client:` caller, its token in the digest).
 */
function tenantOf(extra: Readonly<Record<string, unknown>>): string | undefined {
  let tenant: Record<string, unknown> | undefined;
  for (const claim of Object.keys(extra)) {
    if (!isTenantClaim(claim)) continue;
    const value = extra[claim];
    if (value == null) continue;
    if (typeof value === 'object' && nestedPast(value, MAX_CLAIM_DEPTH)) return TOO_DEEP;
    tenant ??= Object.create(null) as Record<string, unknown>;
    tenant[claim] = value;
  }
  if (tenant === undefined) return undefined;
  const json = canonicalJson(tenant);
  // The id starts every per-caller key and audit row: a long tenant part is written as its digest.
  return json.length <= MAX_TENANT_PART ? json : `#${hash('sha256', json, 'base64url')}`;
}

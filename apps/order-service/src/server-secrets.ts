import { REDACTED, type SecretPattern } from '@toolgate/core';

// The service's own secrets, known from its configuration: no tool's answer may carry one, whatever
// the text that carries it looks like (a carrier echoing the URL it was asked for, `?key=…` included,
// passes core's generic patterns). Built once at start; one regular expression over every value.

/** Shorter values are never looked for: they would match ordinary words and numbers in any text. */
export const MIN_SECRET_LENGTH = 6;

// Query parameters that carry an option, not a credential: their values are words, dates or versions
// that ordinary text holds too (`?format=json`, `?version=2024-01-01`), so they are looked for only
// when they look like a credential themselves.
const OPTION_NAMES = new Set([
  'format',
  'lang',
  'language',
  'locale',
  'version',
  'v',
  'api-version',
  'apiversion',
  'units',
  'country',
  'region',
  'type',
  'mode',
  'output',
  'fields',
  'sort',
  'page',
  'limit',
]);

/**
 * A credential's shape: at least 12 characters holding a letter and a digit (`CK1_Zq9xYabc…`,
 * `7f3a…` hex), or at least 32 characters of any kind. Path segments and option values such as `v1`,
 * `track`, `api`, `2024-01-01` or `shipments` never have it.
 */
export function credentialLike(value: string): boolean {
  if (value.length >= 32) return true;
  return value.length >= 12 && /[A-Za-z]/.test(value) && /\d/.test(value);
}

/**
 * The secret parts of a configured URL: the userinfo password (and a user name shaped like a
 * credential, as APIs that take the key as the user name want it), every query value except those of
 * the option names above that do not look like a credential, and every path segment shaped like a
 * credential (`/k/<key>/track`). Unparsable text is taken whole when it looks like a credential.
 */
export function urlSecrets(text: string | undefined): string[] {
  if (!text) return [];
  if (!URL.canParse(text)) return credentialLike(text) ? [text] : [];
  const url = new URL(text);
  const found: string[] = [];
  const decoded = (part: string): string => {
    try {
      return decodeURIComponent(part);
    } catch {
      return part;
    }
  };
  if (url.password) found.push(decoded(url.password));
  if (url.username && credentialLike(decoded(url.username))) found.push(decoded(url.username));
  for (const [name, value] of url.searchParams) {
    if (!OPTION_NAMES.has(name.toLowerCase()) || credentialLike(value)) found.push(value);
  }
  for (const segment of url.pathname.split('/')) {
    const value = decoded(segment);
    if (credentialLike(value)) found.push(value);
  }
  return found;
}

/** What the service was configured with (service.ts gathers it). */
export interface SecretSources {
  /** URLs whose secret parts (`urlSecrets`) are looked for: carrier, databases, Redis, JWKS. */
  urls?: readonly (string | undefined)[];
  /** Values looked for whole: the confirmation secret, bearer tokens. */
  values?: readonly (string | undefined)[];
  /** Keys given as bytes (the audit key): their text when they are text, their hex and base64 forms. */
  keys?: readonly (Uint8Array | undefined)[];
}

/** The service's secret values, from its configuration (each at least `MIN_SECRET_LENGTH` long). */
export function serverSecretValues(sources: SecretSources): string[] {
  const values = new Set<string>();
  const add = (value: string | undefined): void => {
    if (value !== undefined && value.length >= MIN_SECRET_LENGTH) values.add(value);
  };
  for (const url of sources.urls ?? []) for (const value of urlSecrets(url)) add(value);
  for (const value of sources.values ?? []) add(value);
  for (const key of sources.keys ?? []) {
    if (key === undefined) continue;
    const bytes = Buffer.from(key);
    const text = bytes.toString('utf8');
    // biome-ignore lint/suspicious/noControlCharactersInRegex: text only when it holds no control character.
    if (!/[\u0000-\u001f\u007f\ufffd]/.test(text)) add(text);
    add(bytes.toString('hex'));
    add(bytes.toString('base64'));
    add(bytes.toString('base64url'));
  }
  return [...values];
}

/** Removes the service's own secret values from third-party text. */
export interface ServerSecrets {
  /** `text` with every secret value, also percent-encoded or JSON-escaped, replaced by `[REDACTED]`. */
  hide(text: string): string;
  /** The same as a pattern (for redact-errors' `patterns`), or undefined when there is no secret. */
  readonly pattern: SecretPattern | undefined;
}

/**
 * One matcher for every value and its percent-encoded (`encodeURIComponent`, and with `+` for spaces)
 * and JSON-escaped forms, longest first, so a value inside a longer one goes whole. A string costs one
 * regular-expression scan (a few hundred nanoseconds for a short one); without secrets, nothing.
 */
export function createServerSecrets(values: readonly string[]): ServerSecrets {
  const forms = new Set<string>();
  for (const value of values) {
    forms.add(value);
    forms.add(encodeURIComponent(value));
    forms.add(encodeURIComponent(value).replace(/%20/g, '+'));
    forms.add(JSON.stringify(value).slice(1, -1));
    // JSON quoted in JSON (a carrier's error body in its answer's text).
    forms.add(JSON.stringify(JSON.stringify(value)).slice(2, -2));
  }
  if (forms.size === 0) return { hide: (text) => text, pattern: undefined };
  const source = [...forms]
    .sort((a, b) => b.length - a.length)
    .map((form) => form.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
    .join('|');
  const pattern = new RegExp(source, 'g');
  return {
    hide: (text) => text.replace(pattern, REDACTED),
    pattern: { name: 'server-secret', pattern, replace: REDACTED },
  };
}

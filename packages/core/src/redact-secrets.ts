import { type MapStringsOptions, mapStrings } from './map-strings.js';

/** What replaces a secret. */
export const REDACTED = '[REDACTED]';

/**
 * Key names whose values are secrets, matched case-insensitively after removing `-`, `_` and `.`,
 * as a substring (`db_password`, `X-Api-Key` and `refreshToken` all match).
 */
export const DEFAULT_SECRET_KEYS: readonly string[] = [
  'password',
  'passwd',
  'passphrase',
  'secret',
  'token',
  'authorization',
  'apikey',
  'cookie',
  'privatekey',
  'credential',
  'accesskey',
  'sessionkey',
  'signature',
];

/** A value pattern and what a match is replaced by. */
export interface SecretPattern {
  readonly name: string;
  readonly pattern: RegExp;
  readonly replace: string;
}

/**
 * Secrets recognised inside any string, whatever its key: bearer tokens, JWTs, AWS-style keys,
 * well-known API key prefixes, credentials in URLs and connection strings, PEM private keys and
 * `password=...` pairs. Each pattern is global; the text around a match is kept.
 */
export const SECRET_PATTERNS: readonly SecretPattern[] = [
  {
    name: 'pem-private-key',
    pattern: /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g,
    replace: REDACTED,
  },
  { name: 'bearer', pattern: /\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/]+=*/gi, replace: `$1 ${REDACTED}` },
  { name: 'jwt', pattern: /\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, replace: REDACTED },
  { name: 'aws-access-key-id', pattern: /\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b/g, replace: REDACTED },
  {
    name: 'api-key-prefix',
    pattern:
      /\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}|\bxox[abposr]-[A-Za-z0-9-]{10,}|\bAIza[0-9A-Za-z_-]{35}|\bglpat-[A-Za-z0-9_-]{20,}/g,
    replace: REDACTED,
  },
  {
    name: 'url-credentials',
    pattern: /\b([a-z][a-z0-9+.-]*:\/\/)[^\s:/@]*:[^\s@/]*@/gi,
    replace: `$1${REDACTED}@`,
  },
  {
    name: 'key-value-secret',
    pattern:
      /\b((?:[A-Za-z0-9]+[_-])*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s&;,'"]+)/gi,
    replace: `$1${REDACTED}`,
  },
];

export interface RedactSecretsOptions {
  /** Key-name fragments whose values are always replaced. @default DEFAULT_SECRET_KEYS */
  keys?: readonly string[];
  /** Value patterns replaced inside every string. @default SECRET_PATTERNS */
  patterns?: readonly SecretPattern[];
  /** Deepest level walked; deeper values become `[Truncated]`. @default 32 */
  maxDepth?: number;
}

/** Replaces secret patterns inside one string. */
export function redactSecretsInText(
  text: string,
  patterns: readonly SecretPattern[] = SECRET_PATTERNS,
): string {
  let out = text;
  for (const { pattern, replace } of patterns) {
    pattern.lastIndex = 0;
    out = out.replace(pattern, replace);
  }
  return out;
}

/**
 * Whether a key name holds a secret: `keys` fragments (default `DEFAULT_SECRET_KEYS`) matched as
 * substrings after lower-casing and removing `-`, `_`, `.` and spaces, so `X-Api-Key` and
 * `db_password` match. The one rule every package uses for secret-looking keys.
 */
export function createSecretKeyMatcher(
  keys: readonly string[] = DEFAULT_SECRET_KEYS,
): (key: string) => boolean {
  const fragments = keys.map(normaliseKey);
  return (key) => {
    const normal = normaliseKey(key);
    return fragments.some((fragment) => normal.includes(fragment));
  };
}

/**
 * A copy of `value` with secrets replaced: values under secret-looking keys wholesale, and secret
 * patterns inside every string, through nested objects and arrays ({@link mapStrings}: `__proto__` stays
 * a key, cycles and depth bounded, dates and errors turned into strings). The input is not changed.
 */
export function createSecretRedactor(options: RedactSecretsOptions = {}): (value: unknown) => unknown {
  const isSecretKey = createSecretKeyMatcher(options.keys);
  const patterns = options.patterns ?? SECRET_PATTERNS;
  const walkOptions: MapStringsOptions = {
    maxDepth: options.maxDepth ?? 32,
    replaceEntry: (key, item) =>
      isSecretKey(key) && item !== null && item !== undefined ? REDACTED : undefined,
  };
  const redactText = (text: string): string => redactSecretsInText(text, patterns);
  return (value) => mapStrings(value, redactText, walkOptions);
}

/** `createSecretRedactor()` with the defaults, applied once. */
export function redactSecrets(value: unknown, options?: RedactSecretsOptions): unknown {
  return createSecretRedactor(options)(value);
}

function normaliseKey(key: string): string {
  return key.toLowerCase().replace(/[-_.\s]/g, '');
}

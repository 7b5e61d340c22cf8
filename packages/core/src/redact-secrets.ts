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

// Key names whose value is a secret in `key=value`, `key: value`, `"key":"value"` and header form. The
// name must END in one of these words (`dbPassword`, `x_api_key`, `_authToken`, `SharedAccessKey`), so
// `max_tokens: 1500`, `token_count=3` and `passwordless` stay; short words must be the whole name.
// `pass` ends a name only after a separator (`DB_PASS`, `smtp.pass`, not `bypass` or `compass`); Rails'
// `SECRET_KEY_BASE` ends in `base`; `api key` may be written with a space (`invalid api key: ...`).
const SECRET_KEY_SUFFIX =
  '(?:password|passwd|passphrase|secret|token|api[ _-]?key|access[_-]?key|secret[_-]?key(?:[_-]?base)?|private[_-]?key|account[_-]?key|client[_-]?secret|credentials?|signature|session[_-]?(?:id|key)|[_.-]pass)';
const SECRET_KEY_WHOLE = '(?:pass|pwd|pin|sig|_auth)';
// The key as written: an optional prefix of name characters, the secret word, an optional closing
// quote (JSON, also escaped as `\"` when JSON sits inside a JSON string, or URL-encoded as `%22`), then
// `=`, `:` or `=>` (PHP and Ruby hashes), or `%3D`/`%3A` (a URL-encoded query or JSON). Not preceded by
// a name character, so the whole name is matched (after `%22` or `%3F` the prefix holds the code's
// digits and letters: `22client_secret`, which still ends in the secret word).
const SECRET_KEY = `(?<![A-Za-z0-9_.-])(?:[A-Za-z0-9_.-]*${SECRET_KEY_SUFFIX}|${SECRET_KEY_WHOLE})(?:\\\\?["']|%22)?[ \\t]*(?:=>|[=:]|%3[DdAa])[ \\t]*`;

/**
 * Secrets recognised inside any string, whatever its key: private key blocks, password hashes,
 * `Authorization` and cookie headers, bearer tokens, JWTs, AWS access key ids (also cut short),
 * well-known provider key shapes (GitHub, GitLab, Slack, Stripe, Google, npm, OpenAI-style `sk-`),
 * credentials in URLs, and values written under a secret-looking key in `key=value`, `key: value`,
 * JSON (`"SECRET_KEY":"..."`), `.npmrc` (`//host/:_authToken=...`) and connection-string
 * (`AccountKey=...;`) syntax. Each pattern is global; the text around a match is kept. Tuned to leave
 * ordinary text alone: order ids, dates, timestamps, UUIDs, sentences ("Basic plan", "bearer of").
 */
export const SECRET_PATTERNS: readonly SecretPattern[] = [
  {
    name: 'pem-private-key',
    pattern:
      /-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)/g,
    replace: REDACTED,
  },
  {
    // bcrypt, sha-crypt, argon2 and scrypt hashes: a row dump or log line carries them.
    name: 'password-hash',
    pattern:
      /\$(?:2[abxy]?\$\d{2}\$[./A-Za-z0-9]{53}|[56]\$(?:rounds=\d+\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{43,86}|argon2(?:id|i|d)\$v=\d+\$[^\s$]+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+|scrypt\$[^\s$]+\$[^\s$]+\$[^\s$]+)/g,
    replace: REDACTED,
  },
  {
    // The whole credential after `Authorization:` (any scheme: Bearer, Basic, token, Digest, ...).
    name: 'authorization-header',
    pattern:
      /\b((?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["']?)(?![\s"']|[A-Za-z]+[ \t]+\[REDACTED\])((?:Bearer|Basic|Token|Digest|Negotiate|Bot|ApiKey|Key)[ \t]+(?![ \t]))?(?!\[REDACTED\])[^\s"',;]+(?:[ \t]*,[ \t]*[a-z]+=(?:"[^"]*"|[^\s,"]+))*/gi,
    replace: `$1$2${REDACTED}`,
  },
  {
    // Everything after a `Cookie:` / `Set-Cookie:` header name, to the end of the line or quote.
    name: 'cookie-header',
    pattern: /\b((?:set-)?cookie["']?[ \t]*:[ \t]*["']?)(?![\s"']|\[REDACTED\])[^\r\n"']+/gi,
    replace: `$1${REDACTED}`,
  },
  {
    // A `__Host-` / `__Secure-` cookie anywhere (its prefix says it is a session credential).
    name: 'cookie-prefixed',
    pattern: /(?<![\w-])(__(?:Host|Secure)-[\w.!#$%&'*+^`|~-]*=)(?!\[REDACTED\])[^\s;,"']+/g,
    replace: `$1${REDACTED}`,
  },
  {
    // `Bearer <token>` outside a header; at least 8 token characters so "the bearer of it" stays.
    // The separator may be URL-encoded (`Bearer%20...` in a query string).
    name: 'bearer',
    pattern: /\b(Bearer)(?:\s+|%20|\+)(?!\[REDACTED\])[A-Za-z0-9\-._~+/]{8,}=*/gi,
    replace: `$1 ${REDACTED}`,
  },
  {
    // `Basic <base64>` in any common casing, shaped like base64 (a capital, digit or `+/=` after the
    // first character), so "Basic plan" and "basic authentication" stay.
    name: 'basic',
    pattern: /\b(Basic|basic|BASIC)\s+[A-Za-z0-9+/](?=[a-z]*[A-Z0-9+/=])[A-Za-z0-9+/]{7,}={0,2}/g,
    replace: `$1 ${REDACTED}`,
  },
  {
    // Session cookies written outside a Cookie header (a cookie jar dump, a log line).
    name: 'session-cookie',
    pattern:
      /(?<![\w.-])((?:connect\.sid|JSESSIONID|PHPSESSID|sessionid|laravel_session)=)(?!\[REDACTED\])[^\s;,"']+/gi,
    replace: `$1${REDACTED}`,
  },
  { name: 'jwt', pattern: /\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, replace: REDACTED },
  {
    // An access key id with its secret after it (`id:secret`, a credentials line): both go.
    name: 'aws-key-pair',
    pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}[:\s,;]+[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])/g,
    replace: REDACTED,
  },
  {
    // 16 characters after the prefix make a full key id; 12 or more is one cut short in a message.
    name: 'aws-access-key-id',
    pattern: /\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{12,16}(?![0-9A-Za-z])/g,
    replace: REDACTED,
  },
  {
    name: 'api-key-prefix',
    pattern:
      /\b(?:(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{20,}|ya29\.[0-9A-Za-z_-]{20,}|glpat-[A-Za-z0-9_-]{16,}|npm_[A-Za-z0-9]{20,}|hf_[A-Za-z0-9]{20,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})/g,
    replace: REDACTED,
  },
  {
    // More providers' key shapes, each behind its fixed prefix: DigitalOcean, Shopify, age, Postman,
    // Square, Grafana, GitLab's other token kinds, HashiCorp Vault, Google OAuth client secrets, PyPI,
    // Databricks, Sentry, Linear, Atlassian, New Relic, Heroku, Supabase, Doppler, Notion, Twilio API
    // keys, Telegram bot tokens, Mailgun, and Azure AD client secrets (`…8Q~…`).
    name: 'api-key-prefix',
    pattern:
      /\b(?:do[opr]_v1_[a-f0-9]{64}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|AGE-SECRET-KEY-1[0-9A-Z]{58}|PMAK-[a-f0-9]{24}-[a-f0-9]{34}|sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}|gl(?:sa|c)_[A-Za-z0-9_=+/-]{20,}|gl(?:oas|rt|dt|ptt|ft|imt|agent|cbt|soat)-[A-Za-z0-9_-]{16,}|hv[sbr]\.[A-Za-z0-9_-]{24,}|GOCSPX-[A-Za-z0-9_-]{20,}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{32,}|dapi[a-f0-9]{32}|sntr[yu]s_[A-Za-z0-9+/=_-]{20,}|lin_api_[A-Za-z0-9]{32,}|ATATT3[A-Za-z0-9_=-]{20,}|NRAK-[A-Z0-9]{27}|HRKU-[A-Za-z0-9_-]{20,}|sbp_[a-f0-9]{40}|dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{20,}|ntn_[A-Za-z0-9]{40,}|SK[0-9a-fA-F]{32}|\d{8,10}:AA[0-9A-Za-z_-]{33}|key-[0-9a-f]{32}|[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?![A-Za-z0-9_-])/g,
    replace: REDACTED,
  },
  {
    // `scheme://user:password@host`: the userinfo up to the LAST `@` before the host, so a password
    // holding `@` does not leave its tail behind.
    name: 'url-credentials',
    // The scheme starts where no scheme character precedes it: `\b` would let the engine retry from
    // every character of a long run of them (quadratic on `a.a.a...`).
    pattern: /(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*:\/\/)[^\s:/@]*:[^\s/]*@/gi,
    replace: `$1${REDACTED}@`,
  },
  {
    // `"password": "x y"`, `token='abc'`: the quoted value, quotes kept (JSON stays JSON); also JSON
    // quoted inside a JSON string (an upstream body in an error), `\"password\":\"x y\"`, whose value
    // runs to the next escaped quote. One expression for both: every string is tested against it once.
    name: 'key-value-secret',
    pattern: new RegExp(
      `(${SECRET_KEY})(\\\\?["'])(?!\\[REDACTED\\]\\2)(?:(?!\\2)(?:\\\\.|[^\\\\\\r\\n]))*\\2`,
      'gi',
    ),
    replace: `$1$2${REDACTED}$2`,
  },
  {
    // `DB_PASSWORD=hunter2`, `AccountKey=abc==;`, `//registry/:_authToken=npm_x`, `password: hunter2`,
    // `password%3Dhunter2` and `%22client_secret%22%3A%22abc%22` (URL-encoded: the value runs to `&`).
    name: 'key-value-secret',
    pattern: new RegExp(
      `(${SECRET_KEY})(?!\\[REDACTED\\]|(?:null|true|false|undefined)\\b)(?!\\\\?["'\\s])[^\\s&;,'"<>)}\\]]+`,
      'gi',
    ),
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
 * Short key names that hold a secret only as the whole name (as substrings they are in `shipping`,
 * `passenger`, `author`, `design`): matched after the same normalisation, whatever `keys` says.
 */
export const WHOLE_SECRET_KEYS: readonly string[] = [
  'pwd',
  'pass',
  'pin',
  'auth',
  'sig',
  'otp',
  'cvv',
  'cvc',
];

// Between two words of a key: `-`, `_`, `.` or spaces, or a lower-case letter or digit before a capital.
const WORD_BREAK = /[-_.\s]+|(?<=[a-z0-9])(?=[A-Z])/;
const LAST_WORD_SECRETS = new Set(WHOLE_SECRET_KEYS.filter((name) => name !== 'auth'));

/**
 * Whether a key name holds a secret: `keys` fragments (default `DEFAULT_SECRET_KEYS`) matched as
 * substrings, and `WHOLE_SECRET_KEYS` as the whole name, after folding compatibility forms (full-width
 * `ＰＡＳＳＷＯＲＤ`), lower-casing and removing `-`, `_`, `.` and spaces, so `X-Api-Key`, `db_password`
 * and `PIN` match. The one rule every package uses for secret-looking keys.
 */
export function createSecretKeyMatcher(
  keys: readonly string[] = DEFAULT_SECRET_KEYS,
): (key: string) => boolean {
  const fragments = keys.map(normaliseKey);
  const whole = new Set(WHOLE_SECRET_KEYS);
  return (key) => {
    const normal = normaliseKey(key);
    if (whole.has(normal) || fragments.some((fragment) => normal.includes(fragment))) return true;
    // A short name as the last word of a longer one: `DB_PASS`, `smtpPass`, `card.pin` (`auth` only
    // whole: `require_auth` is a flag).
    const last = key.split(WORD_BREAK).at(-1);
    return last !== undefined && last.length < key.length && LAST_WORD_SECRETS.has(normaliseKey(last));
  };
}

/**
 * A copy of `value` with secrets replaced: values under secret-looking keys wholesale, and secret
 * patterns inside every string, object keys included, through nested objects and arrays ({@link mapStrings}: `__proto__` stays
 * a key, cycles and depth bounded, dates and errors turned into strings). The input is not changed.
 */
export function createSecretRedactor(options: RedactSecretsOptions = {}): (value: unknown) => unknown {
  const isSecretKey = createSecretKeyMatcher(options.keys);
  const patterns = options.patterns ?? SECRET_PATTERNS;
  const redactText = (text: string): string => redactSecretsInText(text, patterns);
  const walkOptions: MapStringsOptions = {
    maxDepth: options.maxDepth ?? 32,
    replaceEntry: (key, item) =>
      isSecretKey(key) && item !== null && item !== undefined ? REDACTED : undefined,
    // A key is a string the reader sees too: a URL with credentials used as a key must not survive.
    mapKey: redactText,
  };
  return (value) => mapStrings(value, redactText, walkOptions);
}

/** `createSecretRedactor()` with the defaults, applied once. */
export function redactSecrets(value: unknown, options?: RedactSecretsOptions): unknown {
  return createSecretRedactor(options)(value);
}

const INVISIBLE = /[\u00ad\u200b-\u200d\u2060\ufeff]/g;

function normaliseKey(key: string): string {
  // NFKC only when a character outside ASCII could fold (full-width letters): keys are mostly ASCII.
  // Invisible characters (zero-width space and joiners, word joiner, BOM, soft hyphen) go too:
  // `pass\u200bword` reads as `password`.
  const folded = /[\u0080-\uffff]/.test(key) ? key.normalize('NFKC').replace(INVISIBLE, '') : key;
  return folded.toLowerCase().replace(/[-_.\s]/g, '');
}

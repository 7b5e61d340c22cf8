import { REDACTED, type SecretPattern } from '@toolgate/core';
import { decodedView, NEEDS_VIEW } from './decoded-view.js';

// The service's own secrets, known from its configuration: no tool's answer may carry one, whatever
// the text that carries it looks like (a carrier echoing the URL it was asked for, `?key=…` included,
// passes core's generic patterns), however it is written. Built once at start; one regular expression
// over every value, run over the text's decoded view (decoded-view.ts).

/** Shorter values are never looked for: they would match ordinary words and numbers in any text. */
export const MIN_SECRET_LENGTH = 6;

// A query parameter whose name says it holds a credential (`key`, `apiKey`, `X-Api-Key`, `app_id`,
// `client_secret`, `X-Amz-Signature`): its value is a secret whatever it looks like. The name's words
// (split at separators and lower-to-upper case changes) are matched, and the name without separators.
const SECRET_NAME_WORDS = new Set([
  'key',
  'token',
  'secret',
  'sig',
  'signature',
  'auth',
  'authorization',
  'password',
  'passwd',
  'pass',
  'passphrase',
  'pwd',
  'license',
  'licence',
  'credential',
  'credentials',
  'session',
  'sid',
  'apikey',
  'appid',
  'appkey',
]);
const SECRET_NAMES = new Set(['apikey', 'appid', 'appkey', 'clientsecret', 'accesstoken', 'sessionid']);

/** Whether a query parameter's name says its value is a credential (see SECRET_NAME_WORDS). */
export function secretName(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/);
  if (words.some((word) => SECRET_NAME_WORDS.has(word))) return true;
  return SECRET_NAMES.has(words.join(''));
}

/**
 * A credential's shape: at least 12 characters holding a letter and a digit (`CK1_Zq9xYabc…`,
 * `7f3a…` hex), or at least 32 characters of any kind. Path segments and option values such as `v1`,
 * `track`, `api`, `2024-01-01`, `Chicago` or `shipments` never have it.
 */
export function credentialLike(value: string): boolean {
  if (value.length >= 32) return true;
  return value.length >= 12 && /[A-Za-z]/.test(value) && /\d/.test(value);
}

/** Letters only and shorter than 12: a word of the language, which ordinary text holds too. */
export function plainWord(value: string): boolean {
  return value.length < 12 && /^\p{L}+$/u.test(value);
}

/**
 * The secret parts of a configured URL: the userinfo password unless it is a plain word (`orders`:
 * letters only, shorter than 12; it would hide that word in every carrier text and names nothing a
 * model could use), a user name shaped like a credential (as APIs that take the key as the user name
 * want it), every query value under a secret name (`secretName`) or shaped like a credential
 * (`?account=Chicago` is neither), and every path segment shaped like a credential
 * (`/k/<key>/track`). Unparsable text is taken whole when it looks like a credential.
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
  const password = decoded(url.password);
  if (password && !plainWord(password)) found.push(password);
  if (url.username && credentialLike(decoded(url.username))) found.push(decoded(url.username));
  for (const [name, value] of url.searchParams) {
    if (secretName(name) || credentialLike(value)) found.push(value);
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
  /**
   * `text` with every secret value, however it is written (see `createServerSecrets`), replaced by
   * `[REDACTED]`; a line break inside a replaced span stays, so a document keeps its line numbers.
   */
  hide(text: string): string;
  /**
   * A regular expression for redact-errors' `patterns` (error results): each value raw, percent-encoded,
   * JSON-escaped, reversed, in base64 and hex, in any case; undefined when there is no secret.
   */
  readonly pattern: SecretPattern | undefined;
}

/**
 * A matcher of the values in the decoded view of a text (`decodedView`: escapes of any kind and case
 * decoded, invisible characters dropped, fullwidth and other compatibility forms folded, lower case),
 * so every way of writing a value is found without listing it: `%2b` and `%2B`, a needless `%5F`,
 * `\u005f`, PHP's `\/`, .NET's `\u002B`, `&#95;`, `CK1_ZQ9X…`, `Z\u200bq`, `Ｚq`. Besides the
 * value, three shapes a program gives it are looked for there as fixed texts: reversed, hex, and
 * base64 (and base64url) at each of the three alignments (the characters only the value's bits decide,
 * as @toolgate/exec's output scrubber does). One regular expression, longest first, so a value inside
 * a longer one goes whole. Not found: a value split over two strings (two events, two fields: each
 * string is read alone) or spread out with spaces. Cost: text of plain ASCII is lower-cased and
 * scanned once (a few hundred nanoseconds for a carrier's short string); text with an escape, a
 * control or a character past ASCII is first read into its view (about 10 ms a MiB); without secrets,
 * nothing.
 */
export function createServerSecrets(values: readonly string[]): ServerSecrets {
  const viewForms = new Set<string>();
  // A value holding what the view decodes (`p%41ss`): also looked for as written, in lower case.
  const rawForms = new Set<string>();
  const errorForms = new Set<string>();
  const keep = (set: Set<string>, form: string): void => {
    if (form.length >= MIN_SECRET_LENGTH) set.add(form);
  };
  for (const value of values) {
    const written = value.includes(' ') ? [value, value.replaceAll(' ', '+')] : [value];
    for (const form of written) {
      const seen = decodedView(form).view;
      keep(viewForms, seen);
      if (form.toLowerCase() !== seen) keep(rawForms, form.toLowerCase());
    }
    const reshaped = reshapedForms(value);
    for (const form of reshaped) keep(viewForms, form.toLowerCase());
    for (const form of [
      value,
      encodeURIComponent(value),
      encodeURIComponent(value).replace(/%20/g, '+'),
      JSON.stringify(value).slice(1, -1),
      // JSON quoted in JSON (a carrier's error body in its answer's text).
      JSON.stringify(JSON.stringify(value)).slice(2, -2),
      ...reshaped,
    ]) {
      keep(errorForms, form);
    }
  }
  if (viewForms.size === 0) return { hide: (text) => text, pattern: undefined };
  const inView = alternation(viewForms, 'g');
  const asWritten = rawForms.size > 0 ? alternation(rawForms, 'g') : undefined;
  return {
    hide: (text) => {
      const ranges: Array<[number, number]> = [];
      if (!NEEDS_VIEW.test(text)) {
        // Plain ASCII is its own view.
        collect(inView, text.toLowerCase(), ranges, undefined, undefined);
      } else {
        const { view, starts, ends } = decodedView(text);
        collect(inView, view, ranges, starts, ends);
        const lower = text.toLowerCase();
        if (asWritten !== undefined && lower.length === text.length) {
          collect(asWritten, lower, ranges, undefined, undefined);
        }
      }
      return replaceRanges(text, ranges);
    },
    pattern: { name: 'server-secret', pattern: alternation(errorForms, 'gi'), replace: REDACTED },
  };
}

function alternation(forms: ReadonlySet<string>, flags: string): RegExp {
  const source = [...forms]
    .sort((a, b) => b.length - a.length)
    .map((form) => form.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
    .join('|');
  return new RegExp(source, flags);
}

/** Adds the [start, end) in the text of each match of `pattern` in `view` (the text itself without `starts`). */
function collect(
  pattern: RegExp,
  view: string,
  ranges: Array<[number, number]>,
  starts: Uint32Array | undefined,
  ends: Uint32Array | undefined,
): void {
  pattern.lastIndex = 0;
  for (let found = pattern.exec(view); found !== null; found = pattern.exec(view)) {
    const last = found.index + found[0].length - 1;
    ranges.push(
      starts === undefined || ends === undefined
        ? [found.index, last + 1]
        : [starts[found.index]!, ends[last]!],
    );
  }
}

/**
 * `text` with each of `ranges` replaced by one `[REDACTED]` a run of overlapping ones, the line breaks
 * a range held kept after it.
 */
function replaceRanges(text: string, ranges: Array<[number, number]>): string {
  if (ranges.length === 0) return text;
  ranges.sort((a, b) => a[0] - b[0]);
  let out = '';
  let copied = 0;
  for (const [start, end] of ranges) {
    if (end <= copied) continue;
    const from = Math.max(start, copied);
    if (start >= copied) out += text.slice(copied, start) + REDACTED;
    out += '\n'.repeat(text.slice(from, end).split('\n').length - 1);
    copied = end;
  }
  return out + text.slice(copied);
}

/**
 * The shapes of `value` a program's reshaping gives it: reversed, hex of its UTF-8, and base64 (and
 * base64url) of its UTF-8 at each alignment (3: where the value starts in the encoded input), the
 * characters that only the value's bits decide.
 */
function reshapedForms(value: string): string[] {
  const bytes = Buffer.from(value);
  const forms = [[...value].reverse().join(''), bytes.toString('hex')];
  for (let offset = 0; offset < 3; offset += 1) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    const form = encoded.slice(Math.ceil((offset * 8) / 6), Math.floor(((offset + bytes.length) * 8) / 6));
    forms.push(form, form.replaceAll('+', '-').replaceAll('/', '_'));
  }
  return forms.filter((form) => form !== value);
}

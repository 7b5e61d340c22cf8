import { readFileSync } from 'node:fs';
import { createSecretKeyMatcher, redactSecretsInText } from '@toolgate/core';
import { type EdgeForm, edgeForm, edgeFragmentRanges } from './cut-fragments.js';
import { scrubHexDumps, secretRanges } from './hex-dumps.js';

// Portable variable names only: `=` or NUL in a name would rewrite another variable.
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CONTROL = /[\0\n\r]/;

/** The default environment: enough for a program to find its own helpers and speak UTF-8. */
export const DEFAULT_EXEC_ENV: Readonly<Record<string, string>> = Object.freeze({
  PATH: '/usr/bin:/bin',
  LANG: 'C.UTF-8',
});

/**
 * The program's whole environment, built once from an allowlist: the named values, then the named
 * variables of this process that are set. Nothing else is inherited.
 */
export function buildEnvironment(
  env: Readonly<Record<string, string>> | undefined,
  inheritEnv: readonly string[] | undefined,
): Readonly<Record<string, string>> {
  const built: Record<string, string> = Object.create(null);
  for (const [name, text] of Object.entries(env ?? DEFAULT_EXEC_ENV)) {
    checkName(name);
    if (typeof text !== 'string' || CONTROL.test(text)) {
      throw new TypeError(`exec: env.${name} must be a string without NUL bytes or line breaks`);
    }
    built[name] = text;
  }
  for (const name of inheritEnv ?? []) {
    checkName(name);
    const inherited = process.env[name];
    if (inherited === undefined) continue;
    if (CONTROL.test(inherited)) {
      throw new TypeError(`exec: inherited variable ${name} contains a NUL byte or a line break`);
    }
    built[name] = inherited;
  }
  checkSearchPath(built.PATH, inheritEnv?.includes('PATH') === true);
  return Object.freeze(built);
}

/**
 * Refuses a PATH with an entry that is not absolute: an empty one (a leading, trailing or doubled `:`)
 * or `.` means the program's working directory, and a relative one is resolved from it, so a program's
 * own helper lookups (`tar -z` finding `gzip`, `git` its hooks' tools) would run whatever file a call
 * managed to put there. Windows' PATH (`;`, drive letters) is not judged.
 */
function checkSearchPath(path: string | undefined, inherited: boolean): void {
  if (path === undefined || process.platform === 'win32') return;
  const entries = path.split(':');
  const at = entries.findIndex((entry) => !entry.startsWith('/'));
  if (at >= 0) {
    const where = inherited ? 'the inherited PATH' : 'env.PATH';
    throw new TypeError(
      `exec: ${where} entry ${at + 1} (${JSON.stringify(entries[at])}) is not an absolute directory: an empty or relative entry makes programs look up their helpers in the working directory`,
    );
  }
}

function checkName(name: unknown): void {
  if (typeof name !== 'string' || !ENV_NAME.test(name)) {
    throw new TypeError(`exec: ${JSON.stringify(name)} is not a valid environment variable name`);
  }
}

/** Names whose values are credentials by convention (`CARRIER_KEY`, `GITHUB_TOKEN`, `PGPASSWORD`, ...). */
const SECRET_NAME = /KEY|TOKEN|SECRET|PASS|CRED|AUTH|PRIVATE|COOKIE|SESSION|DSN/i;
// Core's rule for secret-looking names, which knows the ones the words above miss: a short word as the
// last word of a name (`MYSQL_PWD`, MySQL's password variable; `DB_PIN`), `SIGNATURE`, ... One rule for
// the whole category rather than a word added here each time one is found missing.
const isCoreSecretName = createSecretKeyMatcher();
// The working directories a shell exports: paths, whatever their names end in (core takes `PWD` whole).
const NOT_SECRET_NAMES: ReadonlySet<string> = new Set(['PWD', 'OLDPWD']);
// Each name decided once: safeExec reads the server's environment at every call.
const secretNames = new Map<string, boolean>();
/** Shorter values are left alone: replacing every `1` or `abc` in the output would hide what it says. */
const MIN_SECRET_VALUE = 6;

/** Whether a variable of this name holds a credential: exec's words, or core's secret-key rule. */
export function isSecretName(name: string): boolean {
  let secret = secretNames.get(name);
  if (secret === undefined) {
    secret = SECRET_NAME.test(name) || (!NOT_SECRET_NAMES.has(name) && isCoreSecretName(name));
    // Bounded by the distinct names an environment ever held; a flood of fresh names is not cached.
    if (secretNames.size < 4096) secretNames.set(name, secret);
  }
  return secret;
}

let startupEnvironment: Readonly<Record<string, string>> | undefined;

/**
 * The environment this process was started with, as `/proc/self/environ` shows it to every program
 * running as the same user (Linux; empty elsewhere). It is not `process.env`: a server that reads a
 * credential at start-up and then deletes or overwrites it in `process.env` (so that children do not
 * inherit it) still carries the original in that file, and a program given `/proc/<server pid>/environ`
 * prints it. Read once: the kernel shows the memory the environment was first written to, and Node
 * never writes there again.
 */
export function serverStartupEnvironment(): Readonly<Record<string, string>> {
  if (startupEnvironment !== undefined) return startupEnvironment;
  const found: Record<string, string> = Object.create(null);
  if (process.platform === 'linux') {
    let text = '';
    try {
      text = readFileSync('/proc/self/environ', 'utf8');
    } catch {
      // No /proc mounted: no program can read it either.
    }
    for (const entry of text.split('\0')) {
      const at = entry.indexOf('=');
      // A name seen twice (a launcher's duplicate) keeps its first value; process.env has the other.
      if (at > 0 && !(entry.slice(0, at) in found)) found[entry.slice(0, at)] = entry.slice(at + 1);
    }
  }
  startupEnvironment = Object.freeze(found);
  return startupEnvironment;
}

/**
 * The values of the variables named like credentials (`isSecretName`), longest first, of the program's
 * environment and of the server's own (`process.env` and the environment it was started with,
 * `serverStartupEnvironment`): a program that prints its own key (an error echoing it, `env`) must not
 * hand it to the model when the value matches none of core's secret patterns (an opaque key), and
 * neither may one that prints the server's (it runs as the server's user, so
 * `/proc/<server pid>/environ` is readable to it). Each also as quoting writers write it without a
 * backslash escape (`quotedForms`), and as JSON writes it (`\\` for `\`, `\"` for `"`), the form a
 * program's `--json` output or an env dump carries.
 */
export function secretValuesOf(
  env: Readonly<Record<string, string>>,
  ...serverEnvs: readonly Readonly<Record<string, string | undefined>>[]
): readonly string[] {
  const values = new Set<string>();
  for (const variables of [env, ...serverEnvs]) {
    for (const [name, value] of Object.entries(variables)) {
      if (value !== undefined && value.length >= MIN_SECRET_VALUE && isSecretName(name)) {
        values.add(value);
        for (const form of quotedForms(value)) values.add(form);
        values.add(JSON.stringify(value).slice(1, -1));
        for (const form of reshapedForms(value)) values.add(form);
      }
    }
  }
  return Object.freeze([...values].sort((a, b) => b.length - a.length));
}

/**
 * The forms of `value` that programs reshaping their input print, each a fixed text searched like the
 * value: reversed (`rev`, `tac -rs ''`), and base64 (`base64`, `openssl base64`, also the URL-safe
 * alphabet) and base32 (`base32`, `basenc --base32hex`) of its UTF-8 at each alignment (3 for base64,
 * 5 for base32: where the value starts in the encoded input), the characters that only the value's
 * bits decide (those shared with a neighbouring byte differ with it). A value of 6 bytes still gives 6
 * characters or more each. The encoders' line breaks (76 columns) are read by `scrubBrokenLines`.
 */
function reshapedForms(value: string): string[] {
  const forms = [[...value].reverse().join('')];
  const bytes = Buffer.from(value);
  for (let offset = 0; offset < 3; offset += 1) {
    const base64 = alignedForm(
      Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64'),
      6,
      offset,
      bytes.length,
    );
    forms.push(base64, base64.replaceAll('+', '-').replaceAll('/', '_'));
  }
  for (let offset = 0; offset < 5; offset += 1) {
    const padded = Buffer.concat([Buffer.alloc(offset), bytes]);
    forms.push(
      alignedForm(base32(padded, BASE32), 5, offset, bytes.length),
      alignedForm(base32(padded, BASE32_HEX), 5, offset, bytes.length),
    );
  }
  return forms.filter((form) => form.length >= MIN_SECRET_VALUE && form !== value);
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const BASE32_HEX = '0123456789ABCDEFGHIJKLMNOPQRSTUV';

/** `bytes` in base32 (RFC 4648) with `alphabet`, without padding. */
function base32(bytes: Buffer, alphabet: string): string {
  let text = '';
  let bits = 0;
  let held = 0;
  for (const byte of bytes) {
    held = ((held << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      text += alphabet[(held >> bits) & 31];
    }
  }
  return bits > 0 ? text + alphabet[(held << (5 - bits)) & 31] : text;
}

/**
 * The characters of `encoded` (`width` bits each) that only the value's bits decide: the value starts
 * `offset` bytes into the encoded input and is `length` bytes long.
 */
function alignedForm(encoded: string, width: number, offset: number, length: number): string {
  const first = Math.ceil((offset * 8) / width);
  const last = Math.floor(((offset + length) * 8) / width);
  return encoded.slice(first, last);
}

/**
 * The forms of `value` that quoting writers make by repeating or re-quoting a character, not by a
 * backslash escape (those are read by `decodedView`): each `"` doubled (CSV, `psql --csv`,
 * `sqlite3 -csv`, VB and C# verbatim strings), each `'` doubled (SQL literals, YAML's single-quoted
 * scalars), each `'` closed, escaped and reopened as the shells write it (`'\''`: bash's `${x@Q}`,
 * `set -x`; `'"'"'`: Python's `shlex.quote`), and each space as `+` (a form's
 * `application/x-www-form-urlencoded` text, its other characters `%XX`, which the decoded view reads).
 * Searched like the value itself, as written and in the decoded view: a value is found in any one of
 * these forms (not in two at once, which no writer produces).
 */
function quotedForms(value: string): string[] {
  const forms: string[] = [];
  if (value.includes('"')) forms.push(value.replaceAll('"', '""'));
  if (value.includes("'")) {
    forms.push(value.replaceAll("'", "''"), value.replaceAll("'", "'\\''"), value.replaceAll("'", `'"'"'`));
  }
  if (value.includes(' ')) forms.push(value.replaceAll(' ', '+'));
  return forms;
}

// A terminal control character: C0 but NUL (a separator in data: `/proc/<pid>/environ`, `-print0`;
// terminals ignore it), tab and line feed; DEL; C1 (U+0080-U+009F).
// Also the bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), see BIDI_CONTROLS.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_CHARACTER = /[\u0001-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
// Those written as a space: all but the carriage return.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_CHARACTERS = /[\u0001-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;
// Invisible characters that reorder the text shown after them (Trojan Source, CVE-2021-42574): a
// right-to-left override shows `txt.exe` as `exe.txt`, `1000` as `0001`, and runs a hidden part
// backwards into a line, in a terminal with bidi support and in every client that renders the result
// as rich text. Removed, not spaced: they take no room. The marks (U+200E, U+200F) stay: they reorder
// nothing on their own and right-to-left text uses them.
const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/g;
// A carriage return that does not end a line: a terminal writes what follows over the line.
const LONE_CARRIAGE_RETURN = /\r(?!\n)/g;
// A 7-bit escape sequence (ECMA-48): CSI (`ESC [`, parameters, intermediates, final byte: colours,
// cursor moves, erases; also when cut short); a string (OSC `ESC ]`, DCS `ESC P`, SOS, PM, APC) up to
// BEL or `ESC \`, whose introducer alone goes when it never ends (its text stays, harmless without
// ESC); any other `ESC` with intermediates and a final byte. Each part stops at the next ESC, so the
// text is read once whatever it holds.
const ESCAPE_SEQUENCES =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
  /\u001b(?:\[[0-?]*[ -/]*[@-~]?|[\]PX^_][^\u0007\u001b]*(?:\u0007|\u001b\\)|[ -/]*[0-~]?)/g;

/**
 * The text without terminal controls: escape sequences removed whole (colour codes inside a word leave
 * it whole), the bidirectional overrides, embeddings and isolates removed, a carriage return that does not end a line made a line break, a
 * backspace applied (it and the character before it removed: overstrike shows the later one), and every
 * control character left (8-bit ones, a lone ESC, BEL) written as a space, so words it separated stay apart;
 * NUL, tab, `\n` and `\r\n` stay. Output the model sees may be shown to a person in a terminal,
 * where they would write the clipboard, retitle the window or erase and overwrite lines to hide text;
 * and a program that colours its output (`--color=always`, FORCE_COLOR) puts them between a secret's
 * key and its value, where no secret pattern matches.
 */
export function stripTerminalControls(text: string): string {
  if (!CONTROL_CHARACTER.test(text)) return text;
  return applyBackspaces(
    text.replace(ESCAPE_SEQUENCES, '').replace(BIDI_CONTROLS, '').replace(LONE_CARRIAGE_RETURN, '\n'),
  ).replace(CONTROL_CHARACTERS, ' ');
}

/**
 * Each backspace with the character before it removed (not past a line break). Overstrike, as `man`,
 * `nroff` and `less` print bold (`p\bp`) and underlined (`_\bp`) text, writes a character over the one
 * before it: shown, `p\bpa\bas\bs...` reads `pass...`, but as text a secret written so (`h\bhu\bu...`)
 * matched no pattern and no known value, and a space in place of each backspace left it for a reader
 * to put back together. One pass over the text, only when it holds a backspace.
 */
function applyBackspaces(text: string): string {
  if (!text.includes('\b')) return text;
  const kept = new Uint16Array(text.length);
  let length = 0;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code !== 0x08) kept[length++] = code;
    else if (length > 0 && kept[length - 1] !== 0x0a) length -= 1;
  }
  return UTF16.decode(kept.subarray(0, length));
}

const UTF16 = new TextDecoder('utf-16le');

/**
 * Terminal controls removed (`stripTerminalControls`), then the UTF-16 runs scrubbed by the text they
 * show (`scrubUtf16Runs`), then the hex dumps by what they encode (`scrubHexDumps`), then every exact
 * value of `secretValues` replaced by `[REDACTED]` (the quoted forms `secretValuesOf` adds among
 * them: CSV's, SQL's, the shells'), and every one written with escapes (the string literals', a
 * URL's, HTML's, CSS's: `escapedValueRanges`) with its escapes, then core's secret patterns. Controls go first: colour codes inside a line
 * hide a secret from both. Values go before patterns: a pattern stops at `;`, `&` or a space, and the
 * rest of a value holding one would no longer match exactly.
 *
 * `cutStart` and `cutEnd` say which ends of `text` are a cut of a longer output (the stderr tail's
 * start, the output cap's end); booleans, so a call allocates nothing for them. The capture moves each
 * cut off a secret value it would split (`OutputCapture`), but it sees bytes: a value written with escape
 * sequences between its characters (a search colouring each match of a pattern the model picked, `.`
 * for one) is not there as written, and is whole again only once the controls are removed here. So
 * where controls were removed, a cut end that holds a value's beginning (or a cut start that holds its
 * end) loses that part too; without controls the capture's cut already holds.
 */
export function scrubOutput(
  text: string,
  secretValues: readonly string[],
  cutStart = false,
  cutEnd = false,
): string {
  let scrubbed = stripTerminalControls(text);
  const known = secretValues.length > 0;
  if (scrubbed !== text && (cutStart || cutEnd) && known) {
    scrubbed = dropCutSecrets(scrubbed, secretValues, cutStart, cutEnd);
  }
  const derived = known ? derivedForms(secretValues) : undefined;
  // A program that cuts its own output (`head -c`, `tail -c`) leaves a value's beginning at the end, or
  // its end at the start: a part of `MIN_CUT_FRAGMENT` characters or more goes, in each form below.
  if (derived !== undefined) scrubbed = replaceRanges(scrubbed, edgeFragmentRanges(scrubbed, derived.edges));
  // Before the dumps: a UTF-16 run is no dump, and its NULs hide a secret from everything after.
  if (scrubbed.includes('\0')) scrubbed = scrubUtf16Runs(scrubbed, secretValues);
  // Before the values and patterns: one of them found in a dump's text column would leave its hex.
  scrubbed = scrubHexDumps(scrubbed, secretValues);
  for (const value of secretValues) {
    if (scrubbed.includes(value)) scrubbed = scrubbed.replaceAll(value, '[REDACTED]');
  }
  if (derived === undefined) return redactSecretsInText(scrubbed);
  if (ESCAPE.test(scrubbed)) {
    scrubbed = replaceRanges(scrubbed, escapedValueRanges(scrubbed, secretValues));
  }
  scrubbed = scrubBrokenLines(scrubbed, secretValues);
  scrubbed = scrubFoldedCase(scrubbed, derived.folded);
  return redactSecretsInText(scrubbed);
}

/** Values at least this long are also found in any ASCII case (`dd conv=ucase`, `tr a-z A-Z`). */
const MIN_FOLDED_VALUE = 8;

/** What `scrubOutput` derives from a list of values, once per list (a tool's is built at definition). */
interface DerivedForms {
  /** Each form whose cut parts are replaced at the output's ends, with the length such a part needs. */
  readonly edges: readonly EdgeForm[];
  /** The values of `MIN_FOLDED_VALUE` characters or more that hold an ASCII letter, lower-cased. */
  readonly folded: readonly string[];
}

const derivedCache = new WeakMap<readonly string[], DerivedForms>();

function derivedForms(secretValues: readonly string[]): DerivedForms {
  let derived = derivedCache.get(secretValues);
  if (derived !== undefined) return derived;
  const edges: EdgeForm[] = [];
  for (const value of secretValues) {
    edges.push(edgeForm(value, 1));
    // As a file in UTF-16 or UTF-32 shows it, either byte order (see `scrubUtf16Runs`).
    if (/[\u0100-\uffff]/.test(value)) continue;
    const chars = [...value.replace(/[\u0080-\u00ff]/g, '\ufffd')];
    for (const nuls of ['\0', '\0\0\0']) {
      edges.push(edgeForm(chars.map((char) => char + nuls).join(''), nuls.length + 1));
      edges.push(edgeForm(chars.map((char) => nuls + char).join(''), nuls.length + 1));
    }
  }
  const folded = secretValues
    // A value of letters alone (`postgres`) is a word output holds in other cases (`PostgreSQL`).
    .filter((value) => value.length >= MIN_FOLDED_VALUE && /[A-Za-z]/.test(value) && /[0-9]/.test(value))
    .map((value) => value.toLowerCase());
  derived = { edges, folded: [...new Set(folded)] };
  derivedCache.set(secretValues, derived);
  return derived;
}

// `sed -n l` wraps a long line with a `\` before the break: removed with it.
const LINE_BREAKS = /\\?\r?\n/g;
const BREAK_AFTER_BACKSLASH = /^\r?\n/;

/**
 * `text` with each known value that shows only once its line breaks (`\n`, `\r\n`) are removed
 * replaced, breaks included: `fold -w5` prints a value five characters a line, `base64` wraps its
 * encoding at 76 columns. Output with line breaks costs one copy without them and a search for each
 * value; the map back to the text is built only when one is found.
 */
function scrubBrokenLines(text: string, secretValues: readonly string[]): string {
  if (!text.includes('\n')) return text;
  const joined = text.replace(LINE_BREAKS, '');
  if (!secretValues.some((value) => value.length > 1 && joined.includes(value))) return text;
  const origin = new Uint32Array(joined.length);
  let length = 0;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code === 0x0a || (code === 0x0d && text.charCodeAt(index + 1) === 0x0a)) continue;
    if (code === 0x5c && BREAK_AFTER_BACKSLASH.test(text.slice(index + 1, index + 3))) continue;
    origin[length++] = index;
  }
  const ranges: Array<[number, number]> = [];
  for (const value of secretValues) {
    if (value.length < 2) continue;
    for (let at = joined.indexOf(value); at !== -1; at = joined.indexOf(value, at + value.length)) {
      ranges.push([origin[at]!, origin[at + value.length - 1]! + 1]);
    }
  }
  return replaceRanges(text, ranges);
}

/**
 * `text` with each of `folded` (long values, lower-cased) found in another case replaced: one
 * lower-cased copy of the output and a search for each value. A text whose lower case changes its
 * length (a few characters past ASCII, `İ`) is searched in a copy with only ASCII lower-cased.
 */
function scrubFoldedCase(text: string, folded: readonly string[]): string {
  if (folded.length === 0) return text;
  let lower = text.toLowerCase();
  if (lower.length !== text.length) lower = text.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());
  const ranges: Array<[number, number]> = [];
  for (const value of folded) {
    for (let at = lower.indexOf(value); at !== -1; at = lower.indexOf(value, at + value.length)) {
      ranges.push([at, at + value.length]);
    }
  }
  return replaceRanges(text, ranges);
}

/** `text` with each of `ranges` (sorted or not, overlapping or not) replaced by one `[REDACTED]` a run. */
function replaceRanges(text: string, ranges: Array<[number, number]>): string {
  if (ranges.length === 0) return text;
  ranges.sort((a, b) => a[0] - b[0]);
  let replaced = '';
  let copied = 0;
  for (const [start, end] of ranges) {
    if (end <= copied) continue;
    replaced += start >= copied ? `${text.slice(copied, start)}[REDACTED]` : '';
    copied = end;
  }
  return replaced + text.slice(copied);
}

/**
 * One escape as JSON and the languages' string literals write a character: a backslash before any
 * character but a letter or a digit (`\/`, `\"`, `\\`, `\'`; `printf %q`'s `\$`, `\ `, `\&`; Perl's
 * `\@`), `\n` and the other letters of the controls, an octal byte (`\044`), `\u0024` in either case,
 * `\u{24}`, `\U00000024`, `\x24`, `\X24` and Perl's `\x{24}`; as a URL does (`%2B`); or as HTML does
 * (`&#43;`, `&#x2B;`, `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`). The cheap test before the literal
 * view is built (`decodedView`).
 */
const LITERAL_ESCAPE =
  /\\(?:[^A-Za-z0-9]|[0-7bfnrtv]|u[0-9a-fA-F]{4}|u\{[0-9a-fA-F]{1,6}\}|U[0-9a-fA-F]{8}|[xX][0-9a-fA-F]{2}|x\{[0-9a-fA-F]{1,6}\})|%[0-9a-fA-F]{2}|&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|amp|lt|gt|quot|apos);/;
/** A CSS escape of a code point (`\24 `, `\000024`): the cheap test before the CSS view is built. */
const CSS_ESCAPE = /\\[0-9a-fA-F]/;
/** Any escape a decoded view reads (`LITERAL_ESCAPE`, `CSS_ESCAPE`): the test before `escapedValueRanges`. */
export const ESCAPE = new RegExp(`${LITERAL_ESCAPE.source}|${CSS_ESCAPE.source}`);

const BACKSLASH = 0x5c;
/** An escape's code point and length packed in one number: `length * CODE_POINTS + codePoint`. */
const CODE_POINTS = 0x200000;
const CONTROL_LETTERS: Readonly<Record<string, number>> = {
  b: 0x08,
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
  v: 0x0b,
};
const NAMED_ENTITIES: Readonly<Record<string, number>> = {
  amp: 0x26,
  lt: 0x3c,
  gt: 0x3e,
  quot: 0x22,
  apos: 0x27,
};
const ENTITY = /&(?:#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6})|(amp|lt|gt|quot|apos));/y;

interface DecodedView {
  readonly view: string;
  readonly starts: Uint32Array;
  readonly ends: Uint32Array;
}

/**
 * `text` as its escapes read, each decoded once, left to right, each of its UTF-16 code units with the
 * [start, end) of the text it came from: a character written as itself is its own range, an escaped
 * one that of its whole escape (both halves of a character outside the BMP, that of theirs).
 *
 * The literal view (`css` false) reads the string literals' backslash escapes (`literalEscapeAt`), a
 * URL's percent-encoding and HTML's character references; a run of `%XX` bytes, or of `\xXX` and octal
 * bytes (git's quoted paths, `printf %q`, C), is read as UTF-8 (`%C3%A4` and `\303\244` are `ä`), a
 * byte that starts no valid sequence as itself (`\xe4` is `ä` too). The CSS view (`css` true) reads
 * CSS's escapes only (`cssEscapeAt`): `\24 ` is `$` there but octal 24 and a space in the other.
 */
function decodedView(text: string, css: boolean): DecodedView {
  const units = new Uint16Array(text.length);
  const starts = new Uint32Array(text.length);
  const ends = new Uint32Array(text.length);
  let length = 0;
  const emit = (codePoint: number, start: number, end: number): void => {
    if (codePoint > 0xffff) {
      units[length] = 0xd800 + ((codePoint - 0x10000) >> 10);
      starts[length] = start;
      ends[length++] = end;
      units[length] = 0xdc00 + ((codePoint - 0x10000) & 0x3ff);
    } else {
      units[length] = codePoint;
    }
    starts[length] = start;
    ends[length++] = end;
  };
  for (let index = 0; index < text.length; ) {
    const code = text.charCodeAt(index);
    if (code === BACKSLASH) {
      if (!css && backslashByteAt(text, index) >= 0) {
        index = decodeByteRun(text, index, backslashByteAt, emit);
        continue;
      }
      const packed = css ? cssEscapeAt(text, index) : literalEscapeAt(text, index);
      if (packed >= 0) {
        const end = index + Math.floor(packed / CODE_POINTS);
        emit(packed % CODE_POINTS, index, end);
        index = end;
        continue;
      }
    } else if (css) {
      // CSS has backslash escapes only.
    } else if (code === 0x25 && percentByteAt(text, index) >= 0) {
      index = decodeByteRun(text, index, percentByteAt, emit);
      continue;
    } else if (code === 0x26) {
      ENTITY.lastIndex = index;
      const entity = ENTITY.exec(text);
      if (entity !== null) {
        const [whole, decimal, hex, name] = entity;
        const value =
          name !== undefined
            ? NAMED_ENTITIES[name]!
            : decimal !== undefined
              ? Number(decimal)
              : Number.parseInt(hex!, 16);
        if (value <= 0x10ffff) {
          emit(value, index, index + whole.length);
          index += whole.length;
          continue;
        }
      }
    }
    emit(code, index, index + 1);
    index += 1;
  }
  return {
    view: UTF16.decode(units.subarray(0, length)),
    starts: starts.subarray(0, length),
    ends: ends.subarray(0, length),
  };
}

/**
 * The escape at `index` (a backslash) as the string literals read it, packed (`CODE_POINTS`), or -1:
 * `\uXXXX`, `\u{X...}` (JavaScript, Rust, Swift: 1 to 6 digits), `\UXXXXXXXX` (Python, C), Perl's
 * `\x{X...}`, an octal escape past a byte (`\777`, Python), a control's letter (`\n`, `\t`, ...), and
 * a backslash before any other character but a letter or a digit, which stands for it (JSON's `\/`,
 * `\"`, `\\`; `printf %q`'s `\$`, `\ `, `\'`, `\&`; Data::Dumper's `\@`). Bytes (`\xXX`, octal up to
 * `\377`) are read in runs by `backslashByteAt`.
 */
function literalEscapeAt(text: string, index: number): number {
  const next = text.charCodeAt(index + 1);
  if (Number.isNaN(next)) return -1;
  if (next === 0x75 || next === 0x78) {
    // \u{...}, \x{...}
    if (text.charCodeAt(index + 2) === 0x7b) {
      const digits = hexDigits(text, index + 3, 6);
      const value =
        digits > 0 && text.charCodeAt(index + 3 + digits) === 0x7d ? hexValue(text, index + 3, digits) : -1;
      return value >= 0 && value <= 0x10ffff ? (digits + 4) * CODE_POINTS + value : -1;
    }
    const value = next === 0x75 ? hexValue(text, index + 2, 4) : -1;
    return value >= 0 ? 6 * CODE_POINTS + value : -1;
  }
  if (next === 0x55) {
    const value = hexValue(text, index + 2, 8);
    return value >= 0 && value <= 0x10ffff ? 10 * CODE_POINTS + value : -1;
  }
  if (isOctalDigit(next)) {
    // Only a value past a byte comes here (`backslashByteAt` takes the rest): three digits.
    const value = octalValue(text, index + 1);
    return value > 0xff ? 4 * CODE_POINTS + value : -1;
  }
  const control = CONTROL_LETTERS[text[index + 1]!];
  if (control !== undefined) return 2 * CODE_POINTS + control;
  return isAlphanumeric(next) ? -1 : 2 * CODE_POINTS + next;
}

/**
 * The CSS escape at `index` (a backslash), packed (`CODE_POINTS`), or -1: 1 to 6 hex digits and one
 * white space after them if there is one (`\24 `, `\000024`; `\r\n` is one), 0, a surrogate or a value
 * past U+10FFFF read as U+FFFD, as CSS reads them; or a backslash before any other character but a
 * line break, which stands for it (`\$`, `\g`).
 */
function cssEscapeAt(text: string, index: number): number {
  const digits = hexDigits(text, index + 1, 6);
  if (digits === 0) {
    const next = text.charCodeAt(index + 1);
    return Number.isNaN(next) || next === 0x0a || next === 0x0c || next === 0x0d
      ? -1
      : 2 * CODE_POINTS + next;
  }
  let value = hexValue(text, index + 1, digits);
  if (value === 0 || (value >= 0xd800 && value <= 0xdfff) || value > 0x10ffff) value = 0xfffd;
  let end = index + 1 + digits;
  const space = text.charCodeAt(end);
  if (space === 0x20 || space === 0x09 || space === 0x0a || space === 0x0c) end += 1;
  else if (space === 0x0d) end += text.charCodeAt(end + 1) === 0x0a ? 2 : 1;
  return (end - index) * CODE_POINTS + value;
}

/** A byte escape's byte and length packed in one number: `length * 256 + byte`, or -1. */
type ByteEscapeAt = (text: string, index: number) => number;

/** `%XX` at `index`: its byte, packed (`ByteEscapeAt`), or -1. */
const percentByteAt: ByteEscapeAt = (text, index) => {
  if (text.charCodeAt(index) !== 0x25) return -1;
  const value = hexValue(text, index + 1, 2);
  return value >= 0 ? 3 * 256 + value : -1;
};

/**
 * `\xXX` (or `\XXX`) or an octal escape of a byte (`\44`, `\044`, `\377`: up to three digits, as C
 * and git read them) at `index`: its byte, packed (`ByteEscapeAt`), or -1.
 */
const backslashByteAt: ByteEscapeAt = (text, index) => {
  if (text.charCodeAt(index) !== BACKSLASH) return -1;
  const next = text.charCodeAt(index + 1);
  if ((next | 0x20) === 0x78) {
    const value = hexValue(text, index + 2, 2);
    return value >= 0 ? 4 * 256 + value : -1;
  }
  if (!isOctalDigit(next)) return -1;
  let digits = 1;
  while (digits < 3 && isOctalDigit(text.charCodeAt(index + 1 + digits))) digits += 1;
  const value = octalValue(text, index + 1);
  return value <= 0xff ? (digits + 1) * 256 + value : -1;
};

/** The value of the up to three octal digits at `index` (at least one). */
function octalValue(text: string, index: number): number {
  let value = 0;
  for (let at = index; at < index + 3 && isOctalDigit(text.charCodeAt(at)); at += 1) {
    value = value * 8 + text.charCodeAt(at) - 0x30;
  }
  return value;
}

function isOctalDigit(code: number): boolean {
  return code >= 0x30 && code <= 0x37;
}

function isAlphanumeric(code: number): boolean {
  const lower = code | 0x20;
  return (code >= 0x30 && code <= 0x39) || (lower >= 0x61 && lower <= 0x7a);
}

/** How many hex digits (at most `most`) start at `index`. */
function hexDigits(text: string, index: number, most: number): number {
  let digits = 0;
  while (digits < most && hexValue(text, index + digits, 1) >= 0) digits += 1;
  return digits;
}

/** The value of `digits` hex digits at `index`, or -1. */
function hexValue(text: string, index: number, digits: number): number {
  if (index + digits > text.length) return -1;
  let value = 0;
  for (let at = index; at < index + digits; at += 1) {
    const code = text.charCodeAt(at);
    const lower = code | 0x20;
    const digit =
      code >= 0x30 && code <= 0x39 ? code - 0x30 : lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

/**
 * The run of byte escapes (`byteAt`: `%XX`, or `\xXX` and octal) at `index`, read as UTF-8 and emitted
 * a character at a time (a byte that starts no valid sequence as itself); returns the run's end.
 */
function decodeByteRun(
  text: string,
  index: number,
  byteAt: ByteEscapeAt,
  emit: (codePoint: number, start: number, end: number) => void,
): number {
  let at = index;
  for (let first = byteAt(text, at); first >= 0; first = byteAt(text, at)) {
    const lead = first & 0xff;
    const size = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 && lead < 0xe0 ? 2 : 1;
    let codePoint = size === 1 ? lead : lead & (0x7f >> size);
    let valid = lead < 0x80 || size > 1;
    let end = at + (first >> 8);
    for (let part = 1; valid && part < size; part += 1) {
      const next = byteAt(text, end);
      valid = next >= 0 && (next & 0xc0) === 0x80;
      codePoint = (codePoint << 6) | (next & 0x3f);
      end += next >> 8;
    }
    if (valid && size > 1 && (codePoint > 0x10ffff || (codePoint >= 0xd800 && codePoint <= 0xdfff)))
      valid = false;
    if (valid && codePoint < [0, 0, 0x80, 0x800, 0x10000][size]!) valid = false;
    if (valid) {
      emit(codePoint, at, end);
      at = end;
    } else {
      emit(lead, at, at + (first >> 8));
      at += first >> 8;
    }
  }
  return at;
}

/**
 * The [start, end) ranges of `text` that hold a known value written with escapes (`ESCAPE`): PHP's
 * `\/`, .NET's `\u002B`, Go's `\u0026`, Python's `p\u00e4ss`, `printf %q`'s `\$`, git's `\044`,
 * `\u{24}`, `\U00000024`, a URL's `%2B`, HTML's `&#43;`, CSS's `\24 `, each range the whole escaped
 * form, so nothing of it is left. Found in the decoded views of the text (`decodedView`: the literal
 * one when the text holds a `LITERAL_ESCAPE`, the CSS one when it holds a `CSS_ESCAPE`; one pass
 * each); a value written as itself is found by an exact match before this.
 */
export function escapedValueRanges(text: string, secretValues: readonly string[]): Array<[number, number]> {
  const found: Array<[number, number]> = [];
  if (LITERAL_ESCAPE.test(text)) findInView(decodedView(text, false), secretValues, found);
  if (CSS_ESCAPE.test(text)) findInView(decodedView(text, true), secretValues, found);
  return found;
}

/** Adds to `found` the range of the text each occurrence of a value in the decoded view came from. */
function findInView(
  { view, starts, ends }: DecodedView,
  secretValues: readonly string[],
  found: Array<[number, number]>,
): void {
  for (const value of secretValues) {
    if (value === '') continue;
    for (let at = view.indexOf(value); at !== -1; at = view.indexOf(value, at + value.length)) {
      found.push([starts[at]!, ends[at + value.length - 1]!]);
    }
  }
}

/** Fewest code units a run of UTF-16 in the output must hold (a NUL every other character) to be read as one. */
const MIN_UTF16_RUN = 4;

/**
 * `text` with the secrets of its UTF-16 runs replaced. A file written in UTF-16 (Windows tools,
 * PowerShell's `Out-File`, `.reg` exports) printed as it is reaches the model as `p\0a\0s\0s\0...`
 * (little-endian; `\0p\0a...` big-endian): neither a known value nor a secret pattern matches it. Each
 * run where every other character is NUL (at least `MIN_UTF16_RUN` of them, either byte order, a BOM
 * or none) is read as the text it shows and scrubbed as text is (the known values, then core's
 * patterns); the characters of each secret found, and the NULs between them, are replaced by
 * `[REDACTED]`. A character of U+0080 to U+00FF there is not valid UTF-8 (`E4 00` for `ä`) and was
 * decoded as U+FFFD: a known value's such characters match it. Runs once the text holds a NUL.
 */
function scrubUtf16Runs(text: string, secretValues: readonly string[]): string {
  // Every run's characters, one view, the runs a line break apart: core's patterns run once. `origin`
  // says where each character of it is in the text (-1: a break between runs).
  let shown = '';
  const origin: number[] = [];
  for (let nul = text.indexOf('\0'); nul !== -1; ) {
    let last = nul;
    while (last + 2 < text.length && text.charCodeAt(last + 2) === 0) last += 2;
    if ((last - nul) / 2 + 1 >= MIN_UTF16_RUN) {
      // The characters between the NULs, and one at each end: the run's first (little-endian) or last.
      const end = Math.min(text.length, last + 2);
      for (let at = nul > 0 ? nul - 1 : nul + 1; at < end; at += 2) {
        shown += text[at];
        origin.push(at);
      }
      shown += '\n';
      origin.push(-1);
    }
    nul = text.indexOf('\0', last + 1);
  }
  if (shown === '') return text;
  const values = secretValues.flatMap((value) => {
    // As the run shows them (see above); a value with a character past U+00FF breaks a run.
    const seen = value.replace(/[\u0080-\u00ff]/g, '\ufffd');
    if (/[\u0100-\uffff]/.test(value)) return [];
    // UTF-32 (`iconv -t UTF-32LE`) reads as UTF-16 with a NUL after (or before) each character: the
    // value with NULs between its characters, found in the view of either byte order.
    const wide = [...seen].join('\0');
    return seen === value ? [value, wide] : [value, seen, wide];
  });
  const ranges: Array<[number, number]> = [];
  for (const [from, to] of secretRanges(shown, values)) {
    // Each stretch of the range within one run: its first character to its last, NULs between.
    for (let at = from; at < to; ) {
      if (origin[at] === -1) {
        at += 1;
        continue;
      }
      let stretch = at;
      while (stretch + 1 < to && origin[stretch + 1] !== -1) stretch += 1;
      ranges.push([origin[at]!, origin[stretch]! + 1]);
      at = stretch + 1;
    }
  }
  return replaceRanges(text, ranges);
}

/**
 * `text` without the longest beginning of a secret value it ends with (when its end was cut) and the
 * longest end of one it starts with (when its start was cut): a part of a value the cut left. Runs
 * only on a cut output that held terminal controls.
 */
function dropCutSecrets(
  text: string,
  secretValues: readonly string[],
  cutStart: boolean,
  cutEnd: boolean,
): string {
  let from = 0;
  let to = text.length;
  for (const value of secretValues) {
    for (let length = Math.min(value.length - 1, text.length); length > 0; length -= 1) {
      if (cutEnd && text.length - length < to && text.endsWith(value.slice(0, length))) {
        to = text.length - length;
      }
      if (cutStart && length > from && text.startsWith(value.slice(value.length - length))) {
        from = length;
      }
    }
  }
  return from < to ? text.slice(from, to) : '';
}

import { readFileSync } from 'node:fs';
import { createSecretKeyMatcher, redactSecretsInText } from '@toolgate/core';
import { scrubHexDumps } from './hex-dumps.js';

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
 * `/proc/<server pid>/environ` is readable to it). Each also as JSON writes it (`\\` for `\`, `\"` for
 * `"`), the form a program's `--json` output or an env dump carries.
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
        values.add(JSON.stringify(value).slice(1, -1));
      }
    }
  }
  return Object.freeze([...values].sort((a, b) => b.length - a.length));
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
 * Terminal controls removed (`stripTerminalControls`), then the hex dumps scrubbed by what they encode
 * (`scrubHexDumps`), then every exact value of `secretValues` replaced by `[REDACTED]`, then core's
 * secret patterns. Controls go first: colour codes inside a line
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
  if (scrubbed !== text && (cutStart || cutEnd) && secretValues.length > 0) {
    scrubbed = dropCutSecrets(scrubbed, secretValues, cutStart, cutEnd);
  }
  // Before the values and patterns: one of them found in a dump's text column would leave its hex.
  scrubbed = scrubHexDumps(scrubbed, secretValues);
  for (const value of secretValues) {
    if (scrubbed.includes(value)) scrubbed = scrubbed.replaceAll(value, '[REDACTED]');
  }
  return redactSecretsInText(scrubbed);
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

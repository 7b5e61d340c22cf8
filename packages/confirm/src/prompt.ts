import { createSecretKeyMatcher, REDACTED, redactSecretsInText } from '@toolgate/core';

/**
 * Characters that could make a prompt say something other than what it shows: every control (the
 * renderer writes its own newlines between lines, so a line never holds one), every format character
 * (zero-width, bidirectional marks, embeddings, overrides and isolates, U+061C, the soft hyphen, the BOM,
 * tag characters that spell hidden text), line and paragraph separators, lone surrogates, variation
 * selectors and the characters that render as blank (U+034F, Hangul fillers).
 */
const UNSAFE =
  // biome-ignore lint/suspicious/noMisleadingCharacterClass: each invisible character is matched on its own, on purpose.
  /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\u034F\u115F\u1160\u180B-\u180F\u3164\uFE00-\uFE0F\uFFA0\u{E0100}-\u{E01EF}]/gu;

/**
 * Combining marks past the fourth on one character. A run of them stacks above or below the line and
 * paints over its neighbours (the argument lines above and below), so a value could hide another;
 * legitimate text (Vietnamese, Hebrew points, Indic and Tibetan stacks) carries fewer.
 */
const STACKED = /(?<=[\p{Mn}\p{Me}]{4})[\p{Mn}\p{Me}]/gu;

/**
 * Each unsafe character becomes U+FFFD, visibly: the person sees that something was there. Likewise
 * each combining mark past the fourth in a run, so no value paints over the lines around it.
 */
export function sanitise(text: string): string {
  return text.replace(UNSAFE, '\uFFFD').replace(STACKED, '\uFFFD');
}

/**
 * One line as the person sees it: sanitised, then secrets redacted in that line alone. Core redacts the
 * whole message again before a client or page shows it, and some secret patterns run to the end of the
 * text (a private key's BEGIN line without its END, `Bearer` and a token after a line break): over the
 * joined prompt, a value shaped like one (`-----BEGIN PRIVATE KEY-----`) would turn every line after it
 * (the amount, the recipient) into one `[REDACTED]`, silently. Redacted line by line, a match ends with
 * its line, so it hides no more than the value that looks like a secret, and the joined text holds
 * nothing for the later pass to take.
 */
function safeLine(line: string): string {
  const clean = sanitise(line);
  const redacted = redactSecretsInText(clean);
  // A secret found only once escapes are decoded (`\u0070assword=x`) comes back in decoded text, which
  // undoes the line's own `\u005b`/`\u003c` escaping: made inert again, markdown stays as typed.
  return redacted === clean ? clean : inert(redacted, true);
}

// What a markdown renderer would turn into a link, an image, HTML, an entity, a code span or a
// strikethrough. The prompt's lines are one paragraph to a renderer (single newlines), so `~~` in one
// value and `~~` in a later one would strike out every line between (the amount shown as cancelled).
// Emphasis (`*`, `_`) is left as typed: it changes how a line looks, not what it says.
const MARKDOWN_ACTIVE = /[[\]<>&`~]/g;

/**
 * Markdown's active characters written as JSON's `\u` escapes: the exact text still reads off the
 * prompt, and a client that renders it as markdown shows it as typed.
 */
function inert(text: string, keepRedacted = false): string {
  if (keepRedacted) {
    // The marker stays readable, unless a `(` or `:` after it would make it a link's text.
    return text.replace(REDACTED_OR_ACTIVE, (match) => (match.length > 1 ? match : escaped(match)));
  }
  return text.replace(MARKDOWN_ACTIVE, escaped);
}

/** One character of the Basic Multilingual Plane as JSON's `\u` escape. */
function escaped(char: string): string {
  return `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

const REDACTED_OR_ACTIVE = /\[REDACTED\](?![(:[])|[[\]<>&`~]/g;

/**
 * Letters of the right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, N'Ko, their presentation forms,
 * and the historic ones above U+10800). A renderer lays out digits that follow such a letter right to
 * left with it: `\u0640` before `1111 2222 3333` displays as `3333 2222 1111`, no control character
 * needed. In a value that holds a digit they are written as escapes, so every number reads in the order
 * that runs; a value without digits keeps its letters.
 */
// Format and control characters in these blocks (U+061C, U+06DD) are left to `sanitise`, which shows them.
const RIGHT_TO_LEFT =
  /(?![\p{Cf}\p{Cc}])[\u0590-\u08FF\uFB1D-\uFDFF\uFE70-\uFEFF\u{10800}-\u{10FFF}\u{1E800}-\u{1EFFF}]/gu;
const DIGIT = /\p{Nd}/u;

/** `text` with its right-to-left letters as escapes when it also holds a digit (see RIGHT_TO_LEFT). */
function ordered(text: string): string {
  if (!DIGIT.test(text)) return text;
  return text.replace(RIGHT_TO_LEFT, (char) => {
    const code = char.codePointAt(0)!;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : escaped(char);
  });
}

/** A value as JSON (quotes and escapes visible), inert to markdown. */
function valueText(value: unknown): string {
  return ordered(inert(JSON.stringify(value) ?? 'undefined'));
}

const MAX_VALUE_CHARS = 300;
/** The least a value is given when many arguments share a short prompt: a few characters and the cut's count. */
const MIN_VALUE_CHARS = 48;

/**
 * What the person is asked to approve: the effect sentence (or the tool's title), the tool and every
 * argument (as JSON, so a string's quotes and escapes are visible), sanitised and redacted line by line
 * (no value can start a line of its own, nor hide another's) and bounded. A cut says how much was not
 * shown, so nothing is hidden silently.
 */
export function renderPrompt(
  tool: { name: string; title: string | undefined },
  args: Readonly<Record<string, unknown>>,
  describe: ((args: Readonly<Record<string, unknown>>) => string) | undefined,
  maxChars: number,
): string {
  const lines = [
    (describe === undefined ? undefined : describeLine(describe, args)) ??
      `Run "${tool.title ?? tool.name}"?`,
    `Tool: ${tool.name}`,
  ];
  const names = Object.keys(args);
  lines.push(names.length === 0 ? 'Arguments: none' : 'Arguments:');
  const values = names.map((name) => valueText(args[name]));
  // The arguments share the room the prompt has left: a long value is cut to its share, so it cannot
  // push the arguments after it (the amount after a long note) past maxChars, out of the person's sight.
  let fixed = 0;
  for (const line of lines) fixed += line.length + 1;
  for (const name of names) fixed += name.length + 5; // `  ${name}: ` and the line's newline
  const limit = valueLimit(values, maxChars - fixed);
  for (let i = 0; i < names.length; i += 1) lines.push(`  ${names[i]}: ${cut(values[i]!, limit)}`);
  return cut(lines.map(safeLine).join('\n'), maxChars);
}

/**
 * The describe() sentence interpolates values the MODEL chose. Redacted as one line, a value could take
 * words it did not write: a payee `ACME Ltd password:` before the amount made core's `key: value` rule
 * take the amount (`Pay ACME Ltd password: [REDACTED] EUR`), a payee ending in `Bearer` the account
 * number after it. So describe() gets a redacted view of the arguments (every string, at any depth,
 * redacted on its own; a string under a secret-named key replaced whole, as core does for what it sends a
 * client; numbers, booleans and null as they are): a secret in an argument never reaches the sentence.
 * And a sentence that redaction would still change is not shown at all: its words were not all the ones
 * it was written with (a value reaching past its end, or a secret describe() added itself), and a
 * sentence that says less than what runs must not stand above the arguments. The prompt then opens with
 * the tool's title; the argument lines below show every value, each redacted on its own line.
 * @returns the line, or undefined when it cannot be shown whole
 */
function describeLine(
  describe: (args: Readonly<Record<string, unknown>>) => string,
  args: Readonly<Record<string, unknown>>,
): string | undefined {
  // Inert, so no comment, tag, entity or link it copies can hide the lines below or say more than runs
  // (the view's markers stay readable); held to a value's length, so a long one cannot push the tool and
  // the arguments out of the prompt.
  const line = sanitise(cut(ordered(inert(String(describe(redactedView(args))), true)), MAX_VALUE_CHARS));
  return redactSecretsInText(line) === line ? line : undefined;
}

const isSecretKey = createSecretKeyMatcher();
const MAX_VIEW_DEPTH = 32;

/** The arguments as describe() sees them: see describeLine. */
function redactedView(args: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const walk = (value: unknown, depth: number): unknown => {
    if (typeof value === 'string') return redactSecretsInText(value);
    if (typeof value !== 'object' || value === null || depth >= MAX_VIEW_DEPTH) return value;
    if (Array.isArray(value)) return value.map((item) => walk(item, depth + 1));
    const prototype = Object.getPrototypeOf(value);
    // A date or class instance stays as it is (describe may call its methods).
    if (prototype !== Object.prototype && prototype !== null) return value;
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      // A data property of its own: a `__proto__` key stays a key.
      Object.defineProperty(copy, key, {
        value: typeof item === 'string' && item !== '' && isSecretKey(key) ? REDACTED : walk(item, depth + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return copy;
  };
  return walk(args, 0) as Record<string, unknown>;
}

/**
 * The longest a value is shown so that every argument fits in `room` characters: values that fit their
 * equal share are shown whole and leave the rest to the longer ones, which are cut to what is left,
 * shared equally (never past MAX_VALUE_CHARS; never under MIN_VALUE_CHARS, where then the whole
 * prompt's cut says what did not fit). Sorting is paid only when asking the person, never on a call
 * that carries its confirmation.
 */
function valueLimit(values: readonly string[], room: number): number {
  const lengths = values.map((value) => value.length).sort((a, b) => a - b);
  let left = room;
  for (let i = 0; i < lengths.length; i += 1) {
    const share = Math.floor(left / (lengths.length - i));
    if (lengths[i]! > share) return Math.min(MAX_VALUE_CHARS, Math.max(MIN_VALUE_CHARS, share));
    left -= lengths[i]!;
  }
  return MAX_VALUE_CHARS;
}

function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const note = ` … (${text.length - max} more characters not shown)`;
  let end = Math.max(0, max - note.length);
  // Never end on half a surrogate pair: it would show as a broken character.
  if (end > 0 && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
  return text.slice(0, end) + note;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

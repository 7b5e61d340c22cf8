import {
  createSecretKeyMatcher,
  createSecretRedactor,
  REDACTED,
  redactSecretsInText,
  SPLIT_SECRET_OPENER,
} from '@toolgate/core';

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
 *
 * The prompt is a fixed point of what core does to it before a person reads it (see `coreView`): core
 * redacts the whole message again (the form and URL elicitation's message, the page's copy, the two-step
 * answer's message and `_meta` prompt), and a pass that changed it could return it with every escape
 * decoded (markdown and HTML live again) or take lines across a line break. So the joined prompt is
 * read as core reads it; when core would change it, the changed text is made inert again and read once
 * more (see `settle`), as long as every line keeps its place (the headline, `Tool:`, `Arguments:`, and
 * each argument's name); otherwise the headline falls back to the title and the arguments are added
 * one by one, a line that cannot be shown as it is replaced by its name and a marker (`NOT_SHOWN`).
 * Nothing is cut after that: every argument keeps its line.
 */
export function renderPrompt(
  tool: { name: string; title: string | undefined },
  args: Readonly<Record<string, unknown>>,
  describe: ((args: Readonly<Record<string, unknown>>) => string) | undefined,
  maxChars: number,
): string {
  const sentence = describe === undefined ? undefined : describeLine(describe, args);
  const title = safeLine(cut(`Run "${tool.title ?? tool.name}"?`, MAX_VALUE_CHARS));
  const names = Object.keys(args);
  const tail = [safeLine(`Tool: ${tool.name}`), names.length === 0 ? 'Arguments: none' : 'Arguments:'];
  const head = [sentence === undefined ? title : safeLine(sentence), ...tail];
  const prefixes = names.map((name) => `  ${inert(sanitise(name), true)}: `);
  const argLines = argumentLines(names, prefixes, args, maxChars - lengthOf(head));
  const whole = settle([...head, ...argLines], prefixes);
  if (whole !== undefined) return whole.join('\n');
  // Core would change what the lines say together: the title (not the model's words) heads the prompt,
  // and each argument is added only as far as core leaves the prompt as it is.
  let shown = settle([title, ...tail], prefixes) ?? [PLAIN_HEADLINE, ...tail];
  for (let i = 0; i < argLines.length; i += 1) {
    shown = settle([...shown, argLines[i]!], prefixes) ??
      settle([...shown, prefixes[i] + NOT_SHOWN], prefixes) ?? [...shown, prefixes[i] + NOT_SHOWN];
  }
  if (coreView(shown.join('\n')) === shown.join('\n')) return shown.join('\n');
  // Left only when the tool's or an argument's name is what core changes (names are the tool's own,
  // never the model's): every argument's name, none of the values.
  return [PLAIN_HEADLINE, ...tail.slice(1), ...prefixes.map((prefix) => prefix + NOT_SHOWN)].join('\n');
}

/** The headline when neither the sentence nor the title can be shown as written. */
const PLAIN_HEADLINE = 'Run this tool?';

/**
 * An argument whose line core would change beside the others: its name stays in sight, its value does
 * not (so no later pass decides what it says). `[REDACTED]` first, so no `key: value` rule takes the
 * words after the name (`password: (`...).
 */
const NOT_SHOWN = '[REDACTED] (not shown: beside the other lines it would read as a secret)';

function lengthOf(lines: readonly string[]): number {
  let length = 0;
  for (const line of lines) length += line.length + 1;
  return length;
}

/**
 * Each argument's line as the person sees it: the value as JSON, made inert, redacted in its line, and
 * only then cut to its share of `room`. The share is reckoned from what redaction left (`pin=1,` shown
 * as `pin=[REDACTED],` is longer), so no value can push the arguments after it out of the prompt; when
 * even the least share does not fit, values keep only the cut's count, and the prompt runs past
 * `maxPromptChars` by what the arguments' names need (they are the tool's own, bounded by its schema).
 */
function argumentLines(
  names: readonly string[],
  prefixes: readonly string[],
  args: Readonly<Record<string, unknown>>,
  room: number,
): string[] {
  // Read up to the prompt's own size (a longer value cannot be shown anyway); what lies past it counts.
  const read = Math.max(room, MAX_VALUE_CHARS) + MAX_VALUE_CHARS;
  const values: { text: string; hidden: number }[] = [];
  let fixed = 0;
  for (let i = 0; i < names.length; i += 1) {
    const full = valueText(args[names[i]!]);
    const end = full.length > read ? cutPoint(full, read) : full.length;
    const line = safeLine(prefixes[i] + full.slice(0, end));
    // A name that redaction took into a match (`token: ` before a value) keeps its value in that match.
    const text = line.startsWith(prefixes[i]!) ? line.slice(prefixes[i]!.length) : NOT_SHOWN;
    values.push({ text, hidden: text === NOT_SHOWN ? 0 : full.length - end });
    fixed += prefixes[i]!.length + 1;
  }
  const sizes = values.map(({ text, hidden }) => text.length + hidden);
  let limit = valueLimit(sizes, room - fixed, MIN_VALUE_CHARS);
  let total = fixed;
  for (const size of sizes) total += Math.min(size, limit);
  // The least share did not fit: values keep their cut's count only, never an argument's line.
  if (total > room) limit = valueLimit(sizes, room - fixed, 0);
  return values.map(({ text, hidden }, i) => shownValue(prefixes[i]!, text, hidden, limit));
}

/**
 * `prefix` and `text` (with `hidden` more characters never read) in at most `max` characters for the
 * value, or with the cut's count. A cut that leaves the line reading differently to core (`pin=` just
 * before ` … (`, which a `key=value` rule then takes) moves back a word, a few times at most.
 */
function shownValue(prefix: string, text: string, hidden: number, max: number): string {
  if ((hidden === 0 && text.length <= max) || text === NOT_SHOWN) return prefix + text;
  const note = (count: number): string => ` … (${count} more characters not shown)`;
  let end = cutPoint(text, Math.max(0, Math.min(text.length, max - note(text.length + hidden).length)));
  let line = '';
  for (let tries = 0; tries < 4; tries += 1) {
    line = prefix + text.slice(0, end) + note(text.length - end + hidden);
    if (end === 0 || redactSecretsInText(line) === line) return line;
    end = cutPoint(text, Math.max(0, ...WORD_END.map((char) => text.lastIndexOf(char, end - 2) + 1)));
  }
  return line;
}

const WORD_END = [' ', ',', ';', '&', '"'];

/**
 * Where to cut `text` at or before `end`: never inside a `[REDACTED]` marker, a `\u` escape or a
 * surrogate pair (half of one reads as something else, or as a broken character).
 */
function cutPoint(text: string, end: number): number {
  let at = end;
  const from = Math.max(0, at - 12);
  for (const match of text.slice(from, at + 12).matchAll(UNCUT)) {
    const start = from + match.index;
    if (start < at && at < start + match[0].length) {
      at = start;
      break;
    }
  }
  if (at > 0 && isHighSurrogate(text.charCodeAt(at - 1))) at -= 1;
  return at;
}

const UNCUT = /\[REDACTED\]|\\u\{[0-9a-f]{1,6}\}|\\u[0-9a-f]{4}/g;

/** What a two-step answer's message says before the prompt (confirm.ts, `required`). */
export const TWO_STEP_MESSAGE = 'Confirmation required. Show the user: ';
// The rest of a two-step answer's `_meta` entry, in its order: core redacts the entry as one value,
// whose strings it also reads joined across line breaks (a secret split over sibling strings).
const META_STAND_IN = {
  status: 'confirmation_required',
  confirmation: `c1.${(2 ** 41).toString(36)}.${'0'.repeat(32)}.${'0'.repeat(64)}`,
  expiresAt: new Date(0).toISOString(),
};
const redactValue = createSecretRedactor();

/**
 * What a person is shown of `prompt` after core, or undefined when that no longer holds the prompt.
 * Mirrors core exactly: `redactSecretsInText` over an elicitation's message (form and URL mode, and the
 * page's copy, which url-mode stores redacted the same way); over the two-step answer's message
 * (`TWO_STEP_MESSAGE` + prompt); and `createSecretRedactor()` over the `_meta` entry, whose prompt is
 * then redacted once more (the boundary's `scrubText`), which leaves a fixed point as it is.
 */
function coreView(prompt: string): string | undefined {
  const redacted = redactSecretsInText(prompt);
  if (redacted !== prompt) return redacted;
  const message = TWO_STEP_MESSAGE + prompt;
  const answered = redactSecretsInText(message);
  if (answered !== message) {
    return answered.startsWith(TWO_STEP_MESSAGE) ? answered.slice(TWO_STEP_MESSAGE.length) : undefined;
  }
  // Only a string that may open a split secret makes core read the entry's strings joined.
  if (SPLIT_SECRET_OPENER.test(prompt)) {
    const entry = redactValue({ ...META_STAND_IN, prompt }) as { prompt?: unknown };
    if (entry.prompt !== prompt) return typeof entry.prompt === 'string' ? entry.prompt : undefined;
  }
  return prompt;
}

/** How often the prompt is made inert again after core's pass before it is given up as unsettled. */
const SETTLE_ROUNDS = 3;

/** The headline, `Tool:` and `Arguments:`: lines core's pass must leave exactly as written. */
const HEADER_LINES = 3;

/**
 * `lines` (the three header lines, then argument lines, the j-th starting with `prefixes[j]`) as a
 * fixed point of `coreView`, or undefined. When core would change the joined text, what it makes of it
 * is taken (its redaction, with the escapes decoded when the redaction was found only decoded) and made
 * inert again, line by line, then read once more, at most SETTLE_ROUNDS times. That holds only while
 * every line keeps its place: as many lines, the header lines exactly as written, each argument's line
 * starting with its name. A match across lines that eats one of them, or the start of one, gives
 * undefined: the caller then shows less rather than let a later pass decide what a line says.
 */
function settle(lines: readonly string[], prefixes: readonly string[]): string[] | undefined {
  let current = lines;
  for (let round = 0; ; round += 1) {
    const text = current.join('\n');
    const seen = coreView(text);
    if (seen === text) return [...current];
    if (seen === undefined || round === SETTLE_ROUNDS) return undefined;
    const next = seen.split('\n');
    if (next.length !== lines.length) return undefined;
    for (let i = 0; i < next.length; i += 1) {
      const line = next[i]!;
      if (i < HEADER_LINES) {
        // Kept only as written: at most the escapes it was made inert with came back decoded.
        if (line !== lines[i] && inert(line, true) !== lines[i]) return undefined;
        next[i] = lines[i]!;
      } else {
        next[i] = inert(line, true);
        if (!next[i]!.startsWith(prefixes[i - HEADER_LINES]!)) return undefined;
      }
    }
    current = next;
  }
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
 * The longest a value is shown so that every argument fits in `room` characters, from the lengths of
 * the values as they are shown: values that fit their equal share are shown whole and leave the rest to
 * the longer ones, which are cut to what is left, shared equally (never past MAX_VALUE_CHARS; never
 * under `least`). Sorting is paid only when asking the person, never on a call that carries its
 * confirmation.
 */
function valueLimit(sizes: readonly number[], room: number, least: number): number {
  const lengths = [...sizes].sort((a, b) => a - b);
  let left = room;
  for (let i = 0; i < lengths.length; i += 1) {
    const share = Math.floor(left / (lengths.length - i));
    if (lengths[i]! > share) return Math.min(MAX_VALUE_CHARS, Math.max(least, share));
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

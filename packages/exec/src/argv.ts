import { type ArgSpec, isArgValue } from './arg-spec.js';
import { ArgumentRefusal } from './argument-refusal.js';

/** An argv entry as a declaration may return it: skipped when false, null or undefined. */
export type ArgEntry = ArgSpec | false | null | undefined;

// NUL ends a C string early; line breaks split records in programs that read argv as lines.
const CONTROL = /[\0\n\r]/;
// A short option alone: with its inline value emptied, it takes the next element as that value.
const SHORT_FLAG = /^-[A-Za-z0-9]$/;

const DASH_HINT =
  'Values are passed to the program as data and may not start with "-" (that would read as an option). Remove the leading "-".';
const CONTROL_HINT = 'Remove NUL bytes and line breaks from the value and call again.';
const EMPTY_HINT = 'This option needs a value: pass a non-empty one.';
// Linux refuses one argv string past 32 pages with its NUL (MAX_ARG_STRLEN; 128 KiB with 4 KiB pages):
// the spawn fails with E2BIG whatever maxArgvBytes allows.
const MAX_ELEMENT_BYTES = 128 * 1024;
// How deep the input is indexed and probed; deeper input is refused (see `indexInputTexts`).
const MAX_INPUT_DEPTH = 32;

/** The declaration's entries for the probe inputs (`probeInputOf`, `dashlessInputOf`); undefined when one could not run. */
export interface ArgProbes {
  readonly filled?: readonly ArgEntry[] | undefined;
  readonly dashless?: readonly ArgEntry[] | undefined;
}

/**
 * Builds the argv array for one call and enforces the rules every element obeys:
 * - no element contains NUL, `\n` or `\r`;
 * - a model value (`value()`, `option()`, or a plain string whose leading `-` the model supplied, see
 *   `modelLedDash`) starting with `-` is refused, unless its position allows it (`allowDash`) or it
 *   comes after the declaration's own `--` (the bare `-`, read as stdin/stdout by many programs even
 *   as an operand, still needs `allowDash`);
 * - an inline short option (`-e` + value) never stands alone: it would take the next element;
 * - no element is longer than the system takes for one argument (128 KiB with its NUL);
 * - the total size stays within `maxArgvBytes`.
 * `input` is the call's validated arguments; `undefined` for `safeExec`, where positions name the field.
 * `probes` are the declaration's answers for the probe inputs of `input`.
 */
export function buildArgv(
  entries: readonly ArgEntry[],
  input: unknown,
  maxArgvBytes: number,
  probes: ArgProbes = {},
): string[] {
  if (!Array.isArray(entries)) throw new TypeError('args must return an array');
  const inputTexts = indexInputTexts(input);
  // Positions line up only when a probe built as many entries; otherwise the content rule decides.
  const filled = alignedWith(entries, probes.filled);
  const dashless = alignedWith(entries, probes.dashless);
  const argv: string[] = [];
  let afterSeparator = false;
  entries.forEach((entry, index) => {
    if (entry === false || entry === null || entry === undefined) return;
    if (typeof entry === 'string') {
      const fromInput = inputTexts.get(entry);
      refuseControl(entry, fromInput ?? findContainingPath(entry, inputTexts) ?? `argv[${index}]`);
      if (fromInput !== undefined) {
        // An untagged value from the input: checked as if it were value().
        refuseDash(entry, fromInput, afterSeparator, false);
      } else if (
        entry.startsWith('-') &&
        modelLedDash(entry, [filled?.[index], dashless?.[index]], inputTexts)
      ) {
        // The declaration transformed a model value (trim, template, concatenation) into an element
        // that now starts with "-": the FINAL element is what the program parses, so it is checked.
        refuseDash(entry, findLeadingPath(entry, inputTexts) ?? `argv[${index}]`, afterSeparator, false);
      } else if (emptiedShortFlag(entry, filled?.[index])) {
        refuseEmpty(inputTexts.get('') ?? `argv[${index}]`);
      } else if (entry === '--') {
        afterSeparator = true;
      }
      argv.push(entry);
      return;
    }
    if (!isArgValue(entry)) {
      throw new TypeError(
        `args[${index}] must be a string, value() or option(); got ${Array.isArray(entry) ? 'an array' : typeof entry}`,
      );
    }
    const path = inputTexts.get(entry.text) ?? `argv[${index}]`;
    refuseControl(entry.text, path);
    refuseDash(entry.text, path, afterSeparator, entry.allowDash);
    if (entry.flag === undefined) {
      argv.push(entry.text);
    } else if (afterSeparator) {
      throw new TypeError(
        `args[${index}]: option(${entry.flag}) after "--" would be an operand, not an option`,
      );
    } else if (entry.inline) {
      if (entry.text === '' && !entry.flag.startsWith('--')) refuseEmpty(path);
      argv.push(entry.flag.startsWith('--') ? `${entry.flag}=${entry.text}` : `${entry.flag}${entry.text}`);
    } else {
      argv.push(entry.flag, entry.text);
    }
  });
  let bytes = 0;
  let longest = 0;
  for (const element of argv) {
    const size = Buffer.byteLength(element) + 1;
    if (size > longest) longest = size;
    bytes += size;
  }
  if (bytes > maxArgvBytes) {
    throw new ArgumentRefusal(
      `The arguments are too long (${bytes} bytes; at most ${maxArgvBytes}).`,
      'Pass shorter values.',
      { path: '(arguments)', expected: `at most ${maxArgvBytes} bytes in all` },
    );
  }
  // Reached only where maxArgvBytes was raised past the default.
  if (longest > MAX_ELEMENT_BYTES) refuseLongElement(argv, inputTexts);
  return argv;
}

function refuseControl(text: string, path: string): void {
  if (CONTROL.test(text)) {
    throw new ArgumentRefusal(`Argument ${path} contains a NUL byte or a line break.`, CONTROL_HINT, {
      path,
      expected: 'text without NUL bytes or line breaks',
    });
  }
}

function refuseDash(text: string, path: string, afterSeparator: boolean, allowDash: boolean): void {
  if (allowDash || !text.startsWith('-')) return;
  if (afterSeparator && text !== '-') return;
  throw new ArgumentRefusal(`Argument ${path} may not start with "-".`, DASH_HINT, {
    path,
    expected: 'a value that does not start with "-"',
  });
}

function refuseLongElement(argv: readonly string[], inputTexts: Map<string, string>): never {
  // Only on this failure path: the field is the longest input value the element holds.
  const sizes = argv.map((candidate) => Buffer.byteLength(candidate) + 1);
  const size = Math.max(...sizes);
  const element = argv[sizes.indexOf(size)]!;
  let path = '(arguments)';
  let longest = 0;
  for (const [text, textPath] of inputTexts) {
    if (text.length > longest && element.includes(text)) {
      path = textPath;
      longest = text.length;
    }
  }
  const most = MAX_ELEMENT_BYTES - 1;
  throw new ArgumentRefusal(
    `Argument ${path} is too long (${size - 1} bytes; at most ${most} in one argument).`,
    'Pass a shorter value.',
    { path, expected: `at most ${most} bytes` },
  );
}

function refuseEmpty(path: string): void {
  throw new ArgumentRefusal(`Argument ${path} may not be empty.`, EMPTY_HINT, {
    path,
    expected: 'a non-empty value',
  });
}

function refuseDepth(path: string): never {
  throw new ArgumentRefusal(
    `Argument ${path || '(arguments)'} is nested too deeply.`,
    `Pass flatter values: at most ${MAX_INPUT_DEPTH} levels of nesting.`,
    { path: path || '(arguments)', expected: `at most ${MAX_INPUT_DEPTH} levels of nesting` },
  );
}

function alignedWith(
  entries: readonly ArgEntry[],
  probe: readonly ArgEntry[] | undefined,
): readonly ArgEntry[] | undefined {
  return Array.isArray(probe) && probe.length === entries.length ? probe : undefined;
}

function textOf(entry: ArgEntry | undefined): string | undefined {
  return typeof entry === 'string' ? entry : isArgValue(entry) ? entry.text : undefined;
}

/**
 * Whether the leading `-` of an untagged element came from the model rather than the declaration.
 * The declaration is run again on two probe inputs: every string `x` and every number 1
 * (`probeInputOf`), and the real input with every `-` of a string written `x` (`dashlessInputOf`,
 * which takes the same branches as the real call). An element whose counterpart in either probe does
 * not start with `-` got its dash from a model value, whatever the declaration did to that value on
 * the way (`.trim()`, `${input.name}.txt`, `a + b`, a branch on another field). A declaration's own
 * prefix (`--note=${input.note}`) starts with `-` in both probes and is left alone. When neither
 * probe lines up (it threw, or built a different number of entries), the content rule decides: the
 * element starts with a trimmed input value that itself starts with `-`.
 */
function modelLedDash(
  element: string,
  probed: readonly (ArgEntry | undefined)[],
  inputTexts: Map<string, string>,
): boolean {
  const texts = probed.map(textOf).filter((text) => text !== undefined);
  if (texts.length > 0) return texts.some((text) => !text.startsWith('-'));
  return findLeadingPath(element, inputTexts) !== undefined;
}

/** A bare short flag whose probe counterpart carried a value behind it (`-e${input.pattern}`, emptied). */
function emptiedShortFlag(element: string, probed: ArgEntry | undefined): boolean {
  const text = textOf(probed);
  return (
    SHORT_FLAG.test(element) && text !== undefined && text.length > element.length && text.startsWith(element)
  );
}

/** The path of an input value, trimmed, that starts with `-` and with which `element` starts. */
function findLeadingPath(element: string, inputTexts: Map<string, string>): string | undefined {
  for (const [text, path] of inputTexts) {
    const trimmed = text.trim();
    if (trimmed.startsWith('-') && element.startsWith(trimmed)) return path;
  }
  return undefined;
}

/**
 * The probe input for `modelLedDash`: the same shape with every string replaced by `x` and every
 * number by 1, so no probe value starts with `-`.
 */
export function probeInputOf(input: unknown, depth = 0): unknown {
  if (typeof input === 'string') return 'x';
  if (typeof input === 'number') return 1;
  if (typeof input === 'bigint') return 1n;
  if (typeof input !== 'object' || input === null || depth > MAX_INPUT_DEPTH) return input;
  if (Array.isArray(input)) return input.map((item) => probeInputOf(item, depth + 1));
  return Object.fromEntries(
    Object.entries(input).map(([key, child]) => [key, probeInputOf(child, depth + 1)]),
  );
}

/**
 * Every way an input string may spell a `-` that a common decoder in a declaration turns into one: the
 * `-` itself; U+FE63 and U+FF0D, which NFKC folds to it; percent-encoding (`%2D`: `decodeURIComponent`,
 * `URLSearchParams`); JSON and JavaScript escapes (`\u002d`, `\u{2d}`, `\x2d`: `JSON.parse`); HTML
 * character references (`&#45;`, `&#x2d;`). A declaration that decodes a model value (a query parameter
 * of a URL, a field of a JSON text) makes the filled probe throw (`x` is no URL and no JSON), so the
 * dashless probe alone decides; a dash spelled in a form it kept would come out of the decoder in both
 * runs and read as the declaration's own. Base64 is not recognised (any text may be base64): tag such
 * a value with `value()`.
 */
const SPELLED_DASH = /-|\uFE63|\uFF0D|%2d|\\u002d|\\u\{0*2d\}|\\x2d|&#0*45;|&#x0*2d;/gi;

/**
 * The dashless probe input for `modelLedDash`: the real input with every `-` of a string, however it
 * is spelled (`SPELLED_DASH`), written `x`, and a key's leading dashes too (a record the model fills has
 * keys of its choosing; a schema's own keys do not start with `-` and stay readable). Each spelling
 * becomes one `x`, which every decoder reads as it was written, so the probe takes the same branches
 * as the real call. Numbers stay: a negative one is caught by the other probe.
 */
export function dashlessInputOf(input: unknown, depth = 0): unknown {
  if (typeof input === 'string') return input.replace(SPELLED_DASH, 'x');
  if (typeof input !== 'object' || input === null || depth > MAX_INPUT_DEPTH) return input;
  if (Array.isArray(input)) return input.map((item) => dashlessInputOf(item, depth + 1));
  return Object.fromEntries(
    Object.entries(input).map(([key, child]) => [
      key.replace(/^(\s*)(-+)/, (_, space: string, dashes: string) => space + 'x'.repeat(dashes.length)),
      dashlessInputOf(child, depth + 1),
    ]),
  );
}

/**
 * Every string and number in the input, and every key (the model chooses a record's keys), as text,
 * with the dotted path of its first occurrence; values take precedence over keys.
 */
function indexInputTexts(input: unknown): Map<string, string> {
  const texts = new Map<string, string>();
  const keys: Array<[string, string]> = [];
  const walk = (node: unknown, path: string, depth: number): void => {
    if (typeof node === 'string' || typeof node === 'number' || typeof node === 'bigint') {
      const text = String(node);
      if (!texts.has(text)) texts.set(text, path || '(arguments)');
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    // Deeper than the probes look (`probeInputOf`, `dashlessInputOf` stop at the same depth): a value
    // hidden there would be neither indexed nor probed, so a "-" it carries would pass unseen.
    if (depth > MAX_INPUT_DEPTH) refuseDepth(path);
    for (const [key, child] of Object.entries(node)) {
      const childPath = path ? `${path}.${key}` : key;
      if (!Array.isArray(node)) keys.push([key, childPath]);
      walk(child, childPath, depth + 1);
    }
  };
  walk(input, '', 0);
  for (const [key, path] of keys) if (!texts.has(key)) texts.set(key, path);
  return texts;
}

/** The path of an input value with a control character that a declaration built into a longer element. */
function findContainingPath(element: string, inputTexts: Map<string, string>): string | undefined {
  if (!CONTROL.test(element)) return undefined;
  for (const [text, path] of inputTexts) {
    if (CONTROL.test(text) && element.includes(text)) return path;
  }
  return undefined;
}

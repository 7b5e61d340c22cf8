import { type ArgSpec, isArgValue } from './arg-spec.js';
import { ArgumentRefusal } from './argument-refusal.js';

/** An argv entry as a declaration may return it: skipped when false, null or undefined. */
export type ArgEntry = ArgSpec | false | null | undefined;

// NUL ends a C string early; line breaks split records in programs that read argv as lines.
const CONTROL = /[\0\n\r]/;
// A short option, or a cluster of them, alone: with its inline value emptied, the last takes the next element.
const SHORT_FLAGS = /^-[A-Za-z0-9]+$/;

const DASH_HINT =
  'Values are passed to the program as data and may not start with "-" (that would read as an option). Remove the leading "-".';
const CONTROL_HINT = 'Remove NUL bytes and line breaks from the value and call again.';
const EMPTY_HINT = 'This option needs a value: pass a non-empty one.';
// Linux refuses one argv string past 32 pages with its NUL (MAX_ARG_STRLEN; 128 KiB with 4 KiB pages):
// the spawn fails with E2BIG whatever maxArgvBytes allows.
const MAX_ELEMENT_BYTES = 128 * 1024;
// How deep the input is indexed and probed; deeper input is refused (see `indexInputTexts`).
const MAX_INPUT_DEPTH = 32;

/** The declaration's entries for one probe input; undefined when it threw or returned no array. */
type ProbeRun = readonly ArgEntry[] | undefined;

/** The first value or key of a probed field that starts with `-` (trimmed, in a spelling `LEADING_DASH` knows). */
export interface DashLeaf {
  readonly path: string;
  readonly text: string;
  /** A key of a record (a probe that keeps keys does not settle one). */
  readonly key: boolean;
}

/** One field of the input probed alone (`probeDeclaration`): its path and the declaration's runs. */
export interface FieldProbe {
  readonly path: string;
  readonly runs: readonly ProbeRun[];
  /** Per run: whether its variant leaves nothing a dash could come from (`fieldVariants`). */
  readonly settling: readonly boolean[];
  /** Per run: whether its variant may add text behind a value (strings, fills), for `emptiedShortFlag`. */
  readonly extending: readonly boolean[];
  /** Per run: whether its variant filled a field the input left empty (`[]`, `{}`, absent). */
  readonly filling: readonly boolean[];
  /** Per run: whether its variant wrote each of the field's strings `x` (nothing of the model's text left). */
  readonly clean?: readonly boolean[];
  /** Whether the field holds keys of records in the real input (no `x` probe renames one led by a letter). */
  readonly keyed?: () => boolean;
  /**
   * The declaration's run with every letter and digit of the field changed, its punctuation kept
   * (`movedOf`); run only when a dash element is judged against it (`modelLedDash`), once.
   */
  readonly moved?: () => ProbeRun | typeof NOTHING_MOVED;
  /** The declaration's run with only the field's digits changed (`renumberedOf`), run once when asked. */
  readonly renumbered?: () => ProbeRun;
  /**
   * For a number field: `-` and its value, an element a declaration may write itself (`` `-${input.n}` ``);
   * a probe of the number that changes it to no number (`all` for 0) is no evidence against it.
   */
  readonly ownDash?: string;
  readonly dash?: DashLeaf;
  /** For a field holding a dash: the run with it changed but still that kind of value (`sameFormOf`). */
  readonly same?: ProbeRun;
}

/** `FieldProbe.moved` of a field with no letter or digit to change. */
export const NOTHING_MOVED = Symbol('nothing moved');

/** The declaration's answers for the probe inputs of a call (`probeDeclaration`). */
export interface ArgProbes {
  /** Every string `x`, every number 1 (`probeInputOf`). */
  readonly filled?: ProbeRun;
  /** Every dash written `x`, every number its absolute value (`dashlessInputOf`). */
  readonly dashless?: ProbeRun;
  /** Each field of the input changed alone, the rest real. */
  readonly fields?: readonly FieldProbe[];
  /** The declaration's source text (`String(args)`): a literal it holds is its own (`modelLedDash`). */
  readonly source?: string;
}

/**
 * Builds the argv array for one call and enforces the rules every element obeys:
 * - no element contains NUL, `\n` or `\r`;
 * - a model value (`value()`, `option()`, or a plain string whose leading `-` the model supplied, see
 *   `modelLedDash`) starting with `-` is refused, unless its position allows it (`allowDash`) or it
 *   comes after the declaration's own `--` (the bare `-`, read as stdin/stdout by many programs even
 *   as an operand, still needs `allowDash`);
 * - an inline short option (`-e` + value, `-ie` + value) never stands alone: it would take the next
 *   element (`emptiedShortFlag`);
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
  // Positions line up only when a probe built as many entries; the rest gives no evidence.
  const evidence = evidenceOf(entries, probes);
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
      } else if (entry.startsWith('-')) {
        // The declaration may have transformed a model value (trim, template, slug, arithmetic) into an
        // element that now starts with "-": the FINAL element is what the program parses, so it is checked.
        const led = modelLedDash(entry, index, evidence);
        const emptied = led === undefined ? emptiedShortFlag(entry, index, evidence) : undefined;
        if (led !== undefined) {
          const path = findLeadingPath(entry, inputTexts) ?? led ?? `argv[${index}]`;
          refuseDash(entry, path, afterSeparator, false);
        } else if (emptied !== undefined) {
          refuseEmpty(emptied ?? inputTexts.get('') ?? `argv[${index}]`);
        } else if (entry === '--') {
          afterSeparator = true;
        }
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

/** A probe whose entries line up with the real call's, and the field it changed (undefined: several). */
interface AlignedProbe {
  readonly entries: readonly ArgEntry[];
  readonly path: string | undefined;
  /** The probe may have added text behind a value: an emptied inline flag shows against it. */
  readonly extending: boolean;
  /**
   * The probe filled a field the input left empty: the model supplied nothing there, so a dash the
   * declaration writes instead (`input.file ?? '-'`) is its own; only an emptied flag shows against it.
   */
  readonly filling: boolean;
  /** An element this probe is no evidence against (`FieldProbe.ownDash`). */
  readonly ownDash?: string;
}

/** A field no probe settled that holds a dash, with its `same` run when that lines up. */
interface UnsettledLeaf extends DashLeaf {
  readonly same: readonly ArgEntry[] | undefined;
}

/** What the probes tell about a call: the probes that line up, and the fields none of them settled. */
interface Evidence {
  readonly aligned: readonly AlignedProbe[];
  /** Fields holding a dash that no lined-up probe changed to a dashless form: any dash element may be theirs. */
  readonly unsettled: readonly UnsettledLeaf[];
  /**
   * Fields whose text no lined-up probe replaced whole (every `x` run threw or built another number
   * of entries, or the field holds record keys, which no `x` probe renames when a letter leads them):
   * every probe that lined up kept their white space and punctuation, which a declaration may turn
   * into `-` after splitting, parsing or decoding the text (`modelLedDash`).
   */
  readonly open: readonly OpenField[];
  readonly source: string | undefined;
}

/** A field no lined-up probe replaced whole (`Evidence.open`). */
interface OpenField {
  readonly path: string;
  /** A lined-up probe wrote every string of the field `x`: only its keys are open. */
  readonly cleared: boolean;
  readonly keyed: () => boolean;
  /** Whether the field holds a letter or digit (`movedOf` changes something). */
  readonly lettered: () => boolean;
  /** The runs that did not throw with every letter and digit of the field changed (`x`, moved). */
  readonly changed: () => ReadonlyArray<readonly ArgEntry[]>;
  /**
   * When no such run could be made: every other probe run that did not throw, the field's run with
   * only its digits changed (`renumberedOf`, which keeps a date a date) among them.
   */
  readonly others: () => ReadonlyArray<readonly ArgEntry[]>;
}

function evidenceOf(entries: readonly ArgEntry[], probes: ArgProbes): Evidence {
  const lines = (run: ProbeRun): run is readonly ArgEntry[] =>
    Array.isArray(run) && run.length === entries.length;
  const aligned: AlignedProbe[] = [];
  const unsettled: UnsettledLeaf[] = [];
  const open: OpenField[] = [];
  const succeeded = (run: ProbeRun): run is readonly ArgEntry[] => Array.isArray(run);
  const everyRun = [probes.filled, probes.dashless, ...(probes.fields ?? []).flatMap((field) => field.runs)];
  for (const field of probes.fields ?? []) {
    let settled = lines(probes.filled) && field.dash?.key !== true;
    // The filled probe writes every string `x` (keys stay).
    let cleared = lines(probes.filled);
    field.runs.forEach((run, index) => {
      if (!lines(run)) return;
      if (field.clean?.[index] === true) cleared = true;
      aligned.push({
        entries: run,
        path: field.path,
        extending: field.extending[index] === true,
        filling: field.filling[index] === true,
        ...(field.ownDash === undefined ? {} : { ownDash: field.ownDash }),
      });
      if (field.settling[index] === true) settled = true;
    });
    if (!settled && field.dash !== undefined) {
      unsettled.push({ ...field.dash, same: lines(field.same) ? field.same : undefined });
    }
    const { keyed, moved } = field;
    if (keyed === undefined || moved === undefined) continue;
    open.push({
      path: field.path,
      cleared,
      keyed,
      lettered: () => moved() !== NOTHING_MOVED,
      changed: () => {
        const first = moved();
        const runs: ProbeRun[] = first === NOTHING_MOVED ? [] : [first];
        // `x` runs rename no key a letter leads: for keys, only the moved run changed every letter.
        if (!keyed()) runs.push(...field.runs.filter((_, index) => field.clean?.[index] === true));
        return runs.filter(succeeded);
      },
      others: () => [field.renumbered?.(), ...everyRun].filter(succeeded),
    });
  }
  // After the fields' own probes, so a refusal names the field when one is to blame.
  for (const run of [probes.filled, probes.dashless]) {
    if (lines(run)) aligned.push({ entries: run, path: undefined, extending: true, filling: false });
  }
  return { aligned, unsettled, open, source: probes.source };
}

function textOf(entry: ArgEntry | undefined): string | undefined {
  return typeof entry === 'string' ? entry : isArgValue(entry) ? entry.text : undefined;
}

/**
 * Whether the leading `-` of an untagged element came from the model rather than the declaration; the
 * path to name when it did (undefined when it did not).
 * The declaration is run again on probe inputs (`probeDeclaration`): every string `x` and every number
 * 1; every dash written `x` and every number its absolute value; and each field of the input changed
 * alone (`fieldsOf`: a string or number alone, an array or record whole; to `x`, to its neutral form,
 * its dashes written `x` and removed; a number to 1, its absolute value, 0 and a large value), the rest
 * real, so a field that makes the others' probes throw or branch does not hide them. An element
 * whose counterpart in a probe that lines up does not start with `-` got its dash from a model value,
 * whatever the declaration did to that value on the way (`.trim()`, `${input.name}.txt`, `a + b`, a
 * slug, `n * 10`, `to - from - 1`, a branch on another field). A declaration's own prefix
 * (`--note=${input.note}`) starts with `-` in every probe and is left alone.
 * A field holding a dash that no probe lining up changed (every probe of it threw or built a different
 * number of entries: a date the declaration parses, a sign it branches on) is unsettled, and the strict
 * rule decides: while one of them starts with `-` (trimmed, in any spelling `SPELLED_DASH` knows), every
 * element starting with `-` is refused unless the field's same-form run (`sameFormOf`) lines up and
 * leaves the element as it was.
 */
function modelLedDash(element: string, index: number, evidence: Evidence): string | undefined | null {
  for (const probe of evidence.aligned) {
    if (probe.filling) continue;
    const text = textOf(probe.entries[index]);
    if (text === undefined || text.startsWith('-')) continue;
    // `-${n}` where the probe of n took another branch (`all` for 0): the declaration's own dash. A
    // number in its place (`0`) is arithmetic (`to - from` with `to` 0 reads `-from`): model-led.
    if (probe.ownDash === element && !/^\d/.test(text)) continue;
    return probe.path ?? null;
  }
  for (const leaf of evidence.unsettled) {
    if (!LEADING_DASH.test(leaf.text.trim())) continue;
    // The leaf changed but kept its form (-5 to -6, a date a day on) and the element stayed the same:
    // the element does not depend on it (`--from-end` of a declaration that branches on the sign).
    if (leaf.same !== undefined && textOf(leaf.same[index]) === element) continue;
    return leaf.path;
  }
  // No probe showed the dash to be the model's, but none that lined up replaced every text it may have
  // come from either (a text split into entries, parsed, decoded, normalised): the element is the
  // declaration's own only where a run with the field's letters and digits changed holds it too. A
  // constant flag does; an element made of the model's text (`-o/tmp/x` from `' o/tmp/x'`, `'\u006f'`,
  // `'%6F'`, `'ö'`, `'ｏ'`) comes out changed.
  // A literal of the declaration's own source (`input.sort === 'desc' ? ['--reverse'] : []`).
  if (evidence.open.length > 0 && evidence.source?.includes(element)) return undefined;
  for (const field of evidence.open) {
    if (field.cleared && !field.keyed()) continue;
    // A field with no letter or digit (`[]`, punctuation alone) gives the element none of its own.
    if (!field.lettered()) continue;
    const changed = field.changed();
    // No such run could be made (each threw: a date, a strict format): any other probe run that did not
    // throw; none, and every dash element is refused.
    const runs = changed.length > 0 ? changed : field.others();
    if (!runs.some((run) => holdsOwn(run, element))) return field.path;
  }
  return undefined;
}

/**
 * Whether a run holds `element` itself, or the same option with another inline value: the same long
 * option up to its `=` (`--since=${day}` run with another day), the same short option or cluster with
 * text behind it (`-f${keys}`, `-nri${pattern}`), so the element's tail is that option's value.
 */
function holdsOwn(run: readonly ArgEntry[], element: string): boolean {
  return run.some((entry) => {
    const text = textOf(entry);
    if (text === undefined) return false;
    if (text === element) return true;
    let common = 0;
    while (common < text.length && text[common] === element[common]) common += 1;
    if (common === text.length || common === element.length) return false;
    const shared = element.slice(0, common);
    return element.startsWith('--')
      ? /^--[^=]*[\p{L}\p{N}][^=]*=/u.test(shared)
      : /^-[\p{L}\p{N}]/u.test(shared);
  });
}

const LETTERS_AND_DIGITS = /[\p{L}\p{N}]/gu;
/** JSON keys read as names a declaration looks up (`JSON.parse(spec).name`): kept by `movedOf`. */
const LOOKED_UP_KEY = /^[a-z][A-Za-z0-9]*$/;

/**
 * An ASCII letter or digit moved to a neighbour that stays a hex digit when it was one (`%2F` to
 * `%3E`, `\x6f` to `\y7e`): `0`-`8` up, `9` down, `a`-`e` up, `f` down, `g`-`y` up, `z` down.
 */
function moveAscii(character: string): string {
  const code = character.charCodeAt(0);
  return /[9fFzZ]/.test(character) ? String.fromCharCode(code - 1) : String.fromCharCode(code + 1);
}

/**
 * A letter or digit changed so that a decoder or normaliser does not give it back: an ASCII one moved
 * (`moveAscii`), another one through the ASCII letter or digit it decomposes to (`ö`, `ｏ` to `p`), or
 * to the code point next to it (`ø` to `ù`).
 */
function moveCharacter(character: string): string {
  if (character.length === 1 && /[A-Za-z0-9]/.test(character)) return moveAscii(character);
  const base = character.normalize('NFKD').charAt(0);
  if (/[A-Za-z0-9]/.test(base)) return moveAscii(base);
  return String.fromCodePoint(character.codePointAt(0)! ^ 1);
}

/**
 * A text with every letter and digit changed and its punctuation kept, so a declaration that splits,
 * decodes or normalises it still can; a JSON object or array has its string values and numbers changed
 * and its keys too, but a key spelled like a name the declaration looks up (`LOOKED_UP_KEY`).
 */
function movedText(text: string): string {
  if (/^\s*[[{]/.test(text)) {
    try {
      return JSON.stringify(movedDeep(JSON.parse(text) as unknown, true));
    } catch {
      // Not JSON: moved as text.
    }
  }
  return text.replace(LETTERS_AND_DIGITS, moveCharacter);
}

/** A text, number or (deep) value with every letter and digit changed (`movedText`); keys too unless `lookups` keeps them. */
function movedDeep(node: unknown, lookups: boolean, depth = 0): unknown {
  if (typeof node === 'string') return movedText(node);
  if (typeof node === 'number' || typeof node === 'bigint') return sameFormOf(node) ?? node;
  if (typeof node !== 'object' || node === null || depth > MAX_INPUT_DEPTH) return node;
  if (Array.isArray(node)) return node.map((item) => movedDeep(item, lookups, depth + 1));
  return Object.fromEntries(
    Object.entries(node).map(([key, child]) => [
      lookups && LOOKED_UP_KEY.test(key) ? key : movedText(key),
      movedDeep(child, lookups, depth + 1),
    ]),
  );
}

/**
 * A text with each run of digits changed to another of its width that any date or time field takes
 * (`01` or `02`, `1` or `2`, `1026` for `2026`), its letters kept: evidence only where every run with
 * the letters changed threw (`modelLedDash`).
 */
function renumberedOf(node: unknown): unknown {
  if (typeof node !== 'string') return node;
  return node.replace(/\d+/g, (digits) => {
    const first = digits[0] === '1' ? '2' : '1';
    return digits.length === 2 ? `0${first}` : `${first}${digits.slice(1)}`;
  });
}

/** The input with every letter and digit of a field changed (`movedText`): its texts, numbers and keys. */
function movedOf(field: Field, input: unknown): unknown {
  switch (field.kind) {
    case 'leaf':
      return mapAt(input, field.segments, (node) =>
        typeof node === 'string' || typeof node === 'number' || typeof node === 'bigint'
          ? movedDeep(node, false)
          : node,
      );
    case 'keys':
      return mapAt(input, field.segments, (node) =>
        isRecord(node)
          ? Object.fromEntries(Object.entries(node).map(([key, child]) => [movedText(key), child]))
          : node,
      );
    case 'opaque':
      return mapAt(input, field.segments, (node) => movedDeep(node, true));
    default:
      return input;
  }
}

/**
 * A short flag or a cluster of them (`-e`, `-ie`) whose counterpart in a probe carried more text behind
 * it (`-e${input.pattern}`, `-ie${terms.join('|')}`, emptied by `''`, `[]`, `{}` or an absent optional,
 * which the field's probes fill): the path to name (null when no single field is to blame), undefined
 * when it is not one. Only probes that may add text count (a number probed as 1e6 may lengthen `-n1`).
 */
function emptiedShortFlag(element: string, index: number, evidence: Evidence): string | undefined | null {
  if (!SHORT_FLAGS.test(element)) return undefined;
  for (const probe of evidence.aligned) {
    if (!probe.extending) continue;
    const text = textOf(probe.entries[index]);
    if (text !== undefined && text.length > element.length && text.startsWith(element)) {
      return probe.path ?? null;
    }
  }
  return undefined;
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
 * as the real call. A number becomes its absolute value (`String(input.n * 10)` keeps no dash).
 */
export function dashlessInputOf(input: unknown, depth = 0): unknown {
  if (typeof input === 'string') return input.replace(SPELLED_DASH, 'x');
  if (typeof input === 'number') return Math.abs(input);
  if (typeof input === 'bigint') return input < 0n ? -input : input;
  if (typeof input !== 'object' || input === null || depth > MAX_INPUT_DEPTH) return input;
  if (Array.isArray(input)) return input.map((item) => dashlessInputOf(item, depth + 1));
  return Object.fromEntries(
    Object.entries(input).map(([key, child]) => [
      key.replace(/^(\s*)(-+)/, (_, space: string, dashes: string) => space + 'x'.repeat(dashes.length)),
      dashlessInputOf(child, depth + 1),
    ]),
  );
}

/** An input text that starts with a dash in a spelling `SPELLED_DASH` knows (tested trimmed). */
const LEADING_DASH = /^(?:-|\uFE63|\uFF0D|%2d|\\u002d|\\u\{0*2d\}|\\x2d|&#0*45;|&#x0*2d;)/i;

/**
 * What the neutral form of a string keeps besides letters, digits and white space: the punctuation
 * that gives JSON, URLs, paths and dates their structure, so a declaration that parses the value still
 * can. Any other character (`!`, `_`, `~`, `*`...) may be what a slug or a `replace` turns into `-`.
 */
const NEUTRAL_DROPS = /[^\p{L}\p{N}\s{}[\]":,\\/?&=.%#@+]/gu;

/** A string with every dash (any spelling) and every character a transform might turn into one written `x`. */
function neutralOf(text: string): string {
  return text.replace(SPELLED_DASH, 'x').replace(NEUTRAL_DROPS, 'x');
}

const LEADS_WITH_WORD = /^[\p{L}\p{N}]/u;

/**
 * The leaf changed but kept its form, for a leaf that starts with `-`: every ASCII digit and letter
 * moved to the next one (9 to 8, z to y), the punctuation kept (`-000001-01-01` to `-111112-12-12`,
 * `-5` to `-6`, `-57` to `-68`), so an element that keeps the leaf's text anywhere changes with it.
 * Undefined for a key (renaming one changes the input's shape) or text with no letter or digit.
 */
function sameFormOf(value: string | number | bigint): string | number | bigint | undefined {
  const text = String(value);
  if (!/[A-Za-z0-9]/.test(text)) return undefined;
  const moved = text.replace(/[A-Za-z0-9]/g, (character) =>
    character === '9' || character === 'z' || character === 'Z'
      ? String.fromCharCode(character.charCodeAt(0) - 1)
      : String.fromCharCode(character.charCodeAt(0) + 1),
  );
  if (typeof value === 'string') return moved;
  if (typeof value === 'bigint') return BigInt(moved);
  // `-1e+21` would read `-2f+32`: such a number moves by one instead.
  const number = Number(moved);
  return Number.isFinite(number) ? number : value - 1;
}

/** A zod schema's definition, read structurally (the author's zod may be another copy); undefined for anything else. */
interface SchemaDef {
  readonly type: string;
  readonly innerType?: unknown;
  readonly shape?: Readonly<Record<string, unknown>>;
  readonly element?: unknown;
  readonly valueType?: unknown;
  readonly entries?: Readonly<Record<string, unknown>>;
  readonly values?: readonly unknown[];
  readonly checks?: readonly unknown[];
  readonly options?: readonly unknown[];
  readonly in?: unknown;
}

function defOf(schema: unknown): SchemaDef | undefined {
  if (typeof schema !== 'object' || schema === null) return undefined;
  const def = (schema as { _zod?: { def?: SchemaDef } })._zod?.def;
  return typeof def?.type === 'string' ? def : undefined;
}

/** Wrappers whose value is their inner schema's (or absent). */
const WRAPPERS = new Set(['optional', 'nullable', 'default', 'prefault', 'catch', 'readonly', 'nonoptional']);
/** Leaves the model picks from a set the declaration fixed: they cannot spell an arbitrary option. */
const FINITE = new Set(['enum', 'literal', 'boolean', 'null', 'undefined', 'void', 'nan']);

function unwrap(schema: unknown): SchemaDef | undefined {
  let def = defOf(schema);
  for (let depth = 0; def !== undefined && WRAPPERS.has(def.type) && depth < MAX_INPUT_DEPTH; depth++) {
    def = defOf(def.innerType);
  }
  return def;
}

/**
 * A small value of a schema, to fill what the real input leaves empty (an absent optional, `[]`, `{}`):
 * strings `x`, numbers 1, an array of one item, a record with the key `x`, an enum's first member, an
 * object with its required properties, a union's first member that holds free text. Inside that, arrays
 * and records are empty and optional properties absent, so a recursive schema ends. `free` when it holds
 * text or a number the model could have chosen. Undefined when unknown (a transform's output).
 */
function sampleOf(schema: unknown, depth = 0): { value: unknown; free: boolean } | undefined {
  const def = unwrap(schema);
  if (def === undefined || depth > SCHEMA_DEPTH) return undefined;
  switch (def.type) {
    case 'string':
    case 'template_literal':
    case 'any':
    case 'unknown':
      return { value: 'x', free: true };
    case 'number':
      return { value: 1, free: true };
    case 'bigint':
      return { value: 1n, free: true };
    case 'boolean':
      return { value: true, free: false };
    case 'enum': {
      const first = Object.values(def.entries ?? {})[0];
      return first === undefined ? undefined : { value: first, free: false };
    }
    case 'literal':
      return def.values?.length ? { value: def.values[0], free: false } : undefined;
    case 'array': {
      if (depth > 0) return { value: [], free: false };
      const item = sampleOf(def.element, depth + 1);
      return item === undefined ? undefined : { value: [item.value], free: item.free };
    }
    case 'record': {
      if (depth > 0) return { value: {}, free: false };
      const item = sampleOf(def.valueType, depth + 1);
      return item === undefined ? undefined : { value: { x: item.value }, free: true };
    }
    case 'object': {
      const out: Record<string, unknown> = {};
      let free = false;
      for (const [key, child] of Object.entries(def.shape ?? {})) {
        if (defOf(child)?.type === 'optional') continue;
        const sample = sampleOf(child, depth + 1);
        if (sample === undefined) return undefined;
        out[key] = sample.value;
        free ||= sample.free;
      }
      return { value: out, free };
    }
    case 'union': {
      for (const option of def.options ?? []) {
        const sample = sampleOf(option, depth + 1);
        if (sample?.free === true) return sample;
      }
      return undefined;
    }
    case 'pipe':
      return sampleOf(def.in, depth + 1);
    default:
      return undefined;
  }
}

/** One step from a node to its children: a property of an object, every item of an array, every value of a record. */
type Segment = { readonly key: string } | 'items' | 'values';

/**
 * A field of the input as the schema fixes it (`fieldsOf`): the string or number at a path of the
 * schema, in every item of the arrays and every value of the records on the way (`events.label` is the
 * label of every event), the keys of the records at a path, or everything beneath a path whose shape
 * the probes do not follow (a union, a transform's output). Their count is the declaration's, whatever
 * the model sends. A field is changed everywhere it occurs at once.
 */
interface Field {
  readonly path: string;
  readonly segments: readonly Segment[];
  /**
   * `leaf`: the text or numbers at the path; `opaque`: everything beneath it; `keys`: the keys of the
   * records there; `fill`: only filled where empty (an array, an optional object).
   */
  readonly kind: 'leaf' | 'opaque' | 'keys' | 'fill';
  /** What an empty occurrence becomes (absent, `[]`, `{}`), or undefined when it stays. */
  readonly fill?: (node: unknown) => unknown;
  /** The largest number the schema lets the field hold, when it sets one (the `large` probe stays within). */
  readonly maximum?: number;
}

/** How deep `fieldsOf` and `sampleOf` follow a schema; past it, a value is probed whole. */
const SCHEMA_DEPTH = 8;
/** How many fields `fieldsOf` lists; past it, a value is probed whole. Fixed by the schema, not the model. */
const MAX_FIELDS = 128;

function isRecord(node: unknown): node is Record<string, unknown> {
  return typeof node === 'object' && node !== null && !Array.isArray(node);
}

/** A schema that may be absent (`.optional()`, `.nullable()` anywhere among its wrappers). */
function mayBeAbsent(schema: unknown): boolean {
  let def = defOf(schema);
  for (let depth = 0; def !== undefined && WRAPPERS.has(def.type) && depth < MAX_INPUT_DEPTH; depth++) {
    if (def.type === 'optional' || def.type === 'nullable') return true;
    def = defOf(def.innerType);
  }
  return false;
}

/** The fields of the input schema (`Field`); with no schema, the whole input is one field. */
function fieldsOf(schema: unknown): Field[] {
  const fields: Field[] = [];
  const visit = (type: unknown, segments: readonly Segment[], path: string, depth: number): void => {
    const def = unwrap(type);
    const named = path || '(arguments)';
    const absent = mayBeAbsent(type) ? sampleOf(type) : undefined;
    const fillAbsent = absent?.free === true ? absent.value : undefined;
    if (def !== undefined && FINITE.has(def.type)) return;
    const deep = depth > SCHEMA_DEPTH || fields.length >= MAX_FIELDS;
    if (def === undefined || deep) {
      fields.push({ path: named, segments, kind: 'opaque', fill: opaqueFill(fillAbsent) });
      return;
    }
    switch (def.type) {
      case 'string':
      case 'template_literal':
      case 'number':
      case 'bigint': {
        const maximum = maximumOf(def);
        fields.push({
          path: named,
          segments,
          kind: 'leaf',
          ...(fillAbsent === undefined ? {} : { fill: (node) => node ?? fillAbsent }),
          ...(maximum === undefined ? {} : { maximum }),
        });
        return;
      }
      case 'object': {
        if (fillAbsent !== undefined) {
          fields.push({ path: named, segments, kind: 'fill', fill: (node) => node ?? fillAbsent });
        }
        for (const [key, child] of Object.entries(def.shape ?? {})) {
          visit(child, [...segments, { key }], path ? `${path}.${key}` : key, depth + 1);
        }
        return;
      }
      case 'array': {
        const item = sampleOf(def.element, 1);
        const one = item?.free === true ? [item.value] : undefined;
        fields.push({
          path: named,
          segments,
          kind: 'fill',
          fill: (node) =>
            node === undefined || node === null
              ? fillAbsent
              : Array.isArray(node) && node.length === 0
                ? one
                : node,
        });
        visit(def.element, [...segments, 'items'], path, depth + 1);
        return;
      }
      case 'record': {
        const item = sampleOf(def.valueType, 1);
        const one = item === undefined ? undefined : { x: item.value };
        fields.push({
          path: named,
          segments,
          kind: 'keys',
          fill: (node) =>
            node === undefined || node === null
              ? fillAbsent
              : isRecord(node) && Object.keys(node).length === 0
                ? one
                : node,
        });
        visit(def.valueType, [...segments, 'values'], path, depth + 1);
        return;
      }
      default:
        fields.push({ path: named, segments, kind: 'opaque', fill: opaqueFill(fillAbsent) });
    }
  };
  visit(schema, [], '', 0);
  return fields;
}

/** The fill of a value of unknown shape: its sample when absent, one `x` in an empty array or record. */
function opaqueFill(absent: unknown): (node: unknown) => unknown {
  return (node) => {
    if (node === undefined || node === null) return absent ?? node;
    if (Array.isArray(node) && node.length === 0) return ['x'];
    if (isRecord(node) && Object.keys(node).length === 0) return { x: 'x' };
    return node;
  };
}

/**
 * The input with `change` applied to every node a field's segments reach: a copy of each object and
 * array on the way to a node that changed, the rest shared; the input itself when nothing changed.
 */
function mapAt(input: unknown, segments: readonly Segment[], change: (node: unknown) => unknown): unknown {
  const at = (node: unknown, index: number): unknown => {
    if (index === segments.length) return change(node);
    const segment = segments[index]!;
    if (segment === 'items') {
      if (!Array.isArray(node)) return node;
      let copy: unknown[] | undefined;
      node.forEach((item, position) => {
        const next = at(item, index + 1);
        if (next !== item) {
          copy ??= node.slice();
          copy[position] = next;
        }
      });
      return copy ?? node;
    }
    if (!isRecord(node)) return node;
    if (segment === 'values') {
      let copy: Record<string, unknown> | undefined;
      for (const [key, child] of Object.entries(node)) {
        const next = at(child, index + 1);
        if (next !== child) {
          copy ??= { ...node };
          copy[key] = next;
        }
      }
      return copy ?? node;
    }
    const child = Object.hasOwn(node, segment.key) ? node[segment.key] : undefined;
    const next = at(child, index + 1);
    return next === child ? node : { ...node, [segment.key]: next };
  };
  return at(input, 0);
}

/** Every node a field's segments reach, with its dotted data path. */
function nodesAt(input: unknown, segments: readonly Segment[]): Array<{ node: unknown; path: string }> {
  const found: Array<{ node: unknown; path: string }> = [];
  const join = (path: string, key: string | number) => (path ? `${path}.${key}` : String(key));
  const at = (node: unknown, path: string, index: number): void => {
    if (index === segments.length) {
      found.push({ node, path });
      return;
    }
    const segment = segments[index]!;
    if (segment === 'items') {
      if (Array.isArray(node)) {
        node.forEach((item, position) => {
          at(item, join(path, position), index + 1);
        });
      }
    } else if (isRecord(node)) {
      if (segment === 'values') {
        for (const [key, child] of Object.entries(node)) at(child, join(path, key), index + 1);
      } else if (Object.hasOwn(node, segment.key)) {
        at(node[segment.key], join(path, segment.key), index + 1);
      }
    }
  };
  at(input, '', 0);
  return found;
}

/** The schema's inclusive upper bound of a number or bigint (`.max()`, `.lt()`), when it has one. */
function maximumOf(def: SchemaDef | undefined): number | undefined {
  let maximum: number | undefined;
  for (const check of def?.checks ?? []) {
    if (typeof check !== 'object' || check === null) continue;
    const checkDef = (check as { _zod?: { def?: { check?: unknown; value?: unknown; inclusive?: unknown } } })
      ._zod?.def;
    if (checkDef?.check !== 'less_than') continue;
    const bound = Number(checkDef.value) - (checkDef.inclusive === true ? 0 : 1);
    if (Number.isFinite(bound) && (maximum === undefined || bound < maximum)) maximum = bound;
  }
  return maximum;
}

/** How a probe changes each value of a field (see `fieldVariants`). */
type Change = 'x' | 'neutral' | 'dashX' | 'dashRemoved' | 'zero' | 'large' | 'same';

interface Variant {
  readonly value: unknown;
  readonly settles: boolean;
  readonly extending: boolean;
  readonly filling: boolean;
  /** Every string of the field written `x`. */
  readonly clean: boolean;
}

const CHANGES: ReadonlyArray<{ change: Change; settles: boolean; extending: boolean }> = [
  // Strings `x`, numbers 1, a key that does not start with a letter or digit its other characters `x`.
  { change: 'x', settles: true, extending: true },
  // Strings their neutral form, numbers their absolute value, keys as for `x`.
  { change: 'neutral', settles: true, extending: true },
  // Dashes (any spelling) written `x`, then removed (`{"n":-5}` still parses): other punctuation stays.
  { change: 'dashX', settles: false, extending: true },
  { change: 'dashRemoved', settles: false, extending: true },
  // Numbers 0, then past the sum of every number of the input (`to - from - 1` turns positive).
  { change: 'zero', settles: true, extending: false },
  { change: 'large', settles: true, extending: false },
];

/** A text or number changed as `change` says; the same value when it does not apply. */
function changeValue(value: string | number | bigint, change: Change, large: number): unknown {
  if (typeof value === 'string') {
    switch (change) {
      case 'x':
        return 'x';
      case 'neutral':
        return neutralOf(value);
      case 'dashX':
        return value.replace(SPELLED_DASH, 'x');
      case 'dashRemoved':
        return value.replace(SPELLED_DASH, '');
      case 'same':
        return LEADING_DASH.test(value.trim()) ? (sameFormOf(value) ?? value) : value;
      default:
        return value;
    }
  }
  const negative = typeof value === 'bigint' ? value < 0n : value < 0;
  const one = typeof value === 'bigint' ? 1n : 1;
  switch (change) {
    case 'x':
      return one;
    case 'neutral':
      return negative ? -value : value;
    case 'zero':
      return typeof value === 'bigint' ? 0n : 0;
    case 'large':
      return typeof value === 'bigint' ? BigInt(large) : large;
    case 'same':
      return negative ? (sameFormOf(value) ?? value) : value;
    default:
      return value;
  }
}

/** A text or number changed as `change` says; anything else as it was. */
function changeLeaf(node: unknown, change: Change, large: number): unknown {
  return typeof node === 'string' || typeof node === 'number' || typeof node === 'bigint'
    ? changeValue(node, change, large)
    : node;
}

/**
 * An object's keys that do not start with a letter or digit with every other character written `x`
 * (keys are names, not parsed: white space goes too), each kept apart from its siblings' names.
 */
function renameKeys(node: Record<string, unknown>): Record<string, unknown> {
  const keys = Object.keys(node);
  if (keys.every((key) => LEADS_WITH_WORD.test(key))) return node;
  const taken = new Set(keys);
  const counters = new Map<string, number>();
  return Object.fromEntries(
    keys.map((key) => {
      if (LEADS_WITH_WORD.test(key)) return [key, node[key]];
      const base = key.replace(/[^\p{L}\p{N}]/gu, 'x') || 'x';
      let name = base;
      let counter = counters.get(base) ?? 0;
      while (taken.has(name)) name = `${base}${counter++}`;
      counters.set(base, counter);
      taken.add(name);
      return [name, node[key]];
    }),
  );
}

/** A value of unknown shape with every text, number and (for `x`, `neutral`) key changed. */
function changeDeep(node: unknown, change: Change, large: number, depth = 0): unknown {
  if (typeof node !== 'object' || node === null || depth > MAX_INPUT_DEPTH)
    return changeLeaf(node, change, large);
  if (Array.isArray(node)) {
    let copy: unknown[] | undefined;
    node.forEach((item, index) => {
      const next = changeDeep(item, change, large, depth + 1);
      if (next !== item) {
        copy ??= node.slice();
        copy[index] = next;
      }
    });
    return copy ?? node;
  }
  const record = node as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  for (const [key, child] of Object.entries(record)) {
    const next = changeDeep(child, change, large, depth + 1);
    if (next !== child) {
      copy ??= { ...record };
      copy[key] = next;
    }
  }
  const changed = copy ?? record;
  return change === 'x' || change === 'neutral' ? renameKeys(changed) : changed;
}

/** The first value or key of a field that starts with `-` (trimmed, any spelling `LEADING_DASH` knows). */
function dashLeafOf(field: Field, input: unknown): DashLeaf | undefined {
  if (field.kind === 'fill') return undefined;
  const leads = (text: string) => LEADING_DASH.test(text.trim());
  let found: DashLeaf | undefined;
  const walk = (node: unknown, path: string, depth: number): void => {
    if (typeof node === 'string' || typeof node === 'number' || typeof node === 'bigint') {
      if (leads(String(node))) found = { path: path || '(arguments)', text: String(node), key: false };
      return;
    }
    if (field.kind !== 'opaque' || typeof node !== 'object' || node === null || depth > MAX_INPUT_DEPTH)
      return;
    for (const [key, child] of Object.entries(node)) {
      const childPath = path ? `${path}.${key}` : key;
      if (!Array.isArray(node) && leads(key)) found = { path: childPath, text: key, key: true };
      else walk(child, childPath, depth + 1);
      if (found !== undefined) return;
    }
  };
  for (const { node, path } of nodesAt(input, field.segments)) {
    if (field.kind === 'keys') {
      if (!isRecord(node)) continue;
      const key = Object.keys(node).find(leads);
      if (key !== undefined) return { path: path ? `${path}.${key}` : key, text: key, key: true };
    } else {
      walk(node, path, 0);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** Whether a field holds keys of records in `input`: a `keys` field's, or any beneath an opaque field. */
function holdsKeys(field: Field, input: unknown): boolean {
  const walk = (node: unknown, depth: number): boolean => {
    if (typeof node !== 'object' || node === null || depth > MAX_INPUT_DEPTH) return false;
    if (!Array.isArray(node) && Object.keys(node).length > 0) return true;
    return field.kind === 'opaque' && Object.values(node).some((child) => walk(child, depth + 1));
  };
  if (field.kind !== 'keys' && field.kind !== 'opaque') return false;
  return nodesAt(input, field.segments).some(({ node }) => walk(node, 0));
}

/** The probe inputs of a field (`CHANGES`, each only when it changes something), then its fill. */
function fieldVariants(field: Field, input: unknown, unbounded: number): Variant[] {
  const variants: Variant[] = [];
  // Within the schema's bound (a declaration may loop over a count it bounds); a million in a value of unknown shape.
  const large = Math.min(unbounded, field.kind === 'opaque' ? 1e6 : (field.maximum ?? unbounded));
  const add = (
    value: unknown,
    settles: boolean,
    extending: boolean,
    filling: boolean,
    clean = false,
  ): void => {
    if (value !== input) variants.push({ value, settles, extending, filling, clean });
  };
  for (const { change, settles, extending } of CHANGES) {
    if (field.kind === 'leaf') {
      add(
        mapAt(input, field.segments, (node) => changeLeaf(node, change, large)),
        settles,
        extending,
        false,
        change === 'x',
      );
    } else if (field.kind === 'opaque') {
      add(
        mapAt(input, field.segments, (node) => changeDeep(node, change, large)),
        settles,
        extending,
        false,
        change === 'x',
      );
    } else if (field.kind === 'keys' && (change === 'x' || change === 'neutral')) {
      add(
        mapAt(input, field.segments, (node) => (isRecord(node) ? renameKeys(node) : node)),
        true,
        true,
        false,
      );
    }
  }
  if (field.fill !== undefined) add(mapAt(input, field.segments, field.fill), false, true, true);
  return variants;
}

/** The sum of the absolute values of every number of the input (0 past the depth probed). */
function numberSumOf(input: unknown): number {
  let sum = 0;
  const walk = (node: unknown, depth: number): void => {
    if (typeof node === 'number') sum += Math.abs(node);
    else if (typeof node === 'bigint') sum += Math.abs(Number(node));
    else if (typeof node === 'object' && node !== null && depth <= MAX_INPUT_DEPTH) {
      for (const child of Object.values(node)) walk(child, depth + 1);
    }
  };
  walk(input, 0);
  return sum;
}

/**
 * Runs the declaration on every probe input of a call (see `modelLedDash`): the filled and the
 * dashless probe, then each field of the schema alone (`fieldsOf`), everywhere it occurs, the rest of
 * the input real. Fields the model picks from a fixed set (enum, literal, boolean) are not probed.
 * `run` answers undefined when the declaration throws. At most eight runs of a pure function per
 * field (the schema fixes how many), on the call's own input.
 */
export function probeDeclaration(
  input: unknown,
  run: (probe: unknown) => ProbeRun,
  schema?: unknown,
  source?: string,
): ArgProbes {
  const filled = run(probeInputOf(input));
  const dashless = run(dashlessInputOf(input));
  const sum = numberSumOf(input);
  const large = Number.isFinite(sum)
    ? Math.min(Math.ceil(1e6 + 2 * sum), Number.MAX_SAFE_INTEGER)
    : Number.MAX_SAFE_INTEGER;
  const fields: FieldProbe[] = [];
  for (const field of fieldsOf(schema)) {
    const runs: ProbeRun[] = [];
    const settling: boolean[] = [];
    const extending: boolean[] = [];
    const filling: boolean[] = [];
    const clean: boolean[] = [];
    for (const variant of fieldVariants(field, input, large)) {
      runs.push(run(variant.value));
      settling.push(variant.settles);
      extending.push(variant.extending);
      filling.push(variant.filling);
      clean.push(variant.clean);
    }
    const dash = dashLeafOf(field, input);
    let same: ProbeRun | undefined;
    if (dash !== undefined && !dash.key) {
      const moved =
        field.kind === 'leaf'
          ? mapAt(input, field.segments, (node) => changeLeaf(node, 'same', large))
          : mapAt(input, field.segments, (node) => changeDeep(node, 'same', large));
      if (moved !== input) same = run(moved);
    }
    let ownDash: string | undefined;
    if (field.kind === 'leaf' && !field.segments.some((segment) => typeof segment === 'string')) {
      const [only] = nodesAt(input, field.segments);
      if (typeof only?.node === 'number' || typeof only?.node === 'bigint') ownDash = `-${only.node}`;
    }
    fields.push({
      path: field.path,
      runs,
      settling,
      extending,
      filling,
      clean,
      keyed: once(() => holdsKeys(field, input)),
      moved: once(() => {
        const moved = movedOf(field, input);
        return moved === input ? NOTHING_MOVED : run(moved);
      }),
      renumbered: once(() => {
        const renumbered = field.kind === 'leaf' ? mapAt(input, field.segments, renumberedOf) : input;
        return renumbered === input ? undefined : run(renumbered);
      }),
      ...(ownDash === undefined ? {} : { ownDash }),
      ...(dash === undefined ? {} : { dash }),
      ...(same === undefined ? {} : { same }),
    });
  }
  return { filled, dashless, fields, ...(source === undefined ? {} : { source }) };
}

/** `compute` run once, on the first call. */
function once<T>(compute: () => T): () => T {
  let done = false;
  let value: T;
  return () => {
    if (!done) {
      value = compute();
      done = true;
    }
    return value;
  };
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

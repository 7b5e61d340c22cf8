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

/** How many input leaves (`mapLeaves`) are probed one by one; the rest are probed together. */
const MAX_PROBED_LEAVES = 32;

/** The declaration's entries for one probe input; undefined when it threw or returned no array. */
type ProbeRun = readonly ArgEntry[] | undefined;

/** One input leaf probed alone: its path, its text, and the declaration's entries for each variant. */
export interface LeafProbe extends InputLeaf {
  readonly runs: readonly ProbeRun[];
  /** Per run: whether its variant leaves nothing a dash could come from (`variantsOf`). */
  readonly settling: readonly boolean[];
  /** For a leaf that starts with `-`: the run with it changed but still that kind of value (`sameFormOf`). */
  readonly same?: ProbeRun;
}

/** A string or number of the input, or a key the model chose, by the dotted path `indexInputTexts` uses. */
export interface InputLeaf {
  readonly path: string;
  readonly text: string;
  /** A key of an object (the filled probe keeps keys, so it does not settle one). */
  readonly key: boolean;
}

/** The declaration's answers for the probe inputs of a call (`probeDeclaration`). */
export interface ArgProbes {
  /** Every string `x`, every number 1 (`probeInputOf`). */
  readonly filled?: ProbeRun;
  /** Every dash written `x`, every number its absolute value (`dashlessInputOf`). */
  readonly dashless?: ProbeRun;
  /** Each leaf changed alone, the rest of the input real (at most `MAX_PROBED_LEAVES`). */
  readonly leaves?: readonly LeafProbe[];
  /** Leaves past the bound, not probed alone. */
  readonly unprobed?: readonly InputLeaf[];
  /** The leaves past the bound changed together (`x` / 1, then their neutral form), the rest real. */
  readonly rest?: readonly ProbeRun[];
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
          refuseEmpty(inputTexts.get('') ?? emptied ?? `argv[${index}]`);
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

/** A probe whose entries line up with the real call's, and the leaf it changed (undefined: several). */
interface AlignedProbe {
  readonly entries: readonly ArgEntry[];
  readonly path: string | undefined;
}

/** A leaf no probe settled, with its `same` run when that lines up. */
interface UnsettledLeaf extends InputLeaf {
  readonly same: readonly ArgEntry[] | undefined;
}

/** What the probes tell about a call: the probes that line up, and the leaves none of them settled. */
interface Evidence {
  readonly aligned: readonly AlignedProbe[];
  /** Leaves no lined-up probe changed to a dashless form: any dash element may be theirs. */
  readonly unsettled: readonly UnsettledLeaf[];
}

function evidenceOf(entries: readonly ArgEntry[], probes: ArgProbes): Evidence {
  const lines = (run: ProbeRun): run is readonly ArgEntry[] =>
    Array.isArray(run) && run.length === entries.length;
  const aligned: AlignedProbe[] = [];
  const unsettled: UnsettledLeaf[] = [];
  for (const leaf of probes.leaves ?? []) {
    let settled = lines(probes.filled) && !leaf.key;
    leaf.runs.forEach((run, index) => {
      if (!lines(run)) return;
      aligned.push({ entries: run, path: leaf.path });
      if (leaf.settling[index] === true) settled = true;
    });
    if (!settled) unsettled.push({ ...leaf, same: lines(leaf.same) ? leaf.same : undefined });
  }
  let restSettled = false;
  for (const run of probes.rest ?? []) {
    if (!lines(run)) continue;
    aligned.push({ entries: run, path: undefined });
    restSettled = true;
  }
  for (const leaf of probes.unprobed ?? []) {
    if (!restSettled && (!lines(probes.filled) || leaf.key)) unsettled.push({ ...leaf, same: undefined });
  }
  // After the leaves' own probes, so a refusal names the leaf when one is to blame.
  if (lines(probes.filled)) aligned.push({ entries: probes.filled, path: undefined });
  if (lines(probes.dashless)) aligned.push({ entries: probes.dashless, path: undefined });
  return { aligned, unsettled };
}

function textOf(entry: ArgEntry | undefined): string | undefined {
  return typeof entry === 'string' ? entry : isArgValue(entry) ? entry.text : undefined;
}

/**
 * Whether the leading `-` of an untagged element came from the model rather than the declaration; the
 * path to name when it did (undefined when it did not).
 * The declaration is run again on probe inputs (`probeDeclaration`): every string `x` and every number
 * 1; every dash written `x` and every number its absolute value; and each leaf of the input changed
 * alone (to `x`, to its dashless and its neutral form, a number to 1 and to its absolute value), the
 * rest real, so a leaf that makes the others' probes throw or branch does not hide them. An element
 * whose counterpart in a probe that lines up does not start with `-` got its dash from a model value,
 * whatever the declaration did to that value on the way (`.trim()`, `${input.name}.txt`, `a + b`, a
 * slug, `n * 10`, a branch on another field). A declaration's own prefix (`--note=${input.note}`)
 * starts with `-` in every probe and is left alone.
 * A leaf that no probe lining up changed (every probe of it threw or built a different number of
 * entries: a date the declaration parses, an enum that adds entries) is unsettled, and the strict rule
 * decides: while one of them starts with `-` (trimmed, in any spelling `SPELLED_DASH` knows), every
 * element starting with `-` is refused unless the leaf's same-form run (`sameFormOf`) lines up and
 * leaves the element as it was.
 */
function modelLedDash(element: string, index: number, evidence: Evidence): string | undefined | null {
  for (const probe of evidence.aligned) {
    const text = textOf(probe.entries[index]);
    if (text !== undefined && !text.startsWith('-')) return probe.path ?? null;
  }
  for (const leaf of evidence.unsettled) {
    if (!LEADING_DASH.test(leaf.text.trim())) continue;
    // The leaf changed but kept its form (-5 to -6, a date a day on) and the element stayed the same:
    // the element does not depend on it (`--from-end` of a declaration that branches on the sign).
    if (leaf.same !== undefined && textOf(leaf.same[index]) === element) continue;
    return leaf.path;
  }
  return undefined;
}

/**
 * A bare short flag whose counterpart in a probe carried a value behind it (`-e${input.pattern}`,
 * emptied): the path to name (null when no single leaf is to blame), undefined when it is not one.
 * Each leaf is probed alone, so an empty pattern is seen though another field makes the filled probe throw.
 */
function emptiedShortFlag(element: string, index: number, evidence: Evidence): string | undefined | null {
  if (!SHORT_FLAG.test(element)) return undefined;
  for (const probe of evidence.aligned) {
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

/** One input leaf as `mapLeaves` meets it: a string, number or bigint value, or a key of an object. */
interface LeafSite {
  readonly ordinal: number;
  readonly path: string;
  readonly value: string | number | bigint;
  /** The object a key belongs to (undefined for a value): a renamed key must not take a sibling's name. */
  readonly owner: object | undefined;
  /** The keys and indexes from the root to the value, or to the object that holds the key (live: copy it). */
  readonly steps: readonly (string | number)[];
}

/**
 * Rebuilds the input with each leaf (values and keys, in one walk order, numbered by `ordinal`) replaced
 * by what `visit` returns for it. Stops at the depth `indexInputTexts` refuses past.
 */
function mapLeaves(input: unknown, visit: (site: LeafSite) => unknown): unknown {
  let ordinal = 0;
  const steps: Array<string | number> = [];
  const walk = (node: unknown, path: string, depth: number): unknown => {
    if (typeof node === 'string' || typeof node === 'number' || typeof node === 'bigint') {
      return visit({ ordinal: ordinal++, path: path || '(arguments)', value: node, owner: undefined, steps });
    }
    if (typeof node !== 'object' || node === null || depth > MAX_INPUT_DEPTH) return node;
    if (Array.isArray(node)) {
      return node.map((item, index) => {
        steps.push(index);
        const mapped = walk(item, path ? `${path}.${index}` : String(index), depth + 1);
        steps.pop();
        return mapped;
      });
    }
    return Object.fromEntries(
      Object.entries(node).map(([key, child]) => {
        const childPath = path ? `${path}.${key}` : key;
        const renamed = visit({ ordinal: ordinal++, path: childPath, value: key, owner: node, steps });
        steps.push(key);
        const mapped = walk(child, childPath, depth + 1);
        steps.pop();
        return [renamed, mapped];
      }),
    );
  };
  return walk(input, '', 0);
}

/**
 * The input with one leaf replaced: a copy of each object and array on the way to it, the rest shared
 * (so a large input costs a path's worth of copying per probe, not a copy of the whole).
 */
function replaceLeaf(input: unknown, site: LeafSite, replacement: unknown): unknown {
  const replaceAt = (node: unknown, at: number): unknown => {
    if (at === site.steps.length) {
      if (site.owner === undefined) return replacement;
      // A key: renamed in place, so the object keeps its order.
      return Object.fromEntries(
        Object.entries(node as object).map(([key, child]) => [key === site.value ? replacement : key, child]),
      );
    }
    const step = site.steps[at]!;
    if (Array.isArray(node)) {
      const copy = node.slice();
      copy[step as number] = replaceAt(node[step as number], at + 1);
      return copy;
    }
    const record = node as Record<string, unknown>;
    return { ...record, [step]: replaceAt(record[step], at + 1) };
  };
  return replaceAt(input, 0);
}

/**
 * The probe values of a leaf, each with whether it settles the leaf (leaves it nothing a dash could
 * come from): a string becomes `x` and its neutral form (settling), and its dashes written `x` and
 * its dashes removed (not settling: the rest of its punctuation stays); a number 1 and its absolute
 * value; a key that does not start with a letter or digit its neutral form, unless a sibling has that
 * name. A leaf already neutral (`x`, 1, a schema's own key) has none.
 */
function variantsOf(site: LeafSite): Array<{ value: unknown; settles: boolean }> {
  const { value } = site;
  const variants: Array<{ value: unknown; settles: boolean }> = [];
  const add = (candidate: unknown, settles: boolean): void => {
    if (candidate !== value && !variants.some((variant) => variant.value === candidate)) {
      variants.push({ value: candidate, settles });
    }
  };
  if (site.owner !== undefined) {
    // A key that starts with a letter or digit (a schema's own keys among them) leads no element with "-".
    // Keys are names, not parsed: everything but letters and digits goes, white space too.
    const renamed = String(value).replace(/[^\p{L}\p{N}]/gu, 'x');
    if (!LEADS_WITH_WORD.test(String(value)) && !Object.hasOwn(site.owner, renamed)) add(renamed, true);
  } else if (typeof value === 'string') {
    add('x', true);
    add(neutralOf(value), true);
    add(value.replace(SPELLED_DASH, 'x'), false);
    // A decoder that takes no `x` where the dash stood (`{"n":-5}` for JSON.parse) takes none at all.
    add(value.replace(SPELLED_DASH, ''), false);
  } else if (typeof value === 'number') {
    add(1, true);
    add(Math.abs(value), true);
  } else {
    add(1n, true);
    add(value < 0n ? -value : value, true);
  }
  return variants;
}

/**
 * Runs the declaration on every probe input of a call (see `modelLedDash`): the filled and the
 * dashless probe, then each leaf alone (at most `MAX_PROBED_LEAVES`, the rest of the input real), then
 * the leaves past that bound together, as `x` and as their neutral form. `run` answers undefined
 * when the declaration throws. A few runs of a pure function per leaf, on the call's own input.
 */
export function probeDeclaration(input: unknown, run: (probe: unknown) => ProbeRun): ArgProbes {
  const filled = run(probeInputOf(input));
  const dashless = run(dashlessInputOf(input));
  const sites: Array<{ site: LeafSite; variants: Array<{ value: unknown; settles: boolean }> }> = [];
  mapLeaves(input, (site) => {
    const variants = variantsOf(site);
    // Only the leaves probed alone keep their steps (`replaceLeaf` follows them).
    const steps = sites.length < MAX_PROBED_LEAVES ? [...site.steps] : [];
    if (variants.length > 0) sites.push({ site: { ...site, steps }, variants });
    return site.value;
  });
  const leaves: LeafProbe[] = [];
  const unprobed: InputLeaf[] = [];
  for (const { site, variants } of sites) {
    const leaf = { path: site.path, text: String(site.value), key: site.owner !== undefined };
    if (leaves.length >= MAX_PROBED_LEAVES) {
      unprobed.push(leaf);
      continue;
    }
    const runs: ProbeRun[] = [];
    const settling: boolean[] = [];
    for (const variant of variants) {
      runs.push(run(replaceLeaf(input, site, variant.value)));
      settling.push(variant.settles);
    }
    const same = !leaf.key && LEADING_DASH.test(leaf.text.trim()) ? sameFormOf(site.value) : undefined;
    const sameRun = same === undefined ? undefined : run(replaceLeaf(input, site, same));
    leaves.push({ ...leaf, runs, settling, ...(same === undefined ? {} : { same: sameRun }) });
  }
  if (unprobed.length === 0) return { filled, dashless, leaves };
  // Past the bound: the rest changed together, each leaf in its first (`x`, 1) or its settling neutral form.
  const cut = sites[MAX_PROBED_LEAVES]!.site.ordinal;
  const together = (pick: (variants: Array<{ value: unknown; settles: boolean }>) => unknown) => {
    const byOrdinal = new Map(
      sites.slice(MAX_PROBED_LEAVES).map(({ site, variants }) => [site.ordinal, variants]),
    );
    return run(
      mapLeaves(input, (site) => {
        const variants = site.ordinal >= cut ? byOrdinal.get(site.ordinal) : undefined;
        return variants === undefined ? site.value : pick(variants);
      }),
    );
  };
  const rest = [
    together((variants) => variants[0]!.value),
    together(
      (variants) => (variants.find((variant, index) => index > 0 && variant.settles) ?? variants[0]!).value,
    ),
  ];
  return { filled, dashless, leaves, unprobed, rest };
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

import {
  canonicalJson,
  createSecretKeyMatcher,
  createSecretPairTests,
  createSecretRedactor,
  ESCAPED_CHARACTER,
  isNameFieldKey,
  REDACTED,
  redactSecretsInText,
  SECRET_PATTERNS,
  type SecretPattern,
  SPLIT_SECRET_OPENER,
} from '@toolgate/core';
import { isPlainValue } from './plain-text.js';
import { createQuoted } from './quoted.js';

/** Core's redaction walk's depth bound; deeper values take the general path, which cuts them. */
const MAX_DEPTH = 32;
/** Distinct key names remembered per redactor; a client sending endless new names only refills it. */
export const KEY_CACHE_LIMIT = 10_000;
/**
 * Longest key name remembered: a client's megabyte key names would otherwise stay on the heap,
 * 10,000 of them per cache. Longer names are tested (and quoted) on every call instead.
 */
export const KEY_CACHE_MAX_CHARS = 256;
/** Marks a value the fast path does not handle: the general path serialises it instead. */
const GENERAL = Symbol('general');

/**
 * What a key name is, cached per distinct name: plain, a secret's name, or text a pattern rewrites;
 * and whether it names a name/value pair's name field (`name`, `Key`, `ParameterKey`: a flag beside the rest).
 */
type KeyVerdict = number;
const KEY_PLAIN = 0;
const KEY_SECRET = 1;
const KEY_PATTERNED = 2;
const KEY_NAME_FIELD = 4;

/**
 * `value` with secrets redacted, as canonical JSON: exactly `canonicalJson(createSecretRedactor({ keys,
 * patterns })(value))`, in one pass for the plain JSON values a client sends (objects, arrays,
 * strings, numbers, booleans, null), without building the redacted copy:
 * - a key's verdict (a secret's name, text a pattern rewrites, or neither) is cached, so the key
 *   rules and patterns run once per distinct name;
 * - a string is tested against one combined expression of every pattern before the patterns run one
 *   by one; most strings hold no secret, so they cost one scan instead of one per pattern;
 * - with core's patterns alone, a short plain string (`isPlainValue`: an id, a code, an enum word) is
 *   quoted as it is, without the expressions: none of those patterns matches such text.
 * A string that may open a secret split over sibling strings (core's `SPLIT_SECRET_OPENER`: a key's
 * BEGIN line, `Bearer` at its end) sends the whole value to the general path, which finds such secrets
 * across an array's items or an object's values; the same combined scan tests for it, so plain strings
 * pay nothing more. So does a secret named beside its value (core's `createSecretPairTests`): an object
 * with a name field (`name`, `Key`, a flag of its cached key verdict) naming a secret
 * (`{ name: 'DB_PASSWORD', value: 'x' }`), and an array of an even number of strings that reads as
 * header names and values with a secret header among them (`['Authorization', 'x', 'Host', 'y']`); an
 * object without a name field pays nothing more.
 * Anything else (a Date, a Map, a class instance, a cycle, more than 32 levels, a throwing getter)
 * goes through core's redactor and canonicalJson, unchanged.
 */
export function createRedactedJson(
  keys: readonly string[],
  patterns: readonly SecretPattern[],
): (value: unknown) => string {
  const general = createSecretRedactor({ keys, patterns });
  const isSecretKey = createSecretKeyMatcher(keys);
  const pairs = createSecretPairTests(keys);
  // A character written as an escape (`\u0070assword`, `password&#61;x`): redactSecretsInText reads such
  // text decoded too, so the pretests send it there.
  const escaped: SecretPattern = { name: 'escaped-character', pattern: ESCAPED_CHARACTER, replace: '' };
  const mayHoldSecret = createPatternPretest([...patterns, escaped]);
  // The pretest for the string case: any pattern, an escaped character, or an opener of a split secret.
  const mayHoldOrOpenSecret = createPatternPretest([
    ...patterns,
    escaped,
    { name: 'split-opener', pattern: SPLIT_SECRET_OPENER, replace: '' },
  ]);
  // Only core's own patterns have no match in plain text (a custom pattern may match anything).
  const plainSkips =
    patterns.length === SECRET_PATTERNS.length &&
    patterns.every((pattern, index) => pattern === SECRET_PATTERNS[index]);
  const verdicts = new Map<string, KeyVerdict>();
  const keyVerdict = (key: string): KeyVerdict => {
    let verdict = verdicts.get(key);
    if (verdict === undefined) {
      // A key the patterns would rewrite changes the copy's key order: the general path sorts that.
      verdict =
        (mayHoldSecret(key) ? KEY_PATTERNED : isSecretKey(key) ? KEY_SECRET : KEY_PLAIN) |
        (isNameFieldKey(key) ? KEY_NAME_FIELD : KEY_PLAIN);
      if (key.length > KEY_CACHE_MAX_CHARS) return verdict;
      if (verdicts.size >= KEY_CACHE_LIMIT) verdicts.clear();
      verdicts.set(key, verdict);
    }
    return verdict;
  };
  // A key's JSON and its colon, remembered like its verdict (keys repeat from call to call).
  const keyColon = createQuoted(KEY_CACHE_LIMIT, KEY_CACHE_MAX_CHARS, ':');
  const write = (value: unknown, depth: number): string | undefined | typeof GENERAL => {
    switch (typeof value) {
      case 'string':
        // Plain text needs no escaping: its JSON is the text in quotes (JSON.stringify is a call into
        // the runtime, several times the cost of this check for an id's few characters).
        if (plainSkips && isPlainValue(value)) return `"${value}"`;
        if (!mayHoldOrOpenSecret(value)) return JSON.stringify(value);
        // Its siblings may hold the rest of a split secret: the general walk reads them together.
        if (SPLIT_SECRET_OPENER.test(value)) return GENERAL;
        return JSON.stringify(redactSecretsInText(value, patterns));
      case 'number':
        // A finite number's JSON is its String() (-0 included: both give `0`), without the runtime call.
        return Number.isFinite(value) ? String(value) : 'null';
      case 'boolean':
        return value ? 'true' : 'false';
      case 'undefined':
        return undefined;
      case 'object':
        break;
      default:
        return GENERAL;
    }
    if (value === null) return 'null';
    if (depth >= MAX_DEPTH) return GENERAL;
    const prototype = Object.getPrototypeOf(value);
    if (Array.isArray(value)) {
      if (prototype !== Array.prototype) return GENERAL;
      // Header names and values (Node's `rawHeaders`): the general walk cuts a secret header's value.
      if (value.length % 2 === 0 && typeof value[0] === 'string' && pairs.hasSecretHeaderPair(value)) {
        return GENERAL;
      }
      let out = '[';
      for (let index = 0; index < value.length; index += 1) {
        if (!(index in value)) return GENERAL;
        const item = write(value[index], depth + 1);
        if (item === GENERAL) return GENERAL;
        out += `${index === 0 ? '' : ','}${item ?? 'null'}`;
      }
      return `${out}]`;
    }
    if (prototype !== Object.prototype && prototype !== null) return GENERAL;
    const record = value as Record<string, unknown>;
    let out = '{';
    let first = true;
    let pairChecked = false;
    const keys = sortKeys(Object.keys(record));
    for (let index = 0; index < keys.length; index += 1) {
      const key = keys[index]!;
      const verdict = keyVerdict(key);
      if ((verdict & KEY_PATTERNED) !== 0) return GENERAL;
      // A name/value pair naming a secret: the general walk redacts its value fields (in any key order).
      if ((verdict & KEY_NAME_FIELD) !== 0 && !pairChecked) {
        pairChecked = true;
        if (pairs.isSecretPair(record)) return GENERAL;
      }
      const entry = record[key];
      let text: string | undefined | typeof GENERAL;
      if (entry !== null && entry !== undefined && (verdict & KEY_SECRET) !== 0)
        text = JSON.stringify(REDACTED);
      else if (typeof entry === 'function') return GENERAL;
      else text = write(entry, depth + 1);
      if (text === GENERAL) return GENERAL;
      if (text === undefined) continue;
      if (!first) out += ',';
      out += keyColon(key);
      out += text;
      first = false;
    }
    return `${out}}`;
  };

  return (value) => {
    let text: string | undefined | typeof GENERAL;
    try {
      text = write(value, 0);
    } catch {
      // A throwing getter or proxy trap: the general walk turns it into `[Unreadable]`.
      text = GENERAL;
    }
    if (text === GENERAL) return canonicalJson(general(value));
    return text ?? 'null';
  };
}

/** Keys sorted as `Array.prototype.sort` sorts strings (by UTF-16 code units), in place. */
function sortKeys(keys: string[]): string[] {
  // An object's keys are few, and often already in order: insertion sort allocates nothing.
  if (keys.length > 32) return keys.sort();
  for (let index = 1; index < keys.length; index += 1) {
    const key = keys[index]!;
    let at = index - 1;
    while (at >= 0 && keys[at]! > key) {
      keys[at + 1] = keys[at]!;
      at -= 1;
    }
    keys[at + 1] = key;
  }
  return keys;
}

/**
 * A test that is true for every string in which any of `patterns` matches (never false when one
 * would match). Patterns with the same flags are joined into one alternation (a wider flag could
 * narrow a negative lookahead, so flags are never mixed); patterns with back-references or named
 * groups, which alternation would renumber or duplicate, are tested on their own.
 */
export function createPatternPretest(patterns: readonly SecretPattern[]): (text: string) => boolean {
  const tests: { readonly pattern: RegExp; readonly requires: RegExp | undefined }[] = [];
  const joined = new Map<string, string[]>();
  const gates = new Map<string, string[]>();
  const stateless = (expression: RegExp): RegExp =>
    expression.global || expression.sticky
      ? new RegExp(expression.source, expression.flags.replace(/[gy]/g, ''))
      : expression;
  const join = (groups: Map<string, string[]>, expression: RegExp): void => {
    const flags = expression.flags.replace(/[gy]/g, '');
    const sources = groups.get(flags) ?? [];
    sources.push(expression.source);
    groups.set(flags, sources);
  };
  const numbered = (expression: RegExp): boolean => /\\[1-9]|\\k<|\(\?<[A-Za-z_$]/.test(expression.source);
  let gated = 0;
  for (const { pattern, requires } of patterns) {
    // A pattern with a cheaper necessary test keeps its own expression behind it: joined, its costly
    // scan would run on every text (two such patterns were most of this test's time on ordinary text).
    if (requires !== undefined || numbered(pattern)) {
      tests.push({
        pattern: new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, '')),
        requires: requires === undefined ? undefined : stateless(requires),
      });
      if (requires === undefined || numbered(requires)) gated = Number.NaN;
      else {
        join(gates, requires);
        gated += 1;
      }
      continue;
    }
    join(joined, pattern);
  }
  const alternation = (groups: Map<string, string[]>): RegExp[] =>
    [...groups].map(
      ([flags, sources]) => new RegExp(sources.map((source) => `(?:${source})`).join('|'), flags),
    );
  for (const pattern of alternation(joined)) tests.unshift({ pattern, requires: undefined });
  // Every gated pattern's necessary test in one alternation per flag set: on ordinary text none holds,
  // and one scan says so where each gate scanned it on its own (44 gates were most of the cost of a
  // short argument, growing with every pattern core added). Only when every pattern past the joined
  // ones has a gate that can be joined.
  const anyGate = Number.isNaN(gated) || gated === 0 ? undefined : alternation(gates);
  const ungated = anyGate === undefined ? tests : tests.filter((test) => test.requires === undefined);
  return (text) => {
    for (const { pattern, requires } of anyGate === undefined ? tests : ungated) {
      if ((requires === undefined || requires.test(text)) && pattern.test(text)) return true;
    }
    if (anyGate === undefined || !anyGate.some((gate) => gate.test(text))) return false;
    for (const { pattern, requires } of tests) {
      if (requires?.test(text) && pattern.test(text)) return true;
    }
    return false;
  };
}

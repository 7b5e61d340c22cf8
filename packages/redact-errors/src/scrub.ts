import { createSecretKeyMatcher, createSecretRedactor, REDACTED, type SecretPattern } from '@toolgate/core';
import { scrubEncodedRuns } from './encoded.js';
import { fieldReplacement } from './field-rules.js';
import { ERROR_SCRUB_PATTERNS } from './scrub-patterns.js';

/** How many matches of each pattern were removed, by pattern name (for the server log). */
export type RemovedCounts = Record<string, number>;

/** Scrubs strings and nested values, counting what it removed. */
export interface Scrubber {
  text(text: string, removed: RemovedCounts): string;
  value(value: unknown, removed: RemovedCounts): unknown;
}

const MAX_DEPTH = 32;
// Strings found clean are remembered (hints and fixed messages repeat on every failure), bounded so
// hostile input cannot grow it; strings that held something are never kept.
const CLEAN_CACHE_SIZE = 512;
const CLEAN_CACHE_MAX_LENGTH = 512;
const isSecretKey = createSecretKeyMatcher();
// A zero-width space, joiner, soft hyphen or bidi mark (Unicode's format characters), or another
// character nothing draws (Unicode's default-ignorable code points: a combining grapheme joiner, a
// variation selector, a Hangul filler) splits a secret or keyword so no pattern sees it, and a fullwidth
// form (NFKC folds it) dodges them as well; a model reads through both. Text holding either is scrubbed
// a second time with them undone.
const NOT_ASCII = /[\u0080-\uffff]/;
const FORMAT_CHARS = /[\p{Cf}\p{Default_Ignorable_Code_Point}]/gu;

/** Patterns must be global for `match` to count them and `replace` to replace every match. */
export function asGlobal(pattern: SecretPattern): SecretPattern {
  if (pattern.pattern.global) return pattern;
  return { ...pattern, pattern: new RegExp(pattern.pattern.source, `${pattern.pattern.flags}g`) };
}

/**
 * A scrubber over `patterns`, applied in order. Nested values keep their shape: every string (keys
 * included) is scrubbed, values under secret-looking keys (`password`, `token`, ...) are replaced
 * whole, as core's secret redaction does, and so are hosts, ports, database names and a Node error's
 * paths and spawn arguments under the keys that name them (`fieldReplacement`).
 */
export function createScrubber(patterns: readonly SecretPattern[]): Scrubber {
  const rules = patterns.map(asGlobal);
  const clean = new Set<string>();
  const apply = (input: string, removed: RemovedCounts): string => {
    let out = input;
    for (const { name, pattern, replace } of rules) {
      const found = out.match(pattern);
      if (found === null) continue;
      removed[name] = (removed[name] ?? 0) + found.length;
      out = out.replace(pattern, replace);
    }
    return out;
  };
  /** The scrubbed form of a run's decoding, or undefined when nothing in it was removed. */
  const decodedScan =
    (removed: RemovedCounts) =>
    (plain: string): string | undefined => {
      const found: RemovedCounts = {};
      let out = apply(plain, found);
      if (NOT_ASCII.test(out)) out = undisguised(out, found);
      if (out === plain) return undefined;
      for (const [name, count] of Object.entries(found)) {
        const key = `encoded-${name}`;
        removed[key] = (removed[key] ?? 0) + count;
      }
      return out;
    };
  const text = (input: string, removed: RemovedCounts): string => {
    if (clean.has(input)) return input;
    // Encoded runs first (see `scrubEncodedRuns`), then the patterns over the whole.
    let out = apply(scrubEncodedRuns(input, decodedScan(removed)), removed);
    if (NOT_ASCII.test(out)) out = undisguised(out, removed);
    const matched = out !== input;
    if (!matched && input.length <= CLEAN_CACHE_MAX_LENGTH) {
      if (clean.size >= CLEAN_CACHE_SIZE) clean.clear();
      clean.add(input);
    }
    return out;
  };
  // core's walk: a hostile "__proto__" key stays a key, cycles and depth are bounded, dates, errors
  // and buffers become safe strings, and a secret split over sibling strings (a key's lines as array
  // items) is found across them, exactly as on core's own boundary. The counts go to the call's record.
  let counting: RemovedCounts = {};
  const count = (name: string): void => {
    counting[name] = (counting[name] ?? 0) + 1;
  };
  const redactValue = createSecretRedactor({
    patterns: rules,
    maxDepth: MAX_DEPTH,
    redactText: (s) => text(s, counting),
    replaceEntry: (key, item, parent) => {
      if (item === null || item === undefined) return undefined;
      if (isSecretKey(key)) {
        count('secret-key');
        return REDACTED;
      }
      const field = fieldReplacement(key, item, parent);
      if (field === undefined) return undefined;
      count(field.name);
      return field.replace;
    },
    onSplitSecret: (name) => count(`split-${name}`),
  });
  const value = (input: unknown, removed: RemovedCounts): unknown => {
    const outer = counting;
    counting = removed;
    try {
      return redactValue(input);
    } finally {
      counting = outer;
    }
  };
  // Only when undoing the disguise uncovers something is the text changed: ordinary text keeps its
  // emoji joiners and its `½`.
  const undisguised = (text: string, removed: RemovedCounts): string => {
    const plain = text.replace(FORMAT_CHARS, '').normalize('NFKC');
    if (plain === text) return text;
    const found: RemovedCounts = {};
    const out = apply(plain, found);
    if (out === plain) return text;
    for (const [name, count] of Object.entries(found)) removed[name] = (removed[name] ?? 0) + count;
    return out;
  };
  return { text, value };
}

const defaultScrubber = createScrubber(ERROR_SCRUB_PATTERNS);

/**
 * One string as the model would see it in an error: secrets, stack frames, paths, SQL, connection
 * strings, hosts, IP addresses and environment dumps replaced. `patterns` replaces the defaults.
 */
export function scrubErrorText(text: string, patterns?: readonly SecretPattern[]): string {
  const scrubber = patterns === undefined ? defaultScrubber : createScrubber(patterns);
  return scrubber.text(text, {});
}

/** True when any pattern matched (a count above zero). */
export function removedAny(removed: RemovedCounts): boolean {
  for (const key in removed) if ((removed[key] ?? 0) > 0) return true;
  return false;
}

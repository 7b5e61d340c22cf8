import { CIRCULAR, FAILURE_WITHHELD, mapStrings, TRUNCATED } from '@toolgate/core';

/**
 * What a string past a failure's scrub budget becomes (and an array's or object's cut-off rest): core's
 * marker for a failure past its model-facing bound, so the model reads one marker whoever withheld.
 */
export const WITHHELD = FAILURE_WITHHELD;

/**
 * What one string costs at the least, in characters: each string pays the patterns' fixed cost
 * (a hundred-odd tests) whatever its length, so a million one-character strings are not free.
 */
export const MIN_STRING_COST = 16;

/** @default for `maxScrubChars`: 64 KiB, some 60 ms of scrubbing encoded text per pass (bench/). */
export const DEFAULT_MAX_SCRUB_CHARS = 64 * 1024;
/** The least `maxScrubChars` may be: a message and a hint at core's longest failure string. */
export const MIN_MAX_SCRUB_CHARS = 8192;

const MAX_DEPTH = 32;

/** What is left to scrub in one pass over one failure, and how many strings were withheld. */
export interface ScrubBudget {
  left: number;
  withheld: number;
}

export function createBudget(maxChars: number): ScrubBudget {
  return { left: maxChars, withheld: 0 };
}

function costOf(text: string): number {
  return Math.max(text.length, MIN_STRING_COST);
}

/**
 * Charges `text` to the budget: true when it may be scrubbed, false when it must be withheld. Once a
 * string did not fit, nothing after it does (a later short string is withheld too), so what the model
 * sees is a prefix of the failure in walk order.
 */
function charge(budget: ScrubBudget, text: string): boolean {
  const cost = costOf(text);
  if (cost <= budget.left) {
    budget.left -= cost;
    return true;
  }
  budget.left = -1;
  budget.withheld += 1;
  return false;
}

/** Whether `value`'s strings and keys fit `maxChars` (a count, no copy: a normal failure's only cost). */
export function fitsBudget(value: unknown, maxChars: number): boolean {
  return costIfPlain(value, maxChars) !== undefined;
}

/** Keys of an object (at its top) whose string values are kept whole and uncharged. */
export type Exempt = (key: string, value: string) => boolean;

/**
 * A copy of `value` whose strings and keys are kept in walk order while they fit the budget and
 * withheld after: a string past it becomes `WITHHELD`, and an array or object met once the budget is
 * spent keeps what it had and ends in one `WITHHELD` item (or key and value), so the walk stops there
 * too, however many items follow. `exempt` names top-level keys whose strings are kept uncharged.
 */
export function withinBudget(value: unknown, budget: ScrubBudget, exempt?: Exempt): unknown {
  if (budget.left >= 0) {
    const cost = costIfPlain(value, budget.left);
    if (cost !== undefined) {
      budget.left -= cost;
      return value;
    }
  }
  return boundedCopy(value, budget, exempt);
}

/**
 * The cost of `value`'s strings and keys when it is plain data (strings, numbers, booleans, null,
 * arrays, plain objects) within `left`; undefined when it is over or holds anything else (a date, an
 * error, a class instance: the copy turns those into what core's walk would).
 */
function costIfPlain(value: unknown, left: number): number | undefined {
  const count: Count = { total: 0, left, ancestors: undefined };
  try {
    return addCost(value, 0, count) ? count.total : undefined;
  } catch {
    // A throwing getter or proxy: the copy (core's walk) turns it into `[Unreadable]`.
    return undefined;
  }
}

interface Count {
  total: number;
  readonly left: number;
  // Made at the first nested object: a flat failure allocates nothing here.
  ancestors: Set<object> | undefined;
}

/** Adds `item`'s cost to `count`; false when over or not plain data. */
function addCost(item: unknown, depth: number, count: Count): boolean {
  if (typeof item === 'string') {
    count.total += costOf(item);
    return count.total <= count.left;
  }
  if (typeof item !== 'object' || item === null) return typeof item !== 'bigint';
  if (depth >= MAX_DEPTH) return true;
  if (depth > 0) {
    count.ancestors ??= new Set();
    if (count.ancestors.has(item)) return true;
    count.ancestors.add(item);
  }
  try {
    if (Array.isArray(item)) {
      for (const entry of item) if (!addCost(entry, depth + 1, count)) return false;
      return true;
    }
    const prototype = Object.getPrototypeOf(item);
    if (prototype !== Object.prototype && prototype !== null) return false;
    for (const key in item) {
      count.total += costOf(key);
      if (count.total > count.left || !addCost((item as Record<string, unknown>)[key], depth + 1, count)) {
        return false;
      }
    }
    return true;
  } finally {
    if (depth > 0) count.ancestors?.delete(item);
  }
}

function boundedCopy(value: unknown, budget: ScrubBudget, exempt: Exempt | undefined): unknown {
  const withheldRest = (): string => {
    budget.withheld += 1;
    return WITHHELD;
  };
  const text = (item: string): string => (charge(budget, item) ? item : WITHHELD);
  const ancestors = new Set<object>();
  const copy = (item: unknown, depth: number): unknown => {
    if (typeof item === 'string') return text(item);
    if (typeof item !== 'object' || item === null) return item;
    if (budget.left < 0) return withheldRest();
    if (depth >= MAX_DEPTH) return TRUNCATED;
    const prototype = Object.getPrototypeOf(item);
    const plain = Array.isArray(item) || prototype === Object.prototype || prototype === null;
    if (ancestors.has(item)) return CIRCULAR;
    // Anything else (a date, an error, a map, a class instance) as core's walk renders it, each string
    // charged (withheld at the cost of a comparison once the budget is spent).
    if (!plain) return mapStrings(item, text, { mapKey: text, maxDepth: MAX_DEPTH - depth });
    ancestors.add(item);
    try {
      if (Array.isArray(item)) {
        const out: unknown[] = [];
        for (const entry of item) {
          if (budget.left < 0) {
            out.push(withheldRest());
            break;
          }
          out.push(copy(entry, depth + 1));
        }
        return out;
      }
      const out: Record<string, unknown> = {};
      // defineProperty: a "__proto__" key stays a key.
      const put = (key: string, entry: unknown): void => {
        Object.defineProperty(out, key, {
          value: entry,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      };
      let cut = false;
      for (const key of Object.keys(item)) {
        const entry = (item as Record<string, unknown>)[key];
        if (depth === 0 && typeof entry === 'string' && exempt?.(key, entry) === true) {
          put(key, entry);
          continue;
        }
        if (cut) continue;
        const spent = budget.left < 0;
        if (spent) withheldRest();
        if (spent || !charge(budget, key)) {
          put(WITHHELD, WITHHELD);
          cut = true;
          // Only exempt keys can follow: none at depth, so stop there.
          if (exempt === undefined || depth > 0) break;
          continue;
        }
        put(key, copy(entry, depth + 1));
      }
      return out;
    } catch {
      return '[Unreadable]';
    } finally {
      ancestors.delete(item);
    }
  };
  return copy(value, 0);
}

import { types } from 'node:util';
import { CIRCULAR, TRUNCATED } from './map-strings.js';

/**
 * The most characters of strings and keys, together, of a failure's variable parts (`fields` and the
 * `_meta` other than the envelope) that the model-facing boundary walks; past it they are withheld.
 */
export const MAX_FAILURE_CHARS = 65_536;
/** The most values (strings, numbers, booleans, nulls, arrays, objects) of those parts it walks. */
export const MAX_FAILURE_VALUES = 4096;
/** What a string past a failure's bound becomes, and how a cut-off array or object ends. */
export const FAILURE_WITHHELD = '[withheld: too much text]';
/** The deepest level walked (as `mapStrings` and the secret redactor): deeper becomes `[Truncated]`. */
const MAX_DEPTH = 32;

/** What is left of one failure's bound, and how much was withheld. */
export interface FailureBudget {
  chars: number;
  values: number;
  /** Strings, values and cut-off rests withheld (0: the failure was within its bound). */
  withheld: number;
  /**
   * The keys of each large object met, enumerated once: V8 lists all of an object's keys before the
   * first one (a million keys: some 300 ms), so the count, the copy and the log's copy share one list.
   */
  readonly keys: Map<object, string[]>;
}

// Objects with more keys than this have their key list kept for the next walk of the same failure.
const KEPT_KEY_LISTS = 256;

/** A fresh bound for one failure: `scale` budgets (the log's copy gets a few), sharing `keys` lists. */
export function createFailureBudget(scale = 1, keys: Map<object, string[]> = new Map()): FailureBudget {
  return { chars: MAX_FAILURE_CHARS * scale, values: MAX_FAILURE_VALUES * scale, withheld: 0, keys };
}

/** An object's own enumerable string keys (as `Object.entries` walks them), listed once per failure. */
function keysOf(object: object, keys: Map<object, string[]>): string[] {
  let list = keys.get(object);
  if (list === undefined) {
    list = Object.keys(object);
    if (list.length > KEPT_KEY_LISTS) keys.set(object, list);
  }
  return list;
}

function spent(budget: FailureBudget): boolean {
  return budget.chars < 0 || budget.values < 0;
}

/** Charges one value of `chars` characters; false (and the budget spent) when it does not fit. */
export function chargeFailure(budget: FailureBudget, chars: number, values = 1): boolean {
  if (spent(budget)) return false;
  if (chars <= budget.chars && values <= budget.values) {
    budget.chars -= chars;
    budget.values -= values;
    return true;
  }
  budget.chars = -1;
  budget.values = -1;
  return false;
}

/**
 * `value` itself when it is plain data (strings, numbers, booleans, null, arrays, plain objects) that
 * fits what is left of `budget` (one counting walk, which stops as soon as it is over; the budget is
 * charged), else a plain copy holding what fits, in walk order: a string past the bound becomes
 * `FAILURE_WITHHELD`, and an array or object met past it keeps what it had and ends in one
 * `FAILURE_WITHHELD` item (key and value for an object), so neither the walk nor the copy grows with
 * the input. Nothing past the bound is passed on unwalked. Other values (a date, an error, a map, a
 * class instance, a proxy) are copied as `mapStrings` renders them, charged as they come out.
 * `FAILURE_WITHHELD` itself is free, so a bounded copy fits its bound when walked again.
 */
export function boundFailureValue(value: unknown, budget: FailureBudget, skip?: SkipKey): unknown {
  if (!spent(budget)) {
    const count: Count = {
      chars: 0,
      values: 0,
      maxChars: budget.chars,
      maxValues: budget.values,
      skip,
      keys: budget.keys,
    };
    let plain = false;
    try {
      plain = countPlain(value, 0, count, undefined);
    } catch {
      // A throwing getter: the copy turns it into `[Unreadable]`.
    }
    if (plain) {
      budget.chars -= count.chars;
      budget.values -= count.values;
      return value;
    }
  }
  return boundedCopy(value, budget, skip);
}

/** Top-level keys left out of the walk (and of a copy): the envelope's own, one kept whole. */
export type SkipKey = (key: string) => boolean;

interface Count {
  chars: number;
  values: number;
  readonly maxChars: number;
  readonly maxValues: number;
  readonly skip: SkipKey | undefined;
  readonly keys: Map<object, string[]>;
}

/** Adds `item`'s cost to `count`; false when over, or not plain data (the copy decides then). */
function countPlain(item: unknown, depth: number, count: Count, ancestors: Set<object> | undefined): boolean {
  count.values += 1;
  if (typeof item === 'string') {
    if (item === FAILURE_WITHHELD) {
      count.values -= 1;
      return true;
    }
    count.chars += item.length;
    return count.chars <= count.maxChars && count.values <= count.maxValues;
  }
  if (count.values > count.maxValues) return false;
  if (typeof item !== 'object' || item === null) {
    return typeof item === 'number' || typeof item === 'boolean' || item === null || item === undefined;
  }
  // Past the depth bound, the walks after this one write `[Truncated]`: the copy charges that string.
  if (depth >= MAX_DEPTH || types.isProxy(item)) return false;
  let seen = ancestors;
  if (depth > 0) {
    seen ??= new Set();
    if (seen.has(item)) return false;
    seen.add(item);
  }
  try {
    if (Array.isArray(item)) {
      for (let i = 0; i < item.length; i += 1) {
        if (!countPlain(item[i], depth + 1, count, seen)) return false;
      }
      return true;
    }
    const prototype = Object.getPrototypeOf(item);
    if (prototype !== Object.prototype && prototype !== null) return false;
    for (const key of keysOf(item, count.keys)) {
      if (depth === 0 && count.skip?.(key) === true) continue;
      if (key !== FAILURE_WITHHELD) count.chars += key.length;
      if (count.chars > count.maxChars) return false;
      if (!countPlain((item as Record<string, unknown>)[key], depth + 1, count, seen)) return false;
    }
    return true;
  } finally {
    seen?.delete(item);
  }
}

function boundedCopy(value: unknown, budget: FailureBudget, skip: SkipKey | undefined): unknown {
  const ancestors = new Set<object>();
  const withheldRest = (): string => {
    budget.withheld += 1;
    return FAILURE_WITHHELD;
  };
  const text = (item: string): string => {
    if (item === FAILURE_WITHHELD) return item;
    if (chargeFailure(budget, item.length)) return item;
    budget.withheld += 1;
    return FAILURE_WITHHELD;
  };
  // Items of an array-like, in order, until the bound is spent: then one marker ends the list.
  const list = (items: Iterable<unknown>, depth: number): unknown[] => {
    const out: unknown[] = [];
    for (const entry of items) {
      if (spent(budget)) {
        out.push(withheldRest());
        break;
      }
      const copied = copy(entry, depth + 1);
      out.push(copied);
      // The item that ran past the bound is the list's one marker.
      if (copied === FAILURE_WITHHELD && spent(budget)) break;
    }
    return out;
  };
  const copy = (item: unknown, depth: number): unknown => {
    switch (typeof item) {
      case 'string':
        return text(item);
      case 'bigint':
        return text(item.toString());
      case 'function':
      case 'symbol':
        return undefined;
      case 'number':
      case 'boolean':
      case 'undefined':
        return chargeFailure(budget, 0) ? item : withheldRest();
    }
    if (item === null) return chargeFailure(budget, 0) ? null : withheldRest();
    if (spent(budget)) return withheldRest();
    const object = item as object;
    if (depth >= MAX_DEPTH) return text(TRUNCATED);
    if (ancestors.has(object)) return text(CIRCULAR);
    ancestors.add(object);
    try {
      if (object instanceof Date) return Number.isNaN(object.getTime()) ? null : text(object.toISOString());
      if (object instanceof Error) return text(`${object.name}: ${object.message}`);
      if (ArrayBuffer.isView(object) || object instanceof ArrayBuffer)
        return text(`[${object.byteLength} bytes]`);
      if (!chargeFailure(budget, 0)) return withheldRest();
      if (Array.isArray(object)) return list(arrayItems(object), depth);
      if (object instanceof Map || object instanceof Set) {
        return list(object instanceof Map ? pairs(object) : object.values(), depth);
      }
      const prototype = Object.getPrototypeOf(object);
      const plain = prototype === Object.prototype || prototype === null;
      const toJSON = (object as { toJSON?: unknown }).toJSON;
      if (!plain && typeof toJSON === 'function') {
        // The object was charged as one value; what it sends is charged as it comes out.
        budget.values += 1;
        return copy(toJSON.call(object), depth);
      }
      const out: Record<string, unknown> = {};
      for (const key of keysOf(object, budget.keys)) {
        if (depth === 0 && skip?.(key) === true) continue;
        if (spent(budget) || (key !== FAILURE_WITHHELD && !chargeFailure(budget, key.length, 0))) {
          put(out, FAILURE_WITHHELD, withheldRest());
          break;
        }
        const entry = copy((object as Record<string, unknown>)[key], depth + 1);
        if (entry !== undefined) put(out, key, entry);
        if (entry === FAILURE_WITHHELD && spent(budget)) break;
      }
      return out;
    } catch {
      return text('[Unreadable]');
    } finally {
      ancestors.delete(object);
    }
  };
  return copy(value, 0);
}

/** An array's items by index (holes read as undefined), without copying it first. */
function* arrayItems(array: readonly unknown[]): Generator<unknown> {
  for (let i = 0; i < array.length; i += 1) yield array[i];
}

function* pairs(map: Map<unknown, unknown>): Generator<unknown> {
  for (const pair of map) yield pair;
}

// defineProperty, not assignment: a "__proto__" key stays a key.
function put(out: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}

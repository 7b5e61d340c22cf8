import { types } from 'node:util';

/**
 * JSON with object keys sorted at every depth, so equal values always give equal text. The one helper
 * every package uses for cache keys and hashes. `undefined` members are dropped as JSON.stringify
 * drops them; a cycle throws, and so does any value JSON.stringify would write as `{}` whatever it
 * holds, since two different ones would give one key: a Map, a Set, a WeakMap, a WeakSet, a RegExp, and
 * an instance of a class (no `toJSON`) with no enumerable field of its own, whose state, if any, is in
 * private fields or its prototype (a transform's `new RegExp(s)`, an Error, an ArrayBuffer). Convert
 * such a value to a string, an array or a plain object first.
 */
export function canonicalJson(value: unknown): string {
  // Most values keys are made of (validated arguments, identities) are plain data whose keys are
  // already in order: JSON.stringify writes exactly the canonical text for them, natively and with a
  // quarter of the allocation.
  if (isOrderedPlain(value, 0)) return JSON.stringify(value) ?? 'null';
  return write(value, 0, undefined) ?? 'null';
}

/** Deeper than this, the slow path decides (it finds cycles). */
const MAX_FAST_DEPTH = 32;

/**
 * True when JSON.stringify gives the canonical text: only null, strings, booleans, finite numbers,
 * arrays and plain objects (no toJSON, no prototype but Object's or none) whose own keys are already
 * in sorted order, at every depth. Anything else (a Date, a bigint, `undefined`, unsorted keys, a
 * cycle, a very deep value) answers false and is written by `write`.
 */
function isOrderedPlain(value: unknown, depth: number): boolean {
  if (value === null) return true;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      break;
    default:
      return false;
  }
  if (depth >= MAX_FAST_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i += 1) if (!isOrderedPlain(value[i], depth + 1)) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  const record = value as Record<string, unknown>;
  if (typeof record.toJSON === 'function') return false;
  let previous: string | undefined;
  for (const key in record) {
    if (!Object.hasOwn(record, key)) return false;
    if (previous !== undefined && !(previous < key)) return false;
    if (!isOrderedPlain(record[key], depth + 1)) return false;
    previous = key;
  }
  return true;
}

// Cycles are looked for only below this depth: every cycle reaches it, and the shallow values keys are
// made of (nearly all) then cost no Set per call. From there on, the objects on the current path are
// tracked and a repeat throws.
const TRACK_FROM_DEPTH = 32;

function write(value: unknown, depth: number, path: Set<object> | undefined): string | undefined {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    case 'bigint':
      return JSON.stringify(value.toString());
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  const object = value as { toJSON?: () => unknown };
  if (typeof object.toJSON === 'function') return write(object.toJSON(), depth + 1, path);
  const unwritable = unwritableKind(object);
  if (unwritable !== undefined) {
    throw new TypeError(
      `canonicalJson: cannot serialise a ${unwritable}: its contents are not JSON and it would be written as {}; convert it to an array or a plain object first`,
    );
  }
  let tracked: Set<object> | undefined;
  if (depth >= TRACK_FROM_DEPTH) {
    tracked = path ?? new Set();
    if (tracked.has(object)) throw new TypeError('canonicalJson: cannot serialise a cyclic structure');
    tracked.add(object);
  }
  try {
    if (Array.isArray(object)) {
      let out = '[';
      for (let i = 0; i < object.length; i += 1) {
        if (i > 0) out += ',';
        out += write(object[i], depth + 1, tracked) ?? 'null';
      }
      return `${out}]`;
    }
    const record = object as Record<string, unknown>;
    const keys = Object.keys(record);
    if (keys.length === 0 && !isRootObject(object)) {
      throw new TypeError(
        `canonicalJson: cannot serialise ${describeInstance(object)} with no enumerable field of its own: it would be written as {} whatever it holds; convert it to a string or a plain object first`,
      );
    }
    if (keys.length > 1) keys.sort();
    let out = '{';
    for (const key of keys) {
      const text = write(record[key], depth + 1, tracked);
      if (text === undefined) continue;
      if (out.length > 1) out += ',';
      out += `${JSON.stringify(key)}:${text}`;
    }
    return `${out}}`;
  } finally {
    tracked?.delete(object);
  }
}

/**
 * Whether an object's prototype is none or a realm's `Object.prototype` (a plain object, also from
 * another realm): its content is its own enumerable fields, so an empty one is `{}` indeed.
 */
function isRootObject(object: object): boolean {
  const prototype: unknown = Object.getPrototypeOf(object);
  return prototype === null || Object.getPrototypeOf(prototype) === null;
}

function describeInstance(object: object): string {
  let name: unknown;
  try {
    name = (object as { constructor?: { name?: unknown } }).constructor?.name;
  } catch {
    name = undefined;
  }
  return typeof name === 'string' && name !== '' ? `an instance of ${name}` : 'an object of a class';
}

/** The name of a value whose contents JSON cannot see (any realm), or undefined. */
function unwritableKind(object: object): string | undefined {
  if (types.isRegExp(object)) return 'RegExp';
  if (types.isMap(object)) return 'Map';
  if (types.isSet(object)) return 'Set';
  if (types.isWeakMap(object)) return 'WeakMap';
  if (types.isWeakSet(object)) return 'WeakSet';
  return undefined;
}

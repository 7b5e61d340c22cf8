/** Options of {@link mapStrings}. */
export interface MapStringsOptions {
  /** Deepest level walked; a deeper object or array becomes `[Truncated]`. @default 32 */
  maxDepth?: number;
  /**
   * Called for every own key of every object before its value is walked. A string return replaces the
   * value wholesale (not passed to `fn`); `undefined` walks the value as usual. Lets a redactor blank
   * values under secret-looking keys in the same walk. `parent` is the object the entry belongs to (the
   * original, not the copy), for rules that depend on its other keys.
   * @default undefined (every value is walked)
   */
  replaceEntry?: (key: string, value: unknown, parent: object) => string | undefined;
  /**
   * Maps each object key too (after `replaceEntry` saw the original). Two keys mapped to the same name
   * are both kept: the later one under `name (2)` (then `(3)`, ...), so a key written to collide with
   * another after redaction (two secret-shaped keys, or a key spelled `[REDACTED]`) never hides that
   * other key's value from what the copy is for (an audit record, a log line).
   * @default undefined (keys are kept as they are)
   */
  mapKey?: (key: string) => string;
}

/** What replaces an object or array deeper than `maxDepth`. */
export const TRUNCATED = '[Truncated]';
/** What replaces an object that contains itself. */
export const CIRCULAR = '[Circular]';

/**
 * A JSON-safe deep copy of `value` with `fn` applied to every string in it: object values, array items,
 * `Error` text, dates and numbers that JSON cannot hold. The one walk every redactor uses, so whatever
 * a failure carries (content text, structuredContent, `_meta` at any depth) is seen the same way.
 *
 * - Object keys are kept (mapped only with `mapKey`) as own data properties: a `"__proto__"` key from JSON.parse
 *   stays a key, it never sets the copy's prototype.
 * - Cycles become `[Circular]`; nesting deeper than `maxDepth` becomes `[Truncated]`. A shared
 *   (non-cyclic) reference is copied twice, as JSON would.
 * - Non-plain values are turned into what JSON would send, then mapped: `Date` to its ISO string,
 *   `Error` to `"Name: message"`, bigint to its decimal string, `Map` to an array of `[key, value]`
 *   pairs, `Set` to an array, a byte buffer (Buffer, typed arrays, ArrayBuffer) to `[N bytes]` (never
 *   its content), an object with `toJSON()` to that method's result, any other class instance to its
 *   own enumerable properties. Functions and symbols are dropped (`undefined`), as JSON drops them.
 * - An object whose properties throw on access (a hostile getter or proxy) becomes `[Unreadable]`.
 * The input is never changed.
 */
export function mapStrings(
  value: unknown,
  fn: (s: string) => string,
  options: MapStringsOptions = {},
): unknown {
  const maxDepth = options.maxDepth ?? 32;
  const { replaceEntry, mapKey } = options;
  const seen = new Set<object>();

  const walk = (item: unknown, depth: number): unknown => {
    switch (typeof item) {
      case 'string':
        return fn(item);
      case 'number':
      case 'boolean':
      case 'undefined':
        return item;
      case 'bigint':
        return fn(item.toString());
      case 'function':
      case 'symbol':
        return undefined;
    }
    if (item === null) return null;
    const object = item as object;
    if (depth >= maxDepth) return TRUNCATED;
    if (seen.has(object)) return CIRCULAR;
    seen.add(object);
    try {
      return walkObject(object, depth);
    } catch {
      // A throwing getter, toJSON or proxy trap must not take the failure path down with it.
      return '[Unreadable]';
    } finally {
      seen.delete(object);
    }
  };

  const walkObject = (object: object, depth: number): unknown => {
    if (Array.isArray(object)) return object.map((entry) => walk(entry, depth + 1));
    if (object instanceof Date) return Number.isNaN(object.getTime()) ? null : fn(object.toISOString());
    if (object instanceof Error) return fn(`${object.name}: ${object.message}`);
    if (ArrayBuffer.isView(object)) return `[${object.byteLength} bytes]`;
    if (object instanceof ArrayBuffer) return `[${object.byteLength} bytes]`;
    if (object instanceof Map) return [...object].map((pair) => walk(pair, depth + 1));
    if (object instanceof Set) return [...object].map((entry) => walk(entry, depth + 1));
    const prototype = Object.getPrototypeOf(object);
    const plain = prototype === Object.prototype || prototype === null;
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    // A class's own toJSON decides what it sends; a plain object's "toJSON" key is just data.
    if (!plain && typeof toJSON === 'function') return walk(toJSON.call(object), depth);
    const out: Record<string, unknown> = {};
    // Per mapped name that collided, the next number to try (made at the first collision only).
    let taken: Map<string, number> | undefined;
    for (const [key, entry] of Object.entries(object)) {
      const replaced = replaceEntry?.(key, entry, object);
      const mapped = replaced ?? walk(entry, depth + 1);
      if (mapped === undefined) continue;
      let name = key;
      if (mapKey !== undefined) {
        name = mapKey(key);
        if (Object.hasOwn(out, name)) {
          taken ??= new Map();
          name = nextFreeName(out, name, taken);
        }
      }
      // defineProperty, not assignment: a hostile "__proto__" key must stay a key, not set the prototype.
      Object.defineProperty(out, name, {
        value: mapped,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  };

  return walk(value, 0);
}

/**
 * The name a key gets in `out` when `name` is taken there: `name (2)`, then `(3)`, ..., the first not
 * taken. `taken` holds, per name that collided in this object, the next number to try (one Map per
 * object, made at its first collision), so thousands of keys colliding on one name cost one probe
 * each, not a count from 2 every time. What every copy that maps key names uses, so two keys mapped to
 * one name never merge (one value would vanish from what the copy is for: an audit record, a log line).
 */
export function nextFreeName(out: object, name: string, taken: Map<string, number>): string {
  let number = taken.get(name) ?? 2;
  while (Object.hasOwn(out, `${name} (${number})`)) number += 1;
  taken.set(name, number + 1);
  return `${name} (${number})`;
}

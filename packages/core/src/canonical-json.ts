/**
 * JSON with object keys sorted at every depth, so equal values always give equal text. The one helper
 * every package uses for cache keys and hashes. `undefined` members are dropped as JSON.stringify
 * drops them; a cycle throws.
 */
export function canonicalJson(value: unknown): string {
  return write(value, 0, undefined) ?? 'null';
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

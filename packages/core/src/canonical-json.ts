/**
 * JSON with object keys sorted at every depth, so equal values always give equal text. The one helper
 * every package uses for cache keys and hashes. `undefined` members are dropped as JSON.stringify
 * drops them; a cycle throws.
 */
export function canonicalJson(value: unknown): string {
  return write(value, new Set()) ?? 'null';
}

function write(value: unknown, seen: Set<object>): string | undefined {
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
  if (typeof object.toJSON === 'function') return write(object.toJSON(), seen);
  if (seen.has(object)) throw new TypeError('canonicalJson: cannot serialise a cyclic structure');
  seen.add(object);
  try {
    if (Array.isArray(object)) {
      return `[${object.map((item) => write(item, seen) ?? 'null').join(',')}]`;
    }
    const record = object as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of Object.keys(record).sort()) {
      const text = write(record[key], seen);
      if (text !== undefined) parts.push(`${JSON.stringify(key)}:${text}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    seen.delete(object);
  }
}

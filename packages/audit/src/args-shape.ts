const MAX_DEPTH = 32;
const MAX_ITEMS = 20;

/**
 * The shape of a JSON value with no value in it: objects keep their keys, arrays their first
 * items' shapes (and a count of the rest), everything else becomes its type name.
 */
export function shapeOf(value: unknown, depth = 0): unknown {
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    if (depth >= MAX_DEPTH) return 'array';
    const items = value.slice(0, MAX_ITEMS).map((item) => shapeOf(item, depth + 1));
    if (value.length > MAX_ITEMS) items.push(`...${value.length - MAX_ITEMS} more`);
    return items;
  }
  if (typeof value !== 'object') return typeof value;
  if (depth >= MAX_DEPTH) return 'object';
  // A null-prototype target keeps a `__proto__` key as data instead of swapping the prototype.
  const out: Record<string, unknown> = Object.create(null);
  for (const [key, item] of Object.entries(value)) out[key] = shapeOf(item, depth + 1);
  return out;
}

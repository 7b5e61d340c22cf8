import { canonicalJson, nextFreeName, redactSecretsInText, type SecretPattern } from '@toolgate/core';
import { createPatternPretest, KEY_CACHE_LIMIT, KEY_CACHE_MAX_CHARS } from './redacted-json.js';

const MAX_DEPTH = 32;
const MAX_ITEMS = 20;

/**
 * The canonical JSON of args' shape (`shapeOf`), with secret patterns redacted in key names: a key is
 * the client's free text too (a token used as a key), recorded in shape mode as in redacted mode.
 * Key names up to 256 characters are remembered (10,000 of them), so a repeated key is tested once.
 */
export function createShapeJson(patterns: readonly SecretPattern[]): (value: unknown) => string {
  const mayHoldSecret = createPatternPretest(patterns);
  const keys = new Map<string, string>();
  const keyOf = (key: string): string => {
    let recorded = keys.get(key);
    if (recorded === undefined) {
      recorded = mayHoldSecret(key) ? redactSecretsInText(key, patterns) : key;
      if (key.length > KEY_CACHE_MAX_CHARS) return recorded;
      if (keys.size >= KEY_CACHE_LIMIT) keys.clear();
      keys.set(key, recorded);
    }
    return recorded;
  };
  return (value) => canonicalJson(shapeOf(value, keyOf, 0));
}

/**
 * The shape of a JSON value with no value in it: objects keep their keys (as `keyOf` records them),
 * arrays their first items' shapes (and a count of the rest), everything else becomes its type name.
 */
function shapeOf(value: unknown, keyOf: (key: string) => string, depth: number): unknown {
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    if (depth >= MAX_DEPTH) return 'array';
    const items = value.slice(0, MAX_ITEMS).map((item) => shapeOf(item, keyOf, depth + 1));
    if (value.length > MAX_ITEMS) items.push(`...${value.length - MAX_ITEMS} more`);
    return items;
  }
  if (typeof value !== 'object') return typeof value;
  if (depth >= MAX_DEPTH) return 'object';
  // A null-prototype target keeps a `__proto__` key as data instead of swapping the prototype.
  const out: Record<string, unknown> = Object.create(null);
  // Per recorded name that collided, the next number to try (made at the first collision only).
  let taken: Map<string, number> | undefined;
  for (const [key, item] of Object.entries(value)) {
    let name = keyOf(key);
    // Two keys recorded under one name (two secret-shaped keys both redacted to `[REDACTED]`, or a
    // key spelled `[REDACTED]` beside one) would merge, and the shape of one argument would vanish
    // from the record: the later one becomes `name (2)`, `name (3)`, ..., as core's `mapStrings`
    // names them in redacted mode (core's `nextFreeName`, one probe per colliding key).
    if (Object.hasOwn(out, name)) {
      taken ??= new Map();
      name = nextFreeName(out, name, taken);
    }
    out[name] = shapeOf(item, keyOf, depth + 1);
  }
  return out;
}

import type { CompiledQuery } from './compile.js';
import { TOTAL_COLUMN } from './compile.js';

/** The page's items (declared keys only, JSON-safe values) and the total the statement counted. */
export function readRows(
  compiled: CompiledQuery,
  rows: readonly Record<string, unknown>[],
): { items: Record<string, unknown>[]; total: number } {
  const total = rows.length === 0 ? 0 : Number(rows[0]?.[TOTAL_COLUMN]);
  const items = rows.map((row) => {
    const item: Record<string, unknown> = {};
    for (const column of compiled.columns) item[column.key] = jsonValue(row[column.key]);
    return item;
  });
  return { items, total };
}

// structuredContent must survive JSON: timestamps as ISO strings, int8 as a number when exact.
// Array columns too, item by item: PGlite parses an int8[] to bigints past 2^53 and a bytea[] to
// Uint8Arrays, and one bigint anywhere in the answer made JSON.stringify throw, so every call whose
// page held that row failed as `internal` (a value in the data broke the tool for whoever listed it).
function jsonValue(value: unknown): unknown {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (typeof value === 'bigint') {
    return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)
      ? Number(value)
      : value.toString();
  }
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (Array.isArray(value)) return value.map(jsonValue);
  return value === undefined ? null : value;
}

import type { CompiledBinding, CompiledQuery } from './compile.js';
import type { Queryable, QueryRunner } from './types.js';

/**
 * Per binding that matches by text, whether its column's equality is looser than its text, read from the
 * catalog (the type and collation of the relation's column, a view's too). Equality is the text's own
 * only for int2, int4, int8 and uuid (whose other spellings `claimProbe` refuses) and for text and
 * varchar in a deterministic collation. Any other type (numeric `1.0` = `1`, citext `ALICE` = `alice`,
 * char(n), floats, money, dates, bool, inet, jsonb, a domain, ...) or a nondeterministic collation gets
 * the exact-text condition, so a claim can select only rows whose column prints that very claim.
 */
const COLUMN_EQUALITY = `SELECT a.attname AS "column", a.atttypid = ANY('{20,21,23,25,1043,2950}'::oid[])
  AND coalesce(c.collisdeterministic, true) AS "exact"
  FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_collation c ON c.oid = a.attcollation
  WHERE a.attrelid = pg_catalog.to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
  AND a.attname = ANY($2)`;

// Read once per Queryable (a pool, a client, a PGlite) and relation column, shared by its tools.
const looseColumns = new WeakMap<Queryable, Map<string, boolean>>();

const columnKey = (compiled: CompiledQuery, binding: CompiledBinding): string =>
  `${compiled.from} ${binding.column}`;

/**
 * Per binding, whether its condition needs the exact-text one beside it; undefined while some column
 * matched by text has not been read on this Queryable yet.
 */
export function knownLooseBindings(db: Queryable, compiled: CompiledQuery): readonly boolean[] | undefined {
  const known = looseColumns.get(db);
  if (known === undefined) return undefined;
  const loose: boolean[] = [];
  for (const binding of compiled.bindings) {
    const value = binding.matchesText ? known.get(columnKey(compiled, binding)) : false;
    if (value === undefined) return undefined;
    loose.push(value);
  }
  return loose;
}

/** Reads the bound columns' types and collations (one statement, in the call's transaction). */
export async function readLooseBindings(
  runner: QueryRunner,
  db: Queryable,
  compiled: CompiledQuery,
): Promise<readonly boolean[]> {
  const columns = compiled.bindings.filter((binding) => binding.matchesText).map((binding) => binding.column);
  const { rows } = await runner.query(COLUMN_EQUALITY, [compiled.from, columns]);
  const exact = new Map(rows.map((row) => [row.column, row.exact === true]));
  let known = looseColumns.get(db);
  if (known === undefined) {
    known = new Map();
    looseColumns.set(db, known);
  }
  return compiled.bindings.map((binding) => {
    if (!binding.matchesText) return false;
    const isExact = exact.get(binding.column);
    // A relation or column the catalog does not know (the statement will fail): text, and read again.
    if (isExact === undefined) return true;
    known.set(columnKey(compiled, binding), !isExact);
    return !isExact;
  });
}

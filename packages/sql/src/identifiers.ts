// Identifiers come from the declaration only, yet a typo or a copied name must not become SQL: each one
// is checked when the tool is defined and then always double-quoted.
const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

// PostgreSQL's fully reserved key words (Appendix C, "reserved"): legal when quoted, but a column or
// table so named is nearly always a mistake in a declaration.
const RESERVED = new Set([
  'all',
  'analyse',
  'analyze',
  'and',
  'any',
  'array',
  'as',
  'asc',
  'asymmetric',
  'authorization',
  'binary',
  'both',
  'case',
  'cast',
  'check',
  'collate',
  'collation',
  'column',
  'concurrently',
  'constraint',
  'create',
  'cross',
  'current_catalog',
  'current_date',
  'current_role',
  'current_schema',
  'current_time',
  'current_timestamp',
  'current_user',
  'default',
  'deferrable',
  'desc',
  'distinct',
  'do',
  'else',
  'end',
  'except',
  'false',
  'fetch',
  'for',
  'foreign',
  'freeze',
  'from',
  'full',
  'grant',
  'group',
  'having',
  'ilike',
  'in',
  'initially',
  'inner',
  'intersect',
  'into',
  'is',
  'isnull',
  'join',
  'lateral',
  'leading',
  'left',
  'like',
  'limit',
  'localtime',
  'localtimestamp',
  'natural',
  'not',
  'notnull',
  'null',
  'offset',
  'on',
  'only',
  'or',
  'order',
  'outer',
  'overlaps',
  'placing',
  'primary',
  'references',
  'returning',
  'right',
  'select',
  'session_user',
  'similar',
  'some',
  'symmetric',
  'system_user',
  'table',
  'tablesample',
  'then',
  'to',
  'trailing',
  'true',
  'union',
  'unique',
  'user',
  'using',
  'variadic',
  'verbose',
  'when',
  'where',
  'window',
  'with',
]);

// System columns and catalogs: reading them through a tool is never what a declaration means.
const SYSTEM_NAMES = new Set([
  'oid',
  'tableoid',
  'ctid',
  'xmin',
  'xmax',
  'cmin',
  'cmax',
  'information_schema',
]);

// PostgreSQL truncates longer names silently (NAMEDATALEN - 1), so two distinct names could collide.
const MAX_IDENTIFIER_LENGTH = 63;

/** Why `name` is not accepted as an identifier, or undefined when it is. */
export function identifierProblem(name: unknown): string | undefined {
  if (typeof name !== 'string') return 'is not a string';
  if (!IDENTIFIER.test(name)) return 'must match ^[a-z_][a-z0-9_]*$';
  if (name.length > MAX_IDENTIFIER_LENGTH) return `is longer than ${MAX_IDENTIFIER_LENGTH} characters`;
  if (RESERVED.has(name)) return 'is a reserved SQL key word';
  if (SYSTEM_NAMES.has(name) || name.startsWith('pg_')) return 'names a system object';
  return undefined;
}

/** Checks an identifier from a declaration and returns it double-quoted; throws at definition time. */
export function quoteIdentifier(name: unknown, what: string): string {
  const problem = identifierProblem(name);
  if (problem !== undefined) {
    throw new TypeError(`${what}: identifier ${JSON.stringify(name)} ${problem}`);
  }
  // The pattern admits no double quote, so quoting needs no escaping.
  return `"${name as string}"`;
}

// Public face of @toolgate/sql: what a server author calls and the declaration types they write.
// Internals (buildQuery, escapeLike, identifierProblem, ...) stay in their files.
export { type PgClientLike, type PgPoolClientLike, type PgPoolLike, pgQueryable } from './pg-queryable.js';
export { type PGliteLike, type PGliteTransactionLike, pgliteQueryable } from './pglite-queryable.js';
export type { PgQueryableOptions } from './read-only-session.js';
export { sqlTool } from './sql-tool.js';
export type {
  BindResolver,
  BindSource,
  BindSpec,
  BindValue,
  ColumnSpec,
  EnumFilter,
  EqualsFilter,
  FilterSpec,
  FromSpec,
  LimitSpec,
  OneOfFilter,
  Queryable,
  QueryRows,
  QueryRunner,
  RangeFilter,
  ReadOnlyOptions,
  SortSpec,
  SqlQueryDeclaration,
  SqlToolOptions,
  TextFilter,
  WithinDaysFilter,
} from './types.js';

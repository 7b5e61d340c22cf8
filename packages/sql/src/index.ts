// Public face of @toolgate/sql: explicit named exports only.
export { buildQuery } from './build-query.js';
export { escapeLike } from './escape-like.js';
export { identifierProblem } from './identifiers.js';
export { type PgClientLike, type PgPoolClientLike, type PgPoolLike, pgQueryable } from './pg-queryable.js';
export { type PGliteLike, type PGliteTransactionLike, pgliteQueryable } from './pglite-queryable.js';
export { sqlTool } from './sql-tool.js';
export type {
  BindResolver,
  BindSpec,
  BindValue,
  BuiltQuery,
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

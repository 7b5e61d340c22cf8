import type { ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { CallerIdentity, ToolMiddleware, ToolRequest } from '@toolgate/core';

/** One statement's rows, as the adapters return them. */
export interface QueryRows {
  readonly rows: Record<string, unknown>[];
}

/** Runs parameterized statements inside one transaction an adapter opened. */
export interface QueryRunner {
  /** Runs one statement; `text` uses `$1`-style placeholders for every value. */
  query(text: string, values: readonly unknown[]): Promise<QueryRows>;
}

/** How a read-only transaction is run. */
export interface ReadOnlyOptions {
  /** Statement timeout for every statement of the transaction, in ms (a positive integer). */
  readonly timeoutMs: number;
  /** Aborts the work: the adapter stops waiting and releases (or drops) its connection. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * A database the SQL tools can read: one method that runs `work` in a read-only transaction with a
 * statement timeout and always ends the transaction. `pgQueryable` and `pgliteQueryable` implement it;
 * write your own to wrap another driver or to record statements in tests.
 */
export interface Queryable {
  /** A short engine name for logs, e.g. `pg` or `pglite`. */
  readonly engine: string;
  readOnly<T>(options: ReadOnlyOptions, work: (runner: QueryRunner) => Promise<T>): Promise<T>;
  /**
   * Runs ONE statement with the same guarantees (read-only, the statement timeout, the abort). Optional:
   * `sqlTool` uses it when present, else `readOnly` with one statement. `pgQueryable` with
   * `readOnlySession` answers it in one round trip when the timeout is the session's.
   */
  readOnlyQuery?(options: ReadOnlyOptions, text: string, values: readonly unknown[]): Promise<QueryRows>;
}

/** An output column: its name, or the column and the key it gets in each item. */
export type ColumnSpec =
  | string
  | { readonly column: string; readonly as?: string; readonly description?: string };

/** The table or view a tool reads: `orders`, or `{ schema: 'sales', table: 'orders' }`. */
export type FromSpec = string | { readonly schema?: string; readonly table: string };

interface FilterBase {
  /** The column compared; defaults to the filter's name. */
  readonly column?: string;
  /** What the model reads about this argument. */
  readonly description: string;
  /** Whether the model must give it. @default false */
  readonly required?: boolean;
}

/** Equality on one of a fixed list of values: `"col" = $n`. */
export interface EnumFilter extends FilterBase {
  readonly kind: 'enum';
  readonly values: readonly [string, ...string[]];
  readonly default?: string;
}

/** Membership in a list the model picks from allowed values: `"col" = ANY($n)`. */
export interface OneOfFilter extends FilterBase {
  readonly kind: 'oneOf';
  readonly values: readonly [string, ...string[]];
}

/** Equality on a free value: a string (bounded length), an integer (bounded) or a uuid. */
export interface EqualsFilter extends FilterBase {
  readonly kind: 'equals';
  readonly type: 'string' | 'integer' | 'uuid';
  /** For `string`: the longest accepted value. @default 200 */
  readonly maxLength?: number;
  /** For `string`: a pattern the whole value must match (anchor it), e.g. `/^\d{16}$/`. */
  readonly pattern?: RegExp;
  /** For `integer`: the smallest accepted value. */
  readonly min?: number;
  /** For `integer`: the largest accepted value. */
  readonly max?: number;
}

/**
 * A range: two optional arguments `min_<name>` and `max_<name>` (`"col" >= $n`, `"col" <= $n`).
 * For `date`, values are `YYYY-MM-DD` and the upper bound includes the whole day.
 */
export interface RangeFilter extends FilterBase {
  readonly kind: 'range';
  readonly type: 'number' | 'integer' | 'date';
  /** The smallest value either bound may take (a `YYYY-MM-DD` string for `date`). */
  readonly min: number | string;
  /** The largest value either bound may take (a `YYYY-MM-DD` string for `date`). */
  readonly max: number | string;
}

/** "Within the last N days": `"col" >= now() - make_interval(days => $n)`. */
export interface WithinDaysFilter extends FilterBase {
  readonly kind: 'withinDays';
  /** The largest N the model may ask for. */
  readonly max: number;
  /** N when the model gives none; without it the filter is optional. */
  readonly default?: number;
}

/** A text match, escaped for LIKE: `prefix` is `"col" LIKE 'value%'`, `contains` is `'%value%'`. */
export interface TextFilter extends FilterBase {
  readonly kind: 'prefix' | 'contains';
  /** The longest accepted value. @default 200 */
  readonly maxLength?: number;
  /** Use ILIKE instead of LIKE. @default false */
  readonly caseInsensitive?: boolean;
}

/** A filter the model may fill; each becomes one (a range: two) typed input field(s). */
export type FilterSpec =
  | EnumFilter
  | OneOfFilter
  | EqualsFilter
  | RangeFilter
  | WithinDaysFilter
  | TextFilter;

/** A value bound from the caller's context (auth claims), never from the arguments. */
export type BindValue = string | number | boolean | bigint | readonly (string | number)[] | null | undefined;

/**
 * What a bound value is read from: the verified request (auth info with the token's claims) and
 * core's caller identity. A `ToolContext` fits it too, so resolvers written as
 * `(ctx) => ctx.request.authInfo?.extra?.customerId` keep working.
 */
export interface BindSource {
  readonly request: ToolRequest;
  readonly caller: CallerIdentity;
}

/**
 * Reads a bound value from the caller. Core calls it before the middleware chain (the tool's `bind`),
 * so the value rides on `ctx.bindings` and is part of every key derived from the call.
 */
export type BindResolver = (source: BindSource) => BindValue;

/**
 * A bound filter: a function (the key is the column) or the column, the resolver, whether a
 * missing value is allowed (then the filter is dropped; by default the call is refused), whether
 * a list of values is (`= ANY`; by default a list refuses the call, so a claim shaped as a list
 * cannot widen the scope) and how a claim matches the column (by its text, by default).
 */
export type BindSpec =
  | BindResolver
  | {
      readonly column?: string;
      readonly value: BindResolver;
      /**
       * `undefined` or `null` drops the filter instead of refusing the call; an empty list or a blank
       * string still refuses it (a caller scoped to nothing must not see every row). @default false
       */
      readonly optional?: boolean;
      /** An array value compares with `= ANY($n)`; without it an array refuses the call. @default false */
      readonly list?: boolean;
      /**
       * `'text'`: the claim selects only rows whose column, cast to text, is exactly the claim (case,
       * scale, spelling), whatever the column's type or collation. `'column'`: the column type's own `=` decides
       * (`citext` ignores case, `numeric` scale, `+1` is `1`): only where the identity provider already
       * treats every spelling the column equates as one caller. @default 'text'
       */
      readonly match?: 'text' | 'column';
    };

/** Whitelisted sort keys; the model picks one of `<key>_asc` / `<key>_desc`. */
export interface SortSpec {
  /** Sort key names, or key name to column. */
  readonly keys: readonly string[] | Readonly<Record<string, string>>;
  /** The directions offered. @default ['asc', 'desc'] */
  readonly directions?: readonly ('asc' | 'desc')[];
  /** The option used when the model gives none, e.g. `created_at_desc`. */
  readonly default: string;
  /** A unique column appended to every ORDER BY (same direction) so equal keys sort stably. */
  readonly tiebreaker?: string;
}

/** How many rows one call returns. */
export interface LimitSpec {
  /** Rows returned when the model gives no limit. */
  readonly default: number;
  /** The most rows one call returns; larger values are clamped on the server. */
  readonly max: number;
}

/** What `buildQuery` needs: the query part of a declaration, free of SDK and database handles. */
export interface SqlQueryDeclaration {
  /** The table or view. */
  readonly from: FromSpec;
  /** The whitelisted output columns, in order. */
  readonly columns: readonly ColumnSpec[];
  /** The filters the model may fill, by argument name. @default {} */
  readonly filters?: Readonly<Record<string, FilterSpec>>;
  /** Filters whose values come from the caller's context, by name. @default {} */
  readonly bind?: Readonly<Record<string, BindSpec>>;
  /** Sort keys and directions; without it rows come in the database's order. */
  readonly sort?: SortSpec;
  readonly limit: LimitSpec;
}

/** Everything `sqlTool` takes. */
export interface SqlToolOptions extends SqlQueryDeclaration {
  /** The tool name, `snake_case`, e.g. `search_orders`. */
  readonly name: string;
  readonly title?: string;
  /** When to use the tool, and when not. */
  readonly description: string;
  /** Where the query runs: `pgQueryable(pool)` or `pgliteQueryable(db)`. */
  readonly db: Queryable;
  /** Statement timeout of each call, in ms. @default 5000 */
  readonly timeoutMs?: number;
  /** The plural noun used in notes, e.g. `orders`. @default 'rows' */
  readonly noun?: string;
  /** This tool's own middleware, inside the server's global chain. @default [] */
  readonly middleware?: ToolMiddleware[];
  /** Tool annotations; `readOnlyHint: true` and `openWorldHint: false` are always set. @default {} */
  readonly annotations?: ToolAnnotations;
}

/** A statement ready to run: the SQL text (fixed per declaration shape) and its parameters. */
export interface BuiltQuery {
  readonly text: string;
  readonly values: readonly unknown[];
  /** How many of `values`, from the first, were bound from the caller (`$1`..`$n`), not from arguments. */
  readonly boundValues: number;
  /** The limit used, after clamping. */
  readonly limit: number;
  /** The limit the arguments asked for, when it was clamped. */
  readonly requestedLimit: number | undefined;
  /** Bound values the column's type may read as another value, to be read back before the statement. */
  readonly probes: readonly ClaimProbe[] | undefined;
}

/** A statement that reads a bound value as its column's type and prints it back (see `checkProbe`). */
export interface ClaimProbe {
  readonly text: string;
  readonly value: string | readonly (string | number)[];
}

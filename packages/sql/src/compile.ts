import { escapeLike } from './escape-like.js';
import { identifierProblem, quoteIdentifier } from './identifiers.js';
import type { BindResolver, FilterSpec, SqlQueryDeclaration } from './types.js';

/** The column of the total count in every generated statement; refused as an output name. */
export const TOTAL_COLUMN = '_toolgate_total';

const ARGUMENT_NAME = /^[a-z_][a-z0-9_]*$/;
const RESERVED_ARGUMENTS = new Set(['sort', 'limit']);
/** The longest text argument when a filter sets no `maxLength`. */
export const DEFAULT_TEXT_LENGTH = 200;
const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;

/**
 * One condition, with the SQL around its placeholder fixed at definition time: per call only the
 * placeholder number and the value change.
 */
export interface Condition {
  /** `$n` goes between `before` and `after`. */
  readonly before: string;
  readonly after: string;
  /** Turns the validated argument into the bound value (LIKE escaping, for instance). */
  readonly toValue: (value: unknown) => unknown;
}

/** A filter argument the model fills, and the condition it adds when present. */
export interface CompiledArgument {
  readonly arg: string;
  readonly filter: string;
  readonly spec: FilterSpec;
  readonly condition: Condition;
  /** For `range`: which bound this argument is. */
  readonly bound?: 'min' | 'max';
}

/** A filter bound from the caller's context. */
export interface CompiledBinding {
  readonly name: string;
  readonly resolve: BindResolver;
  readonly optional: boolean;
  /** Declared `list: true`: an array compares with `= ANY`; otherwise an array refuses the call. */
  readonly acceptsList: boolean;
  readonly scalar: Condition;
  readonly list: Condition;
  /**
   * Reads `$1` (one value; for `list`, an array) as the column's type and prints it back as text: what
   * the column makes of a claim that may spell a value another way (`+42`, `042`, an uppercase uuid).
   */
  readonly probe: { readonly scalar: string; readonly list: string };
  /** The column's name as the catalog spells it. */
  readonly column: string;
  /** `match: 'text'` (the default): a claim selects only rows whose column, cast to text, is the claim. */
  readonly matchesText: boolean;
  /**
   * Added after `scalar`/`list` where the column's equality is looser than its text (see
   * `column-match.ts`): only rows whose column, as text in the C collation, is the claim itself.
   */
  readonly exactText: { readonly scalar: Condition; readonly list: Condition };
}

export interface CompiledOutputColumn {
  readonly key: string;
  readonly description: string | undefined;
}

/** A declaration checked once and turned into SQL fragments. */
export interface CompiledQuery {
  readonly selectList: string;
  readonly from: string;
  readonly columns: readonly CompiledOutputColumn[];
  readonly bindings: readonly CompiledBinding[];
  readonly arguments: readonly CompiledArgument[];
  /** Sort option (`created_at_desc`) to its ORDER BY clause. */
  readonly sortOptions: ReadonlyMap<string, string>;
  readonly defaultSort: string | undefined;
  readonly limit: { readonly default: number; readonly max: number };
  /** Statement text per shape (which conditions are present, which sort), built on first use. */
  readonly statements: Map<string, string>;
  /** Whether some binding matches by text: its column's type and collation are then read once. */
  readonly matchesText: boolean;
}

const identity = (value: unknown): unknown => value;
// The text a claim spells, as the driver sends it (a number's or a bigint's decimal, `true`).
const claimText = (value: unknown): unknown =>
  Array.isArray(value) ? value.map((item) => String(item)) : String(value);
const MATCHES = ['text', 'column'];

/** Checks a declaration (throws a TypeError naming the problem) and precomputes its SQL fragments. */
export function compileDeclaration(declaration: SqlQueryDeclaration, what = 'sqlTool'): CompiledQuery {
  const from = compileFrom(declaration.from, what);
  const { selectList, columns } = compileColumns(declaration.columns, what);
  const bindings = Object.entries(declaration.bind ?? {}).map(([name, spec]) => {
    const resolve = typeof spec === 'function' ? spec : spec?.value;
    if (typeof resolve !== 'function') {
      throw new TypeError(
        `${what}: bind.${name} must be a function of { request, caller } or { column?, value, optional?, list? }`,
      );
    }
    if (isInherited(name))
      throw new TypeError(`${what}: bind.${name}: the name is a property every object inherits`);
    const match = typeof spec === 'function' ? undefined : spec.match;
    if (match !== undefined && !MATCHES.includes(match)) {
      throw new TypeError(`${what}: bind.${name}.match must be 'text' or 'column'`);
    }
    const unquoted = typeof spec === 'function' ? name : (spec.column ?? name);
    const column = quoteIdentifier(unquoted, `${what}: bind.${name}`);
    // The column's text in the C collation: a nondeterministic collation no longer folds case or accents.
    const asText = `CAST(${column} AS text) COLLATE "C"`;
    return {
      name,
      resolve,
      optional: typeof spec === 'function' ? false : spec.optional === true,
      acceptsList: typeof spec === 'function' ? false : spec.list === true,
      scalar: { before: `${column} = `, after: '', toValue: identity },
      list: { before: `${column} = ANY(`, after: ')', toValue: identity },
      column: unquoted,
      matchesText: match !== 'column',
      exactText: {
        scalar: { before: `${asText} = `, after: '', toValue: claimText },
        list: { before: `${asText} = ANY(`, after: ')', toValue: claimText },
      },
      // The CASE takes the column's type (its subquery never runs), so $1 is read as the comparison reads it.
      probe: {
        scalar: `SELECT CAST(CASE WHEN false THEN (SELECT ${column} FROM ${from} LIMIT 0) ELSE $1 END AS text) AS "read"`,
        list: `SELECT CAST(CASE WHEN false THEN ARRAY(SELECT ${column} FROM ${from} LIMIT 0) ELSE $1 END AS text[]) AS "read"`,
      },
    } satisfies CompiledBinding;
  });
  const compiledArguments: CompiledArgument[] = [];
  for (const [name, spec] of Object.entries(declaration.filters ?? {})) {
    const label = `${what}: filters.${name}`;
    if (!ARGUMENT_NAME.test(name) || RESERVED_ARGUMENTS.has(name) || isInherited(name)) {
      throw new TypeError(
        `${label}: the argument name must match ^[a-z_][a-z0-9_]*$ and not be sort or limit, nor a property every object inherits`,
      );
    }
    if (bindings.some((binding) => binding.name === name)) {
      throw new TypeError(`${label}: a filter may not share its name with a bound parameter`);
    }
    compiledArguments.push(...compileFilter(name, spec, label));
  }
  const argumentNames = new Set<string>();
  for (const argument of compiledArguments) {
    if (argumentNames.has(argument.arg) || RESERVED_ARGUMENTS.has(argument.arg)) {
      throw new TypeError(`${what}: two filters produce the argument ${argument.arg}`);
    }
    // A range's min_/max_ argument too: a bound parameter's name never appears in the input.
    if (bindings.some((binding) => binding.name === argument.arg)) {
      throw new TypeError(
        `${what}: the argument ${argument.arg} would share its name with a bound parameter`,
      );
    }
    argumentNames.add(argument.arg);
  }
  const { sortOptions, defaultSort } = compileSort(declaration, what);
  return {
    selectList,
    from,
    columns,
    bindings,
    arguments: compiledArguments,
    sortOptions,
    defaultSort,
    limit: compileLimit(declaration.limit, what),
    statements: new Map(),
    matchesText: bindings.some((binding) => binding.matchesText),
  };
}

// `constructor`, `__proto__`: an argument or binding so named that is absent would read the
// prototype's value instead of undefined, and the input schema would refuse every call.
function isInherited(name: string): boolean {
  return name in Object.prototype;
}

function compileFrom(from: SqlQueryDeclaration['from'], what: string): string {
  if (typeof from === 'string') return quoteIdentifier(from, `${what}: from`);
  if (typeof from !== 'object' || from === null)
    throw new TypeError(`${what}: from must name a table or view`);
  const table = quoteIdentifier(from.table, `${what}: from.table`);
  return from.schema === undefined
    ? table
    : `${quoteIdentifier(from.schema, `${what}: from.schema`)}.${table}`;
}

function compileColumns(
  specs: SqlQueryDeclaration['columns'],
  what: string,
): { selectList: string; columns: CompiledOutputColumn[] } {
  if (!Array.isArray(specs) || specs.length === 0)
    throw new TypeError(`${what}: columns must list at least one column`);
  const keys = new Set<string>();
  const parts: string[] = [];
  const columns: CompiledOutputColumn[] = [];
  specs.forEach((spec, index) => {
    const label = `${what}: columns[${index}]`;
    const column = typeof spec === 'string' ? spec : spec?.column;
    const key = typeof spec === 'string' ? spec : (spec.as ?? spec.column);
    const quoted = quoteIdentifier(column, label);
    const alias = quoteIdentifier(key, `${label}.as`);
    if (key === TOTAL_COLUMN)
      throw new TypeError(`${label}: ${TOTAL_COLUMN} is reserved for the total count`);
    // A row is a plain object: `row.__proto__ = value` would set its prototype (a json column's
    // object) or be dropped (any other value), and reading it back would find Object.prototype.
    if (key === '__proto__')
      throw new TypeError(
        `${label}: the output key __proto__ cannot be a property of a row; name it with \`as\``,
      );
    if (keys.has(key)) throw new TypeError(`${label}: the output key ${key} appears twice`);
    keys.add(key);
    parts.push(column === key ? quoted : `${quoted} AS ${alias}`);
    columns.push({ key, description: typeof spec === 'string' ? undefined : spec.description });
  });
  return { selectList: parts.join(', '), columns };
}

function compileFilter(name: string, spec: FilterSpec, label: string): CompiledArgument[] {
  if (typeof spec !== 'object' || spec === null)
    throw new TypeError(`${label}: must be a filter declaration`);
  if (typeof spec.description !== 'string' || spec.description.trim() === '') {
    throw new TypeError(`${label}: a description is required; the model reads it`);
  }
  const column = quoteIdentifier(spec.column ?? name, `${label}.column`);
  const one = (condition: Condition): CompiledArgument[] => [{ arg: name, filter: name, spec, condition }];
  switch (spec.kind) {
    case 'enum':
      checkValues(spec.values, label);
      if (spec.default !== undefined && !spec.values.includes(spec.default)) {
        throw new TypeError(`${label}: the default ${JSON.stringify(spec.default)} is not one of the values`);
      }
      return one({ before: `${column} = `, after: '', toValue: identity });
    case 'oneOf':
      checkValues(spec.values, label);
      return one({ before: `${column} = ANY(`, after: ')', toValue: identity });
    case 'equals':
      if (!['string', 'integer', 'uuid'].includes(spec.type)) {
        throw new TypeError(`${label}: type must be string, integer or uuid`);
      }
      if (spec.type === 'string')
        checkPositiveInteger(spec.maxLength ?? DEFAULT_TEXT_LENGTH, `${label}.maxLength`);
      if (spec.type === 'integer') checkBounds(spec.min, spec.max, label, true);
      return one({ before: `${column} = `, after: '', toValue: identity });
    case 'range':
      return compileRange(name, spec, column, label);
    case 'withinDays':
      checkPositiveInteger(spec.max, `${label}.max`);
      if (
        spec.default !== undefined &&
        !(Number.isInteger(spec.default) && spec.default >= 1 && spec.default <= spec.max)
      ) {
        throw new TypeError(`${label}: the default must be an integer from 1 to max`);
      }
      return one({ before: `${column} >= now() - make_interval(days => `, after: ')', toValue: identity });
    case 'prefix':
    case 'contains': {
      checkPositiveInteger(spec.maxLength ?? DEFAULT_TEXT_LENGTH, `${label}.maxLength`);
      // E'\\' is one backslash whatever standard_conforming_strings says.
      const operator = spec.caseInsensitive === true ? 'ILIKE' : 'LIKE';
      const lead = spec.kind === 'contains' ? '%' : '';
      return one({
        before: `${column} ${operator} `,
        after: ` ESCAPE E'\\\\'`,
        toValue: (value) => `${lead}${escapeLike(value as string)}%`,
      });
    }
    default:
      throw new TypeError(
        `${label}: unknown filter kind ${JSON.stringify((spec as { kind?: unknown }).kind)}`,
      );
  }
}

function compileRange(
  name: string,
  spec: Extract<FilterSpec, { kind: 'range' }>,
  column: string,
  label: string,
): CompiledArgument[] {
  if (spec.type === 'date') {
    if (
      typeof spec.min !== 'string' ||
      typeof spec.max !== 'string' ||
      !ISO_DATE.test(spec.min) ||
      !ISO_DATE.test(spec.max) ||
      spec.min > spec.max
    ) {
      throw new TypeError(`${label}: a date range needs min <= max as YYYY-MM-DD strings`);
    }
    return [
      {
        arg: `min_${name}`,
        filter: name,
        spec,
        bound: 'min',
        condition: { before: `${column} >= `, after: '::date', toValue: identity },
      },
      // The upper bound includes the whole day, also for timestamp columns.
      {
        arg: `max_${name}`,
        filter: name,
        spec,
        bound: 'max',
        condition: { before: `${column} < (`, after: '::date + 1)', toValue: identity },
      },
    ];
  }
  if (spec.type !== 'number' && spec.type !== 'integer')
    throw new TypeError(`${label}: type must be number, integer or date`);
  checkBounds(spec.min, spec.max, label, spec.type === 'integer');
  if (spec.min === undefined || spec.max === undefined)
    throw new TypeError(`${label}: a range needs min and max`);
  return [
    {
      arg: `min_${name}`,
      filter: name,
      spec,
      bound: 'min',
      condition: { before: `${column} >= `, after: '', toValue: identity },
    },
    {
      arg: `max_${name}`,
      filter: name,
      spec,
      bound: 'max',
      condition: { before: `${column} <= `, after: '', toValue: identity },
    },
  ];
}

function compileSort(
  declaration: SqlQueryDeclaration,
  what: string,
): { sortOptions: Map<string, string>; defaultSort: string | undefined } {
  const sortOptions = new Map<string, string>();
  const sort = declaration.sort;
  if (sort === undefined) return { sortOptions, defaultSort: undefined };
  const keys: [string, string][] = Array.isArray(sort.keys)
    ? (sort.keys as readonly string[]).map((key) => [key, key])
    : Object.entries(sort.keys as Record<string, string>);
  if (keys.length === 0) throw new TypeError(`${what}: sort.keys must name at least one key`);
  const directions = sort.directions ?? ['asc', 'desc'];
  if (
    directions.length === 0 ||
    directions.some((direction) => direction !== 'asc' && direction !== 'desc')
  ) {
    throw new TypeError(`${what}: sort.directions must be asc and/or desc`);
  }
  const tiebreaker =
    sort.tiebreaker === undefined ? undefined : quoteIdentifier(sort.tiebreaker, `${what}: sort.tiebreaker`);
  for (const [key, column] of keys) {
    const problem = identifierProblem(key);
    if (problem !== undefined) throw new TypeError(`${what}: sort key ${JSON.stringify(key)} ${problem}`);
    const quoted = quoteIdentifier(column, `${what}: sort.keys.${key}`);
    for (const direction of directions) {
      const sql = direction === 'asc' ? 'ASC' : 'DESC';
      const extra = tiebreaker !== undefined && tiebreaker !== quoted ? `, ${tiebreaker} ${sql}` : '';
      sortOptions.set(`${key}_${direction}`, ` ORDER BY ${quoted} ${sql}${extra}`);
    }
  }
  if (!sortOptions.has(sort.default)) {
    throw new TypeError(`${what}: sort.default must be one of ${[...sortOptions.keys()].join(', ')}`);
  }
  return { sortOptions, defaultSort: sort.default };
}

function compileLimit(limit: SqlQueryDeclaration['limit'], what: string): { default: number; max: number } {
  if (typeof limit !== 'object' || limit === null)
    throw new TypeError(`${what}: limit { default, max } is required`);
  checkPositiveInteger(limit.max, `${what}: limit.max`);
  checkPositiveInteger(limit.default, `${what}: limit.default`);
  if (limit.default > limit.max) throw new TypeError(`${what}: limit.default must not exceed limit.max`);
  return { default: limit.default, max: limit.max };
}

function checkValues(values: readonly string[], label: string): void {
  if (!Array.isArray(values) || values.length === 0 || values.some((value) => typeof value !== 'string')) {
    throw new TypeError(`${label}: values must be a non-empty list of strings`);
  }
}

function checkPositiveInteger(value: unknown, label: string): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(`${label} must be a positive integer`);
  }
}

function checkBounds(min: unknown, max: unknown, label: string, integer: boolean): void {
  for (const [value, which] of [
    [min, 'min'],
    [max, 'max'],
  ] as const) {
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
      throw new TypeError(`${label}.${which} must be a finite ${integer ? 'integer' : 'number'}`);
    }
  }
  if (typeof min === 'number' && typeof max === 'number' && min > max) {
    throw new TypeError(`${label}: min must not exceed max`);
  }
}

import { boundCondition, claimProbe } from './bind.js';
import { type CompiledQuery, type Condition, compileDeclaration, TOTAL_COLUMN } from './compile.js';
import type { BindValue, BuiltQuery, ClaimProbe, SqlQueryDeclaration } from './types.js';

const MAX_CACHED_STATEMENTS = 512;

// Compiled once per declaration object; a declaration is data, so it is treated as immutable.
const compiledDeclarations = new WeakMap<SqlQueryDeclaration, CompiledQuery>();

/**
 * The statement and parameters one call runs: pure, no database. `args` are the model's (validated)
 * arguments, `bound` the values of the declaration's `bind` entries. Every value becomes a `$n`
 * parameter; the text depends only on which filters are present and on the sort option.
 */
export function buildQuery(
  declaration: SqlQueryDeclaration,
  args: Readonly<Record<string, unknown>>,
  bound: Readonly<Record<string, BindValue>> = {},
  looseBindings?: readonly boolean[],
): BuiltQuery {
  let compiled = compiledDeclarations.get(declaration);
  if (!compiled) {
    compiled = compileDeclaration(declaration, 'buildQuery');
    compiledDeclarations.set(declaration, compiled);
  }
  return buildCompiledQuery(compiled, args, bound, looseBindings);
}

/**
 * `buildQuery` for an already compiled declaration (the tool's per-call path). `looseBindings` says,
 * per binding, whether its column's equality is looser than its text (see `column-match.ts`): such a
 * binding also compares the column's text with the claim's.
 */
export function buildCompiledQuery(
  compiled: CompiledQuery,
  args: Readonly<Record<string, unknown>>,
  bound: Readonly<Record<string, BindValue>>,
  looseBindings?: readonly boolean[],
): BuiltQuery {
  const conditions: Condition[] = [];
  const values: unknown[] = [];
  let probes: ClaimProbe[] | undefined;
  let shape = '';
  for (let index = 0; index < compiled.bindings.length; index += 1) {
    const binding = compiled.bindings[index]!;
    // Checked again here, the last step before SQL: a handler may be called with any bindings.
    const value = bound[binding.name];
    const condition = boundCondition(binding, value);
    if (condition === undefined) {
      shape += '0';
      continue;
    }
    conditions.push(condition);
    values.push(value);
    const list = condition === binding.list;
    if (looseBindings?.[index] === true) {
      const exact = list ? binding.exactText.list : binding.exactText.scalar;
      conditions.push(exact);
      values.push(exact.toValue(value));
      shape += list ? '4' : '3';
    } else {
      shape += list ? '2' : '1';
    }
    const probe = claimProbe(binding, condition, value);
    if (probe !== undefined) {
      probes ??= [];
      probes.push(probe);
    }
  }
  shape += '|';
  const boundValues = values.length;
  for (const argument of compiled.arguments) {
    const value = args[argument.arg];
    if (value === undefined || value === null) {
      shape += '0';
      continue;
    }
    conditions.push(argument.condition);
    values.push(argument.condition.toValue(value));
    shape += '1';
  }
  const sortOption = pickSort(compiled, args.sort);
  shape += `|${sortOption ?? ''}`;
  const { limit, requestedLimit } = clampLimit(compiled, args.limit);
  values.push(limit);
  let text = compiled.statements.get(shape);
  if (text === undefined) {
    text = statementText(compiled, conditions, sortOption, values.length);
    // Bounded: a declaration with many filters has many shapes, but only used ones are kept.
    if (compiled.statements.size < MAX_CACHED_STATEMENTS) compiled.statements.set(shape, text);
  }
  return { text, values, boundValues, limit, requestedLimit, probes };
}

function pickSort(compiled: CompiledQuery, requested: unknown): string | undefined {
  if (typeof requested === 'string' && compiled.sortOptions.has(requested)) return requested;
  return compiled.defaultSort;
}

// Clamped here whatever the input schema said: a middleware may rewrite arguments, and a handler
// may be called directly.
function clampLimit(
  compiled: CompiledQuery,
  requested: unknown,
): { limit: number; requestedLimit: number | undefined } {
  if (requested === undefined || requested === null)
    return { limit: compiled.limit.default, requestedLimit: undefined };
  const asked =
    typeof requested === 'number' && Number.isFinite(requested) ? Math.trunc(requested) : Number.NaN;
  if (Number.isNaN(asked)) return { limit: compiled.limit.default, requestedLimit: undefined };
  const limit = Math.min(compiled.limit.max, Math.max(1, asked));
  return { limit, requestedLimit: limit === asked ? undefined : asked };
}

/**
 * The page and its total in one statement: the uncorrelated count subquery is an InitPlan that runs
 * once (an index-only count), while the page keeps its index order and stops at LIMIT. On 1,000,000
 * rows this measured 10x faster than `count(*) OVER ()`, which reads every matching row.
 */
function statementText(
  compiled: CompiledQuery,
  conditions: readonly Condition[],
  sortOption: string | undefined,
  limitIndex: number,
): string {
  const where =
    conditions.length === 0
      ? ''
      : ` WHERE ${conditions.map((condition, index) => `${condition.before}$${index + 1}${condition.after}`).join(' AND ')}`;
  const orderBy = sortOption === undefined ? '' : (compiled.sortOptions.get(sortOption) ?? '');
  return (
    `SELECT ${compiled.selectList}, (SELECT count(*) FROM ${compiled.from}${where}) AS "${TOTAL_COLUMN}"` +
    ` FROM ${compiled.from}${where}${orderBy} LIMIT $${limitIndex}`
  );
}

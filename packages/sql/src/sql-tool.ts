import { defineTool, ok, type ToolContext, type ToolDefinition, type ToolResult } from '@toolgate/core';
import { bindValues, checkProbe } from './bind.js';
import { buildCompiledQuery } from './build-query.js';
import { knownLooseBindings, readLooseBindings } from './column-match.js';
import { type CompiledQuery, compileDeclaration } from './compile.js';
import { toToolError } from './database-error.js';
import { inputShape, outputShape } from './input-schema.js';
import { resultNote } from './note.js';
import { readRows } from './rows.js';
import { isTimeoutMs, MAX_TIMEOUT_MS } from './transaction-start.js';
import type { BindValue, SqlToolOptions } from './types.js';

const DEFAULT_TIMEOUT_MS = 5000;

/**
 * Defines a read-only SQL tool from a declaration. The model fills typed fields (one per filter,
 * `sort`, `limit`); the SQL text comes only from the declaration, checked here, and every value is a
 * `$n` parameter. Each call runs in a read-only transaction with a statement timeout and answers
 * `{ items, total }` with a note on how many of how many were returned.
 */
export function sqlTool(options: SqlToolOptions): ToolDefinition {
  const what = `sqlTool(${String(options?.name)})`;
  if (typeof options?.db?.readOnly !== 'function') {
    throw new TypeError(`${what}: db must be a Queryable, e.g. pgQueryable(pool) or pgliteQueryable(db)`);
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!isTimeoutMs(timeoutMs)) {
    throw new TypeError(
      `${what}: timeoutMs must be a positive integer no larger than ${MAX_TIMEOUT_MS} (PostgreSQL's statement_timeout limit)`,
    );
  }
  const compiled = compileDeclaration(options, what);
  const noun = options.noun ?? 'rows';
  const db = options.db;
  // Per binding, whether its column compares looser than its text: read on first use (column-match.ts).
  const columns: BoundColumns = { loose: compiled.matchesText ? undefined : [] };
  const tool = defineTool({
    name: options.name,
    ...(options.title !== undefined && { title: options.title }),
    description: options.description,
    input: inputShape(compiled),
    output: outputShape(compiled),
    annotations: { ...options.annotations, readOnlyHint: true, openWorldHint: false },
    ...(options.middleware !== undefined && { middleware: options.middleware }),
    // Core resolves the caller-bound values before the chain and records them on ctx.bindings.
    ...(compiled.bindings.length > 0 && { bind: (request, caller) => bindValues(compiled, request, caller) }),
    handler: (args, ctx) => runSqlTool(compiled, db, columns, timeoutMs, noun, args, ctx as ToolContext),
  });
  return tool as unknown as ToolDefinition;
}

interface BoundColumns {
  loose: readonly boolean[] | undefined;
}

async function runSqlTool(
  compiled: CompiledQuery,
  db: SqlToolOptions['db'],
  columns: BoundColumns,
  timeoutMs: number,
  noun: string,
  args: Record<string, unknown>,
  ctx: ToolContext,
): Promise<ToolResult> {
  // Bound by core from the caller (the tool's bind), never from the arguments.
  const bound = ctx.bindings as Readonly<Record<string, BindValue>>;
  columns.loose ??= knownLooseBindings(db, compiled);
  const unread = columns.loose === undefined;
  // Built (and the bound values checked) before any SQL, also on a first call that reads the columns.
  let query = buildCompiledQuery(compiled, args, bound, columns.loose);
  let rows: Record<string, unknown>[];
  try {
    const options = { timeoutMs, signal: ctx.signal };
    // One statement: an adapter that can run it alone (one round trip) says so with readOnlyQuery. The
    // first call of a tool that matches claims by text reads its bound columns' types first, and a claim
    // the column may read as another value is read back first, in the same transaction.
    rows =
      unread || query.probes !== undefined
        ? await db.readOnly(options, async (runner) => {
            if (unread) {
              const loose = await readLooseBindings(runner, db, compiled);
              if (loose.includes(true)) query = buildCompiledQuery(compiled, args, bound, loose);
              columns.loose = knownLooseBindings(db, compiled);
            }
            for (const probe of query.probes ?? [])
              checkProbe(probe, (await runner.query(probe.text, [probe.value])).rows[0]?.read);
            return (await runner.query(query.text, query.values)).rows;
          })
        : db.readOnlyQuery === undefined
          ? await db.readOnly(options, async (runner) => (await runner.query(query.text, query.values)).rows)
          : (await db.readOnlyQuery(options, query.text, query.values)).rows;
  } catch (error) {
    // Core logs a thrown ToolError with its cause (the raw driver error) under an incident id.
    throw toToolError(error, ctx.signal, timeoutMs, query.boundValues);
  }
  const { items, total } = readRows(compiled, rows);
  const note = resultNote(items.length, total, noun, query.limit, compiled.limit.max, query.requestedLimit);
  return ok({ items }, { total, note });
}

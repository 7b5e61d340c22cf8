import * as z from 'zod';
import { type ArgumentIssue, fail, type ToolResult } from './result.js';
import type { ArgumentVerdict } from './types.js';

export interface ValidatedArguments {
  readonly verdict: ArgumentVerdict;
  /** The parsed arguments when the verdict is ok, the raw ones otherwise. */
  readonly args: Record<string, unknown>;
}

/** The verdict of arguments the schema accepted (one frozen object for every call). */
export const ARGUMENTS_OK: ArgumentVerdict = Object.freeze({ ok: true });

/** The verdict and arguments of a finished parse of `input` (core's dispatch parses inline). */
export function argumentVerdict(
  schema: z.ZodObject,
  input: unknown,
  parsed: ReturnType<z.ZodObject['safeParse']>,
): ValidatedArguments {
  if (parsed.success) return { verdict: ARGUMENTS_OK, args: parsed.data as Record<string, unknown> };
  const allowed = Object.keys(schema.shape);
  return {
    verdict: { ok: false, issues: describeIssues(parsed.error.issues, allowed, input) },
    args: isRecord(input) ? input : {},
  };
}

/** The most issues a refusal lists; the rest are counted in one last issue. */
export const MAX_LISTED_ISSUES = 32;
/** The longest argument path a refusal quotes (the model chose it: an unknown key can be any size). */
const MAX_ISSUE_PATH = 128;

/**
 * Each zod issue in the model's terms, at most `MAX_LISTED_ISSUES` of them (arguments with 50,000
 * unknown keys are one zod issue naming them all), then one issue counting the rest: the refusal, the
 * audit record and every middleware reading `ctx.validation` stay small whatever the model sent.
 */
function describeIssues(
  issues: readonly z.core.$ZodIssue[],
  allowed: readonly string[],
  input: unknown,
): ArgumentIssue[] {
  const out: ArgumentIssue[] = [];
  let total = 0;
  for (const issue of issues) {
    total += issue.code === 'unrecognized_keys' ? issue.keys.length : 1;
    if (out.length >= MAX_LISTED_ISSUES) continue;
    const authored = !CORE_WORDED.has(issue.code);
    for (const described of describeIssue(issue, allowed, input, MAX_LISTED_ISSUES - out.length)) {
      const listed = { path: clipPath(described.path), expected: described.expected };
      if (authored) authorWritten.add(listed);
      out.push(listed);
    }
  }
  // An issue's description can count more than one (a wrong type is one); the rest is what is unlisted.
  const unlisted = total - out.length;
  if (unlisted > 0) {
    out.push({ path: `(${unlisted} more)`, expected: 'not listed; fix the ones above and call again' });
  }
  return out;
}

// Issues core describes in its own words (from the schema's kinds, bounds, formats and values, and
// the model's own keys); every other issue's description is its zod message, which a schema's author
// writes (`ctx.addIssue`, `.refine`, a custom error map) and may fill with anything: a caught error, a
// connection string. Kept in step with `describeIssue`'s cases.
const CORE_WORDED = new Set<string>([
  'unrecognized_keys',
  'invalid_type',
  'invalid_value',
  'too_big',
  'too_small',
  'invalid_format',
]);

// The listed issues whose path and description came from the schema's author rather than from core:
// `invalidArgumentsResult` puts these, and only these, through the boundary's scrubbing.
const authorWritten = new WeakSet<ArgumentIssue>();

function clipPath(path: string): string {
  return path.length > MAX_ISSUE_PATH ? `${path.slice(0, MAX_ISSUE_PATH)}…` : path;
}

type ParseResult = ReturnType<z.ZodType['safeParse']>;

/** Per schema: true when it runs no function of the tool author's, so zod's synchronous parse serves. */
const synchronous = new WeakMap<object, boolean>();

/** Refinements their author declared synchronous and pure (`synchronousRefinements`), by check object. */
const declaredChecks = new WeakSet<object>();

/**
 * Declares that `schema`'s refinements (`.refine`, `.superRefine`, `.check` with a function) are
 * synchronous and have no side effects, so a tool schema holding it is still validated with zod's
 * synchronous parse (several times faster for an object). The declaration travels with the schema
 * through `.describe`, `.optional`, `.min` and the like; a refinement added afterwards is not
 * covered. Should one of them return a promise after all, that call's parse runs again async (so
 * each refinement before it runs twice, once) and the tool's schema is parsed async from then on.
 * Transforms, custom and lazy schemas are never covered. Returns `schema`.
 */
export function synchronousRefinements<T extends z.ZodType>(schema: T): T {
  for (const check of (schema._zod.def as SchemaDef).checks ?? []) {
    if (check._zod?.def?.check === 'custom') declaredChecks.add(check);
  }
  return schema;
}

/**
 * zod's `safeParse` for a schema that runs no author's function (a refinement, a transform, a custom
 * or lazy schema), else `safeParseAsync`. zod 4's synchronous parse of an object runs a compiled fast
 * path its async parse cannot use: measured, 2.2 against 23 µs for a ten-row result and 0.3 against
 * 1.2 µs for a one-field input. A schema with a function of the author's is always parsed async, so
 * an async refinement runs once per call, never in a synchronous attempt first. Should zod still meet
 * a promise synchronously (a kind of schema this does not know), it says so with `$ZodAsyncError`
 * before any result: that schema is parsed async from then on.
 */
export function safeParseFast(schema: z.ZodType, value: unknown): ParseResult | Promise<ParseResult> {
  let sync = synchronous.get(schema);
  if (sync === undefined) {
    sync = !runsAuthorCode(schema, new Set());
    synchronous.set(schema, sync);
  }
  if (sync) {
    try {
      return schema.safeParse(value);
    } catch (error) {
      if (!(error instanceof z.core.$ZodAsyncError)) throw error;
      synchronous.set(schema, false);
    }
  }
  return schema.safeParseAsync(value);
}

// Schemas that hold no other schema and run nothing of the author's (their checks are looked at apart).
const LEAVES = new Set([
  'string',
  'number',
  'int',
  'boolean',
  'bigint',
  'symbol',
  'null',
  'undefined',
  'void',
  'never',
  'any',
  'unknown',
  'date',
  'nan',
  'literal',
  'enum',
  'template_literal',
  'file',
]);
// Wrappers of one inner schema (`catch` and `default` call their own functions synchronously).
const WRAPPERS = new Set(['optional', 'nullable', 'default', 'prefault', 'nonoptional', 'readonly', 'catch']);

interface SchemaDef {
  readonly type?: string;
  readonly checks?: readonly { readonly _zod?: { readonly def?: { readonly check?: string } } }[];
  readonly [part: string]: unknown;
}

/**
 * True when parsing `schema` may run a function the author wrote (which may return a promise): a
 * refinement anywhere, a transform, a custom, lazy or promise schema, or any kind not known here.
 * `seen`: schemas already being looked at (a recursive schema refers back to itself).
 */
function runsAuthorCode(schema: unknown, seen: Set<unknown>): boolean {
  const def = (schema as { _zod?: { def?: SchemaDef } } | undefined)?._zod?.def;
  if (def === undefined) return true;
  if (seen.has(schema)) return false;
  seen.add(schema);
  const undeclared = (check: NonNullable<SchemaDef['checks']>[number]): boolean =>
    check._zod?.def?.check === 'custom' && !declaredChecks.has(check);
  if (def.checks?.some(undeclared)) return true;
  const type = def.type ?? '';
  const inner = (...parts: unknown[]): boolean =>
    parts.some((part) => part !== undefined && runsAuthorCode(part, seen));
  if (LEAVES.has(type)) return false;
  if (WRAPPERS.has(type)) return inner(def.innerType);
  switch (type) {
    case 'object':
      return inner(...Object.values((def.shape ?? {}) as Record<string, unknown>), def.catchall);
    case 'array':
      return inner(def.element);
    case 'set':
      return inner(def.valueType);
    case 'record':
    case 'map':
      return inner(def.keyType, def.valueType);
    case 'tuple':
      return inner(...((def.items ?? []) as unknown[]), def.rest);
    case 'union':
      return inner(...((def.options ?? []) as unknown[]));
    case 'intersection':
      return inner(def.left, def.right);
    case 'pipe':
      return inner(def.in, def.out);
    default:
      return true;
  }
}

/**
 * The `invalid_argument` result for refused arguments, naming each field and what it expects. An
 * issue whose words came from the schema's author (a custom issue's message and path) passes `scrub`
 * (the boundary's: core's secret patterns, the cut and the scrub hooks) piece by piece, before core
 * composes its own words around it, so the result is then passed on as core wrote it.
 */
export function invalidArgumentsResult(
  toolName: string,
  issues: readonly ArgumentIssue[],
  scrub?: (text: string) => string,
): ToolResult {
  if (scrub !== undefined) {
    issues = issues.map((issue) =>
      authorWritten.has(issue) ? { path: scrub(issue.path), expected: scrub(issue.expected) } : issue,
    );
  }
  const names = [...new Set(issues.map((issue) => issue.path))];
  return fail('invalid_argument', `Invalid arguments for ${toolName}: ${names.join(', ')}.`, {
    hint: `Fix and call again: ${issues.map((issue) => `${issue.path}: ${issue.expected}`).join('; ')}.`,
    fields: [...issues],
  });
}

function describeIssue(
  issue: z.core.$ZodIssue,
  allowed: readonly string[],
  input: unknown,
  limit: number,
): ArgumentIssue[] {
  const path = issue.path.length > 0 ? issue.path.map(String).join('.') : '(arguments)';
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.slice(0, limit).map((key) => ({
        path: issue.path.length > 0 ? `${path}.${key}` : key,
        expected: `not an accepted argument; remove it${allowed.length > 0 && issue.path.length === 0 ? ` (accepted: ${allowed.join(', ')})` : ''}`,
      }));
    case 'invalid_type': {
      const received = valueAt(input, issue.path);
      if (received === undefined) return [{ path, expected: `required, ${article(issue.expected)}` }];
      return [{ path, expected: `${article(issue.expected)}, not ${typeName(received)}` }];
    }
    case 'invalid_value':
      return [{ path, expected: `one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}` }];
    case 'too_big':
      return [{ path, expected: bound('at most', issue.maximum, issue.inclusive !== false, issue.origin) }];
    case 'too_small':
      return [{ path, expected: bound('at least', issue.minimum, issue.inclusive !== false, issue.origin) }];
    case 'invalid_format':
      if (issue.format === 'regex') return [{ path, expected: `a string matching ${issue.pattern}` }];
      return [{ path, expected: `a valid ${issue.format}` }];
    default:
      return [{ path, expected: issue.message }];
  }
}

function bound(word: string, limit: number | bigint, inclusive: boolean, origin: string): string {
  const value = String(limit);
  switch (origin) {
    case 'string':
      return `${word} ${value} characters`;
    case 'array':
    case 'set':
      return `${word} ${value} items`;
    default:
      return inclusive
        ? `a number ${word} ${value}`
        : `a number ${word === 'at most' ? 'below' : 'above'} ${value}`;
  }
}

function article(type: string): string {
  if (type === 'int') return 'an integer';
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return article(typeof value);
}

// zod 4 leaves `input` off issues unless asked; read the refused value from the arguments instead.
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

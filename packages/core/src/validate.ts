import * as z from 'zod';
import { MAX_FAILURE_TEXT, SCRUB_MARGIN } from './boundary.js';
import { FAILURE_WITHHELD, MAX_FAILURE_CHARS } from './failure-bound.js';
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
    for (const pieces of describeIssue(issue, allowed, input, MAX_LISTED_ISSUES - out.length)) {
      const listed = { path: render(pieces.path), expected: render(pieces.expected) };
      describedAs.set(listed, pieces);
      out.push(listed);
    }
  }
  // An issue's description can count more than one (a wrong type is one); the rest is what is unlisted.
  const unlisted = total - out.length;
  if (unlisted > 0) {
    const pieces = {
      path: [`(${unlisted} more)`],
      expected: ['not listed; fix the ones above and call again'],
    };
    const listed = { path: render(pieces.path), expected: render(pieces.expected) };
    describedAs.set(listed, pieces);
    out.push(listed);
  }
  return out;
}

/**
 * A piece of an issue's description: core's own connecting words (a string), or text that came from
 * the schema, a transform or the arguments (`from`: a path, a key, a pattern, a value, a format or type
 * name, a bound, a message), which the model-facing result scrubs before `show` renders it. Every zod
 * issue field core quotes is a `from` piece, whatever its code: `ctx.addIssue` may give any code any
 * field (`invalid_format` with a caught error as its `pattern`, `invalid_value` with it in `values`).
 */
type Piece = string | { readonly from: string; readonly show?: (text: string) => string };

interface IssuePieces {
  readonly path: readonly Piece[];
  readonly expected: readonly Piece[];
}

// zod's own names for a type (`invalid_type`'s `expected`) and a string format (`invalid_format`'s
// `format`): core's vocabulary, read as written. Any other name an issue carries came from its author.
const ZOD_NAMES = new Set([
  ...['string', 'number', 'int', 'boolean', 'bigint', 'symbol', 'undefined', 'null', 'never', 'void'],
  ...['date', 'array', 'object', 'tuple', 'record', 'map', 'set', 'file', 'nonoptional', 'nan', 'function'],
  ...['email', 'url', 'emoji', 'uuid', 'guid', 'nanoid', 'cuid', 'cuid2', 'ulid', 'xid', 'ksuid'],
  ...['datetime', 'time', 'duration', 'ipv4', 'ipv6', 'cidrv4', 'cidrv6', 'base64', 'base64url'],
  ...['json_string', 'e164', 'credit_card', 'iban', 'lowercase', 'uppercase', 'jwt', 'starts_with'],
  ...['ends_with', 'includes', 'mac', 'hex', 'hostname', 'safeint', 'int32', 'uint32', 'int64', 'uint64'],
  ...['float32', 'float64'],
]);

/**
 * Every key and every string or number value of a tool's published input schema (what `tools/list`
 * shows the model: property names, enum and const values, patterns, bounds, descriptions), once per
 * schema object. A piece of an issue that is one of these (or a path made of them and array indexes,
 * or a pattern whose source is one) tells the model nothing it was not shown: it passes unscrubbed, so
 * an enum of hosts (`db.internal`) or a pattern a hook would take for a secret stays usable.
 */
export function publishedTexts(jsonSchema: unknown): ReadonlySet<string> {
  if (typeof jsonSchema !== 'object' || jsonSchema === null) return EMPTY_TEXTS;
  let texts = published.get(jsonSchema);
  if (texts !== undefined) return texts;
  const found = new Set<string>();
  const stack: unknown[] = [jsonSchema];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') found.add(value);
    else if (typeof value === 'number') found.add(JSON.stringify(value));
    else if (typeof value === 'object' && value !== null) {
      for (const [key, inner] of Object.entries(value)) {
        if (!Array.isArray(value)) found.add(key);
        stack.push(inner);
      }
    }
  }
  texts = found;
  published.set(jsonSchema, texts);
  return texts;
}

const EMPTY_TEXTS: ReadonlySet<string> = new Set();
const published = new WeakMap<object, ReadonlySet<string>>();

function isPublished(text: string, texts: ReadonlySet<string>): boolean {
  if (texts.size === 0) return false;
  if (texts.has(text)) return true;
  // zod quotes a pattern as a regex literal (`/^A\d+$/i`), JSON Schema holds its source (`^A\d+$`).
  const literal = /^\/([\s\S]+)\/[dgimsuvy]*$/.exec(text);
  if (literal !== null) return texts.has(literal[1] as string);
  return text.includes('.') && text.split('.').every((part) => texts.has(part) || /^\d+$/.test(part));
}

// How core composed each listed issue, so `invalidArgumentsResult` scrubs exactly the pieces core did
// not word itself. An issue missing here (one a middleware put into `ctx.validation`), or whose text
// no longer reads as its pieces do (a middleware rewrote it), is scrubbed whole.
const describedAs = new WeakMap<ArgumentIssue, IssuePieces>();

function describes(pieces: IssuePieces, issue: ArgumentIssue): boolean {
  return issue.path === render(pieces.path) && issue.expected === render(pieces.expected);
}

/** The pieces' text, each `from` piece passed through `scrub` (none: as it came) and its `show`. */
function render(pieces: readonly Piece[], scrub?: (text: string) => string): string {
  let text = '';
  for (const piece of pieces) {
    if (typeof piece === 'string') text += piece;
    else {
      const from = scrub === undefined ? piece.from : scrub(piece.from);
      text += piece.show === undefined ? from : piece.show(from);
    }
  }
  return text;
}

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
 * The `invalid_argument` result for refused arguments, naming each field and what it expects. Every
 * piece of an issue that came from the schema, a transform or the arguments (a path, a key, a pattern,
 * a value, a message: see `Piece`) passes `scrub` (the boundary's: core's secret patterns, the cut and
 * the scrub hooks) on its own, whole (a path before it is clipped), before core composes its own words
 * around it, so the result is then passed on as core wrote it. The hooks read at most
 * `MAX_FAILURE_CHARS` characters of the pieces together, as of a failure's fields; past that a piece
 * is withheld (`boundedScrub`). A piece the tool's published input schema shows the model (`shown`,
 * from `publishedTexts`) passes as it is.
 */
export function invalidArgumentsResult(
  toolName: string,
  issues: readonly ArgumentIssue[],
  scrub?: (text: string) => string,
  shown: ReadonlySet<string> = EMPTY_TEXTS,
): ToolResult {
  if (scrub !== undefined) {
    const bounded = boundedScrub(scrub, shown);
    issues = issues.map((issue) => {
      const pieces = describedAs.get(issue);
      // One core did not describe (a middleware added it) or whose words a middleware changed since.
      if (pieces === undefined || !describes(pieces, issue)) {
        return { path: clipPath(bounded(String(issue.path))), expected: bounded(String(issue.expected)) };
      }
      return { path: render(pieces.path, bounded), expected: render(pieces.expected, bounded) };
    });
  }
  const names = [...new Set(issues.map((issue) => issue.path))];
  return fail('invalid_argument', `Invalid arguments for ${toolName}: ${names.join(', ')}.`, {
    hint: `Fix and call again: ${issues.map((issue) => `${issue.path}: ${issue.expected}`).join('; ')}.`,
    fields: [...issues],
  });
}

/**
 * `scrub` for one result's pieces: a piece met again (the accepted keys, named by each unknown key) is
 * scrubbed once, and the scrub hooks read at most `MAX_FAILURE_CHARS` characters of them together (as
 * of a failure's fields; each piece counts as far as they read it, the cut plus `SCRUB_MARGIN`): a
 * piece that does not fit in what is left is withheld (`FAILURE_WITHHELD`), not scrubbed. So 32 issues
 * echoing a 100 KB argument each cost the hooks some 64 KB, not 640 KB.
 */
function boundedScrub(scrub: (text: string) => string, shown: ReadonlySet<string>): (text: string) => string {
  const done = new Map<string, string>();
  let left = MAX_FAILURE_CHARS;
  return (text) => {
    if (isPublished(text, shown)) return text;
    const known = done.get(text);
    if (known !== undefined) return known;
    // What the scrub hooks read of it: they see a piece as far as the cut plus its margin.
    const cost = Math.min(text.length, MAX_FAILURE_TEXT + SCRUB_MARGIN);
    if (cost > left) return FAILURE_WITHHELD;
    left -= cost;
    const scrubbed = scrub(text);
    done.set(text, scrubbed);
    return scrubbed;
  };
}

function describeIssue(
  issue: z.core.$ZodIssue,
  allowed: readonly string[],
  input: unknown,
  limit: number,
): IssuePieces[] {
  const path = issue.path.length > 0 ? issue.path.map(String).join('.') : undefined;
  const at: Piece[] = [path === undefined ? '(arguments)' : { from: path, show: clipPath }];
  switch (issue.code) {
    case 'unrecognized_keys': {
      const accepted: Piece[] = [];
      if (allowed.length > 0 && issue.path.length === 0) {
        for (const key of allowed)
          accepted.push(accepted.length === 0 ? ' (accepted: ' : ', ', { from: key });
        accepted.push(')');
      }
      return issue.keys.slice(0, limit).map((key) => ({
        path: [{ from: path === undefined ? String(key) : `${path}.${String(key)}`, show: clipPath }],
        expected: ['not an accepted argument; remove it', ...accepted],
      }));
    }
    case 'invalid_type': {
      const name = String(issue.expected);
      const type: Piece = ZOD_NAMES.has(name) ? article(name) : { from: name, show: article };
      const received = valueAt(input, issue.path);
      if (received === undefined) return [{ path: at, expected: ['required, ', type] }];
      return [{ path: at, expected: [type, `, not ${typeName(received)}`] }];
    }
    case 'invalid_value': {
      const values: Piece[] = [];
      for (const value of Array.isArray(issue.values) ? issue.values : [issue.values]) {
        if (values.length > 0) values.push(', ');
        values.push(valuePiece(value));
      }
      return [{ path: at, expected: ['one of ', ...values] }];
    }
    case 'too_big':
      return [
        { path: at, expected: bound('at most', issue.maximum, issue.inclusive !== false, issue.origin) },
      ];
    case 'too_small':
      return [
        { path: at, expected: bound('at least', issue.minimum, issue.inclusive !== false, issue.origin) },
      ];
    case 'invalid_format':
      if (issue.format === 'regex')
        return [{ path: at, expected: ['a string matching ', { from: String(issue.pattern) }] }];
      return [
        {
          path: at,
          expected: ['a valid ', ZOD_NAMES.has(issue.format) ? issue.format : { from: String(issue.format) }],
        },
      ];
    default:
      return [{ path: at, expected: [{ from: String(issue.message) }] }];
  }
}

/** One of an `invalid_value` issue's values: a string quoted as JSON after it is scrubbed. */
function valuePiece(value: unknown): Piece {
  if (typeof value === 'string') return { from: value, show: (text) => JSON.stringify(text) };
  if (value === null || value === undefined || typeof value === 'boolean') return String(value);
  if (typeof value === 'number') return { from: JSON.stringify(value) };
  // A bigint (which JSON.stringify refuses), a symbol's description, anything else `ctx.addIssue` gave.
  return { from: String(value) };
}

function bound(word: string, limit: unknown, inclusive: boolean, origin: string): Piece[] {
  const value: Piece = { from: String(limit) };
  switch (origin) {
    case 'string':
      return [`${word} `, value, ' characters'];
    case 'array':
    case 'set':
      return [`${word} `, value, ' items'];
    default:
      return inclusive
        ? [`a number ${word} `, value]
        : [`a number ${word === 'at most' ? 'below' : 'above'} `, value];
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

/** A non-null object that is not an array (JSON's object, as the SDK's schemas read it). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

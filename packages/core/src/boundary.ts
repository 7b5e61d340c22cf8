import { CallToolResultSchema, RELATED_TASK_META_KEY } from '@modelcontextprotocol/sdk/types.js';
import { ERROR_CODE_DEFAULTS, isErrorCode } from './codes.js';
import {
  boundFailureValue,
  chargeFailure,
  createFailureBudget,
  FAILURE_WITHHELD,
  type FailureBudget,
  MAX_FAILURE_CHARS,
  MAX_FAILURE_VALUES,
} from './failure-bound.js';
import { isIncidentId, newIncidentId } from './incident.js';
import { mapStrings } from './map-strings.js';
import { createSecretRedactor } from './redact-secrets.js';
import {
  ERROR_META_KEY,
  type ErrorEnvelope,
  isToolResult,
  resultFromEnvelope,
  type ToolResult,
} from './result.js';
import type { ToolContext } from './types.js';

/**
 * A function every string of a failure passes through before the model sees it. It gets the call's
 * context, so a middleware can honour its per-tool options (and leave an opted-out tool alone).
 */
export type ScrubText = (text: string, ctx: ToolContext) => string;

const redactSecretsDeep = createSecretRedactor();

// Failures core itself wrote from the schema's verdict (`invalid_argument` naming each field): their text
// is core's own words plus the argument names the model sent, and a secret pattern would only garble them
// ("secret: not an accepted argument" reads like a key/value pair). Every piece of an issue core did not
// word itself (a message, a pattern, a value, a path, a key) was scrubbed on its own before core composed
// it (`scrubFailureText`).
// Identity survives middleware that pass the result on unchanged.
const coreWritten = new WeakSet<ToolResult>();

/** Marks a result core wrote itself, so the boundary passes it unchanged. */
export function markCoreWritten(result: ToolResult): ToolResult {
  coreWritten.add(result);
  return result;
}

/**
 * The model-facing boundary: what every call's result passes on its way out (after the handler, and
 * again when it leaves the chain). Successes pass untouched except for the reserved `_meta` key.
 * A failure is rebuilt from its envelope, so it carries exactly one shape: the envelope as JSON text
 * and in `_meta["toolgate/error"]`, no `structuredContent`, no other content parts. A failure built
 * without `fail()` (a raw `isError` result) becomes `internal`; its raw content goes to the log under the
 * incident id the model sees. Every string of a failure (message, hint, fields, any other `_meta`,
 * its keys included) goes through core's secret patterns and then each `scrub`. A result the SDK would
 * refuse (see `malformation`) becomes `internal` too, with what was wrong in the log: the SDK would
 * answer it with a JSON-RPC error carrying its own validation message and no incident id.
 */
export function toModelFacing(ctx: ToolContext, result: unknown, scrub: readonly ScrubText[]): ToolResult {
  if (!isToolResult(result)) {
    return internalFailure(ctx, 'the chain returned something that is not a tool result', {
      returned: typeof result,
    });
  }
  if (coreWritten.has(result)) return result;
  if (result.isError !== true) {
    const problem = malformation(result);
    if (problem !== undefined) return internalFailure(ctx, 'a malformed result', problem);
    if (result._meta === undefined || !(ERROR_META_KEY in result._meta)) return result;
    const { [ERROR_META_KEY]: _reserved, ...meta } = result._meta;
    return { ...result, _meta: meta };
  }
  const rawEnvelope = result._meta?.[ERROR_META_KEY];
  // The failure's variable parts (`fields`, the other `_meta`) are bounded before any walk over them:
  // one counting walk when they fit (nearly always), else a bounded copy (see `failure-bound.ts`).
  const budget = createFailureBudget();
  const envelope = envelopeOf(rawEnvelope, budget);
  if (envelope === undefined) {
    return internalFailure(ctx, 'a failure without the error envelope (a raw isError result)', {
      content: redactSecretsDeep(boundFailureValue(result.content, createFailureBudget(LOGGED_BUDGETS))),
      meta: redactSecretsDeep(boundFailureValue(result._meta, createFailureBudget(LOGGED_BUDGETS))),
    });
  }
  // A confirmation request shows the person the validated arguments (the model's own words, rendered
  // by @toolgate/confirm): secret patterns still apply, internal-detail scrubbers would garble it, and
  // it is never cut (the person must see all of what they confirm: its message, hint and the
  // confirmation entry of `_meta`; any other `_meta` is bounded like every failure's).
  const confirming = envelope.error === 'confirmation_required';
  const otherMeta = otherMetaOf(result._meta, budget, confirming);
  if (budget.withheld > 0) {
    envelope.incidentId ??= ctx.incidentId ??= newIncidentId();
    ctx.incidentId ??= envelope.incidentId;
    logWithheld(ctx, envelope, result._meta, budget);
  }
  const hooks = confirming ? [] : scrub;
  const scrubText = (text: string): string => scrubAll(text, hooks, ctx, !confirming);
  const safe: ErrorEnvelope = {
    ...envelope,
    message: scrubText(envelope.message),
    hint: scrubText(envelope.hint),
  };
  if (envelope.fields !== undefined) {
    safe.fields = envelope.fields.map((field) => ({
      path: scrubText(field.path),
      expected: scrubText(field.expected),
    }));
  }
  const out = resultFromEnvelope(safe);
  if (otherMeta !== undefined && Object.keys(otherMeta).length > 0) {
    out._meta = {
      ...(mapStrings(redactSecretsDeep(otherMeta), scrubText, { mapKey: scrubText }) as Record<
        string,
        unknown
      >),
      ...out._meta,
    };
    // Other `_meta` keys are the only part of a rebuilt failure core did not write itself.
    const problem = malformation(out);
    if (problem !== undefined) return internalFailure(ctx, 'a malformed failure', problem);
  }
  return out;
}

/**
 * A tool result the SDK would send as it is: `isToolResult`, and nothing its `CallToolResultSchema`
 * refuses (a content block of an unknown type, text that is not a string, `structuredContent` or
 * `_meta` that is not an object, `isError` not a boolean, ...). For a result read back from a store
 * (a cached or replayed answer): a damaged or forged one fails it.
 */
export function isWellFormedResult(value: unknown): value is ToolResult {
  return isToolResult(value) && malformation(value) === undefined;
}

// Results the SDK's schema accepted here, so one that needs it is parsed once, not at each boundary.
const vouched = new WeakSet<ToolResult>();

/**
 * What the SDK's `CallToolResultSchema` would refuse in `result` (it checks every result it sends), for
 * the log, or undefined. The common result (`ok()`'s: text parts, a plain `structuredContent`) is decided
 * by comparisons; one with other parts, annotations or `_meta` fields the schema types is parsed with
 * that schema, once per result object (a second parse only on that less common path).
 */
function malformation(result: ToolResult): Record<string, unknown> | undefined {
  let unsure = false;
  const isError: unknown = result.isError;
  if (isError !== undefined && typeof isError !== 'boolean') return { problem: 'isError is not a boolean' };
  const structured: unknown = result.structuredContent;
  if (structured !== undefined) {
    if (typeof structured !== 'object' || structured === null || Array.isArray(structured)) {
      return { problem: 'structuredContent is not an object' };
    }
    if (Object.getPrototypeOf(structured) !== Object.prototype) unsure = true;
  }
  const meta: unknown = result._meta;
  if (meta !== undefined) {
    if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) {
      return { problem: '_meta is not an object' };
    }
    const fields = meta as Record<string, unknown>;
    if (fields.progressToken !== undefined || fields[RELATED_TASK_META_KEY] !== undefined) unsure = true;
  }
  const content = result.content;
  for (let i = 0; i < content.length; i += 1) {
    const part = content[i] as { type?: unknown; text?: unknown; annotations?: unknown; _meta?: unknown };
    const type = part?.type;
    if (type === 'text') {
      if (typeof part.text !== 'string') return { problem: `content[${i}].text is not a string` };
      if (part.annotations !== undefined || part._meta !== undefined) unsure = true;
    } else if (type === 'image' || type === 'audio' || type === 'resource_link' || type === 'resource') {
      unsure = true;
    } else {
      return {
        problem: `content[${i}] is not a content block of a known type`,
        type: typeof type === 'string' ? type.slice(0, 64) : typeof type,
      };
    }
  }
  if (!unsure || vouched.has(result)) return undefined;
  const parsed = CallToolResultSchema.safeParse(result);
  if (parsed.success) {
    vouched.add(result);
    return undefined;
  }
  return { problem: 'not a valid MCP tool result', issues: parsed.error.issues };
}

function scrubAll(text: string, scrub: readonly ScrubText[], ctx: ToolContext, cut: boolean): string {
  let out = redactSecretsDeep(text) as string;
  if (!cut) {
    for (const fn of scrub) out = fn(out, ctx);
    return out;
  }
  // Core's secret patterns saw the whole text; the scrub hooks must see whole what the model will see
  // too, or a length the model chose for an echoed argument places the cut inside a SQL statement or
  // a connection string, whose fragment no hook recognises. They see up to `SCRUB_MARGIN` characters
  // past the limit (their cost grows with the text: a 500 KB echo held the event loop for seconds in
  // redact-errors' hundred-odd patterns), and the cut to the limit comes after them.
  if (scrub.length === 0) return cutFailureText(out);
  if (out.length <= MAX_FAILURE_TEXT + SCRUB_MARGIN) {
    for (const fn of scrub) out = fn(out, ctx);
    return cutFailureText(out);
  }
  // Longer: the hooks see its first `MAX_FAILURE_TEXT + SCRUB_MARGIN` characters, whose end may cut a
  // detail they then miss. Hooks that shortened what came before (a long statement made `[sql]`) would
  // bring that fragment under the limit, so the model sees only what the hooks made of the text with
  // and without the margin alike: the common start of both passes, which holds nothing from past the
  // limit, and in which a detail straddling the limit appears as the margin let the hooks see it.
  let seen = headOf(out, MAX_FAILURE_TEXT + SCRUB_MARGIN);
  let head = headOf(out, MAX_FAILURE_TEXT);
  for (const fn of scrub) {
    seen = fn(seen, ctx);
    head = fn(head, ctx);
  }
  return cutFailureText(seen.slice(0, commonStart(seen, head)), true);
}

/**
 * Scrubs one string the model will read as the boundary scrubs a failure's: core's secret patterns,
 * then the scrub hooks over it and a margin past the limit, then the cut to `MAX_FAILURE_TEXT`. For
 * text core puts into a result it writes itself (a schema author's words in `invalid_argument`).
 */
export function scrubFailureText(text: string, scrub: readonly ScrubText[], ctx: ToolContext): string {
  return scrubAll(text, scrub, ctx, true);
}

/** The first `length` UTF-16 code units of `text`, never ending between a surrogate pair's halves. */
function headOf(text: string, length: number): string {
  const code = text.charCodeAt(length - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? length - 1 : length);
}

/** How many code units `a` and `b` share from their start. */
function commonStart(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  let at = 0;
  while (at < length && a.charCodeAt(at) === b.charCodeAt(at)) at += 1;
  return at;
}

/** The longest string of a failure the model sees, in UTF-16 code units, before the cut's marker. */
export const MAX_FAILURE_TEXT = 4096;
/**
 * How far past `MAX_FAILURE_TEXT` the scrub hooks see a failure's string before it is cut, so a detail
 * that straddles the limit (and is shorter than this) is seen whole. redact-errors' hooks take some
 * 0.2 to 0.5 ms per KB on this machine: 20 KB is under 10 ms per string.
 */
export const SCRUB_MARGIN = 16 * 1024;
/** How far back from the limit a cut looks for a boundary, so no word or token is cut in two. */
const CUT_SEARCH = 256;
const CUT_MARKER = ' …[cut]';

/**
 * A failure's string, at most `MAX_FAILURE_TEXT` characters and the marker: a short message is what the
 * model needs. Cut at the last whitespace, quote, comma, semicolon or bracket before the limit (a token
 * straddling it, possibly a secret no pattern knows, is dropped whole, not shown in part); with none in
 * the last 256 characters, 256 characters before the limit. Never between a surrogate pair's halves.
 * A text already cut (the marker at its end, within the limit) is left as it is, so a failure that
 * passes the boundary twice is not cut twice. `dropped`: the text is the start of a longer one (its
 * end may split a token), so it is cut and marked even when shorter than the limit.
 */
export function cutFailureText(text: string, dropped = false): string {
  if (!dropped) {
    if (text.length <= MAX_FAILURE_TEXT) return text;
    if (text.length <= MAX_FAILURE_TEXT + CUT_MARKER.length && text.endsWith(CUT_MARKER)) return text;
  }
  const limit = Math.min(MAX_FAILURE_TEXT, text.length);
  let end = Math.max(0, limit - CUT_SEARCH);
  for (let at = limit; at > limit - CUT_SEARCH && at > 0; at -= 1) {
    if (isBoundary(text.charCodeAt(at))) {
      end = at;
      break;
    }
  }
  return `${headOf(text, end).trimEnd()}${CUT_MARKER}`;
}

// Whitespace, and what ends a value in JSON, SQL or a list: `"`, `'`, `,`, `;` and brackets.
const CUT_BOUNDARY = /[\s"',;()[\]{}<>]/;

function isBoundary(code: number): boolean {
  return CUT_BOUNDARY.test(String.fromCharCode(code));
}

/**
 * A well-formed envelope (copied field by field, so nothing unexpected rides along), or undefined. Its
 * `fields` are bounded by `budget` (each field one value and its two strings): past it the list ends in
 * one `{ path, expected }` of `FAILURE_WITHHELD` (free, so a bounded list fits when walked again).
 */
function envelopeOf(value: unknown, budget: FailureBudget): ErrorEnvelope | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (!isErrorCode(v.error) || typeof v.message !== 'string') return undefined;
  const envelope: ErrorEnvelope = {
    ok: false,
    error: v.error,
    message: v.message,
    hint: typeof v.hint === 'string' ? v.hint : ERROR_CODE_DEFAULTS[v.error].hint,
    retryable: typeof v.retryable === 'boolean' ? v.retryable : ERROR_CODE_DEFAULTS[v.error].retryable,
  };
  if (typeof v.retryAfterMs === 'number' && Number.isFinite(v.retryAfterMs) && v.retryAfterMs >= 0) {
    envelope.retryAfterMs = Math.ceil(v.retryAfterMs);
  }
  if (isIncidentId(v.incidentId)) envelope.incidentId = v.incidentId;
  const raw = v.fields;
  if (Array.isArray(raw)) {
    const fields: { path: string; expected: string }[] = [];
    for (let i = 0; i < raw.length; i += 1) {
      const f = raw[i] as { path?: unknown; expected?: unknown } | null | undefined;
      const path = f?.path;
      const expected = f?.expected;
      const valid = typeof path === 'string' && typeof expected === 'string';
      if (valid && path === FAILURE_WITHHELD && expected === FAILURE_WITHHELD) {
        fields.push({ path, expected });
        continue;
      }
      if (!chargeFailure(budget, valid ? path.length + expected.length : 0, valid ? 3 : 1)) {
        budget.withheld += 1;
        fields.push({ path: FAILURE_WITHHELD, expected: FAILURE_WITHHELD });
        break;
      }
      if (valid) fields.push({ path, expected });
    }
    envelope.fields = fields;
  }
  return envelope;
}

// @toolgate/confirm's `_meta` entry (`{ status, confirmation, expiresAt, prompt }`): what the person reads.
const CONFIRM_META_KEY = 'toolgate/confirm';
// How many budgets of a failure past its bound the log line shows.
const LOGGED_BUDGETS = 4;

/**
 * A failure's `_meta` other than the envelope, bounded by what `fields` left of `budget`: `meta`'s
 * own entries when they fit (counted, not copied), else a bounded copy. A confirmation request's
 * `toolgate/confirm` entry, when it has the shape @toolgate/confirm gives it (a few strings), is kept
 * whole and charged first: the person must see all of what they confirm.
 */
function otherMetaOf(
  meta: Record<string, unknown> | undefined,
  budget: FailureBudget,
  confirming: boolean,
): Record<string, unknown> | undefined {
  if (meta === undefined) return undefined;
  const confirmation = confirming ? meta[CONFIRM_META_KEY] : undefined;
  const keepWhole = confirmation !== undefined && isConfirmationEntry(confirmation);
  if (keepWhole) {
    for (const text of Object.values(confirmation)) budget.chars -= String(text).length;
    budget.values -= 5;
  }
  const skip = (key: string): boolean => key === ERROR_META_KEY || (keepWhole && key === CONFIRM_META_KEY);
  const bounded = boundFailureValue(meta, budget, skip);
  if (bounded === meta) {
    const { [ERROR_META_KEY]: _envelope, ...other } = meta;
    return other;
  }
  const other = (typeof bounded === 'object' && bounded !== null ? bounded : {}) as Record<string, unknown>;
  if (keepWhole) {
    Object.defineProperty(other, CONFIRM_META_KEY, {
      value: confirmation,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return other;
}

/** A plain object of at most four strings: the shape of @toolgate/confirm's `_meta` entry. */
function isConfirmationEntry(value: unknown): value is Record<string, string> {
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype) {
    return false;
  }
  const entries = Object.values(value);
  return entries.length <= 4 && entries.every((entry) => typeof entry === 'string');
}

/**
 * The failure as it came, for the log under the incident id the model sees, when part of it was
 * withheld: secrets redacted, and itself bounded (at `LOGGED_BUDGETS` budgets, so logging a flood
 * cannot cost seconds either), with what was cut.
 */
function logWithheld(
  ctx: ToolContext,
  envelope: ErrorEnvelope,
  meta: Record<string, unknown> | undefined,
  bound: FailureBudget,
): void {
  const budget = createFailureBudget(LOGGED_BUDGETS, bound.keys);
  const rawFields = (meta?.[ERROR_META_KEY] as { fields?: unknown } | undefined)?.fields;
  const fields = boundFailureValue(rawFields, budget);
  const other = boundFailureValue(meta, budget, (key) => key === ERROR_META_KEY);
  ctx.logger.warn(
    {
      incidentId: envelope.incidentId,
      tool: ctx.toolName,
      requestId: ctx.request.id,
      error: envelope.error,
      withheld: bound.withheld,
      fieldsTotal: Array.isArray(rawFields) ? rawFields.length : undefined,
      // Shown below: the failure's fields and other `_meta`, up to `LOGGED_BUDGETS` budgets of them.
      original: redactSecretsDeep({ fields, meta: other }),
      originalCut: budget.withheld > 0,
    },
    `tool failure past the model-facing bound (${MAX_FAILURE_CHARS} characters, ${MAX_FAILURE_VALUES} values of fields and _meta): the rest was withheld from the model`,
  );
}

function internalFailure(ctx: ToolContext, why: string, detail: Record<string, unknown>): ToolResult {
  ctx.incidentId ??= newIncidentId();
  ctx.logger.error(
    { incidentId: ctx.incidentId, tool: ctx.toolName, requestId: ctx.request.id, ...detail },
    `tool call answered with ${why}`,
  );
  return resultFromEnvelope({
    ok: false,
    error: 'internal',
    message: 'Internal error.',
    hint: ERROR_CODE_DEFAULTS.internal.hint,
    retryable: false,
    incidentId: ctx.incidentId,
  });
}

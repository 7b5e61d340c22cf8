import { CallToolResultSchema, RELATED_TASK_META_KEY } from '@modelcontextprotocol/sdk/types.js';
import { ERROR_CODE_DEFAULTS, isErrorCode } from './codes.js';
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
// ("secret: not an accepted argument" reads like a key/value pair). Identity survives middleware that
// pass the result on unchanged.
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
  const envelope = envelopeOf(result._meta?.[ERROR_META_KEY]);
  if (envelope === undefined) {
    return internalFailure(ctx, 'a failure without the error envelope (a raw isError result)', {
      content: redactSecretsDeep(result.content),
      meta: redactSecretsDeep(result._meta),
    });
  }
  // A confirmation request shows the person the validated arguments (the model's own words, rendered
  // by @toolgate/confirm): secret patterns still apply, internal-detail scrubbers would garble it, and
  // it is never cut (the person must see all of what they confirm).
  const confirming = envelope.error === 'confirmation_required';
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
  const { [ERROR_META_KEY]: _envelope, ...otherMeta } = result._meta ?? {};
  if (Object.keys(otherMeta).length > 0) {
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
  // Cut after core's secret patterns saw the whole text (no secret is cut into a piece they miss) and
  // before the scrub hooks, whose cost grows with the text: a tool that echoes a 500 KB argument into
  // its failure held the event loop for seconds in redact-errors' hundred-odd patterns.
  if (cut) out = cutFailureText(out);
  for (const fn of scrub) out = fn(out, ctx);
  return out;
}

/** The longest string of a failure the model sees, in UTF-16 code units, before the cut's marker. */
export const MAX_FAILURE_TEXT = 4096;
/** How far back from the limit a cut looks for a boundary, so no word or token is cut in two. */
const CUT_SEARCH = 256;
const CUT_MARKER = ' …[cut]';

/**
 * A failure's string, at most `MAX_FAILURE_TEXT` characters and the marker: a short message is what the
 * model needs. Cut at the last whitespace, quote, comma, semicolon or bracket before the limit (a token
 * straddling it, possibly a secret no pattern knows, is dropped whole, not shown in part); with none in
 * the last 256 characters, 256 characters before the limit. Never between a surrogate pair's halves.
 */
export function cutFailureText(text: string): string {
  if (text.length <= MAX_FAILURE_TEXT) return text;
  let end = MAX_FAILURE_TEXT - CUT_SEARCH;
  for (let at = MAX_FAILURE_TEXT; at > MAX_FAILURE_TEXT - CUT_SEARCH; at -= 1) {
    if (isBoundary(text.charCodeAt(at))) {
      end = at;
      break;
    }
  }
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return `${text.slice(0, end).trimEnd()}${CUT_MARKER}`;
}

// Whitespace, and what ends a value in JSON, SQL or a list: `"`, `'`, `,`, `;` and brackets.
const CUT_BOUNDARY = /[\s"',;()[\]{}<>]/;

function isBoundary(code: number): boolean {
  return CUT_BOUNDARY.test(String.fromCharCode(code));
}

/** A well-formed envelope (copied field by field, so nothing unexpected rides along), or undefined. */
function envelopeOf(value: unknown): ErrorEnvelope | undefined {
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
  if (Array.isArray(v.fields)) {
    envelope.fields = v.fields
      .filter(
        (f): f is { path: string; expected: string } =>
          typeof f?.path === 'string' && typeof f?.expected === 'string',
      )
      .map((f) => ({ path: f.path, expected: f.expected }));
  }
  return envelope;
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

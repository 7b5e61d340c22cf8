import { performance } from 'node:perf_hooks';
import {
  cancelledResult,
  errorOf,
  fail,
  incidentOfThrow,
  isCallerCancel,
  isToolError,
  type PolicyDecision,
  principalOf,
  type ToolContext,
  type ToolResult,
  toolErrorResult,
} from '@toolgate/core';
import { ARGS_PREVIEW_CHARS, argsPreview } from './args-preview.js';
import { isPlainId } from './plain-text.js';
import type { ArgsMode } from './types.js';

// Longest tool name and string request id recorded: both are what the client sent.
const MAX_CLIENT_CHARS = 256;

/** How one tool's records are made, resolved once at factory time. */
export interface RecordSettings {
  readonly args: ArgsMode;
  /** Canonical JSON of a value with its secrets redacted (see `createRedactedJson`). */
  readonly redactedJson: (value: unknown) => string;
  /** Canonical JSON of args' shape, secrets in key names redacted (see `createShapeJson`); shape mode. */
  readonly shapeJson: (value: unknown) => string;
  /**
   * Whether a plain string id (`isPlainId`: a counter, `req-42`, a UUID) is recorded without the
   * redaction walk: true when only core's `SECRET_PATTERNS` apply, none of which matches such text.
   */
  readonly plainIds: boolean;
}

/**
 * The result core's dispatch will answer for an error that escapes the chain, so the record holds
 * what the client gets. A ToolError keeps its code (one with a cause is answered under an incident id,
 * its cause logged under it); anything else is `internal` under an incident id. Such an id is set on
 * the context now, so core's answer carries the same id as the record. What the caller's own cancel made
 * (core's `isCallerCancel`) is `timeout` without one, as core answers it.
 */
export function resultOfThrow(ctx: ToolContext, error: unknown): ToolResult {
  if (!isToolError(error) && isCallerCancel(ctx, error)) return cancelledResult(ctx.toolName);
  const incidentId = incidentOfThrow(ctx, error);
  return isToolError(error)
    ? toolErrorResult(error, incidentId)
    : fail('internal', 'Internal error.', { incidentId });
}

/**
 * What a finished call leaves for the writer: only what must be taken before the answer (args,
 * bindings and decisions redacted and serialised, so later mutation cannot change them and no
 * object graph is kept; the outcome, sizes and ids as plain values). Nothing is escaped, formatted
 * or hashed here: the writer turns these fields into the record's canonical JSON line when it seals
 * its batch (`sealRecord`), off the call's path. One flat object per call, no closure.
 */
export interface CapturedRecord {
  /** Redacted canonical JSON of the args (or their shape), cut at `maxArgsChars`. */
  readonly args: string;
  /** Args over `maxArgsChars`: the same JSON with long values cut to fit (see `argsPreview`); else undefined. */
  readonly argsPreview: string | undefined;
  /** Redacted canonical JSON of the bound values, when there are any. */
  readonly bindings: string | undefined;
  /** Redacted canonical JSON of the decisions (`[]` when none). */
  readonly decisions: string;
  readonly aborted: boolean;
  readonly caller: string;
  readonly clientId: string | undefined;
  /** Milliseconds, unrounded (rounded to the microsecond when sealed). */
  readonly durationMs: number;
  readonly incidentId: string | undefined;
  readonly outcome: string;
  readonly principal: string | undefined;
  readonly requestId: string | number;
  readonly resultBytes: number;
  readonly sessionId: string | undefined;
  readonly spanId: string | undefined;
  readonly traceId: string | undefined;
  /** Epoch milliseconds of the start; formatted as ISO time when sealed. */
  readonly startedAt: number;
  /** The tool name, cut at 256 characters. */
  readonly tool: string;
  readonly unknownTool: boolean;
  /** Size held in the buffer, in string units (about its bytes on the heap), for the byte bound. */
  readonly bytes: number;
  /** Durable calls: told whether the record was stored (set by the writer, never by a sink). */
  ack: ((stored: boolean) => void) | undefined;
}

/** Takes what a finished call's record needs (see `CapturedRecord`). */
export function captureCall(
  ctx: ToolContext,
  result: ToolResult,
  settings: RecordSettings,
  chainId: string,
  maxArgsChars: number,
): CapturedRecord {
  const unknownTool = ctx.tool === undefined;
  // One look at the result gives both the outcome (outcomeOf's word) and an incident id.
  const error = errorOf(result);
  const incidentId = ctx.incidentId ?? error?.incidentId;
  const request = ctx.request;
  const principal = principalOf(ctx);
  const clientId = request.authInfo?.clientId || undefined;
  // A name the server does not know is the client's free text: redacted like an argument string,
  // before the cut, so a cut cannot leave half a secret the patterns no longer recognise.
  const toolName = unknownTool ? (JSON.parse(settings.redactedJson(ctx.toolName)) as string) : ctx.toolName;
  const tool = capped(toolName);
  let args = settings.args === 'shape' ? settings.shapeJson(ctx.rawArgs) : settings.redactedJson(ctx.rawArgs);
  let preview: string | undefined;
  // Keeps a hostile megabyte argument from becoming a megabyte record. The marker alone would hide
  // every other argument of the call too (pad one, and the record no longer shows the rest): the
  // preview keeps each argument's name and the start of its value, within a bound of its own.
  if (args.length > maxArgsChars) {
    preview = argsPreview(args, Math.min(maxArgsChars, ARGS_PREVIEW_CHARS));
    args = JSON.stringify(`[Truncated: ${args.length} characters]`);
  }
  // Values bound from the caller (a customer id from the token) are recorded beside the identity,
  // redacted like args: they decide what the call could see.
  const bindings = hasKeys(ctx.bindings) ? settings.redactedJson(ctx.bindings) : undefined;
  const decisions = ctx.decisions.length > 0 ? decisionsJson(ctx.decisions, settings) : '[]';
  const caller = ctx.caller.id;
  const sessionId = request.sessionId;
  const requestId = typeof request.id === 'string' ? recordedId(request.id, settings) : request.id;
  const trace = ctx.state.trace;
  const spanId = trace?.spanId;
  const traceId = trace?.traceId;
  const bytes =
    RECORD_OVERHEAD +
    chainId.length +
    args.length +
    (preview?.length ?? 0) +
    decisions.length +
    caller.length +
    tool.length +
    (bindings?.length ?? 0) +
    (principal?.length ?? 0) +
    (clientId?.length ?? 0) +
    (incidentId?.length ?? 0) +
    (sessionId?.length ?? 0) +
    (typeof requestId === 'string' ? requestId.length : 0) +
    (spanId?.length ?? 0) +
    (traceId?.length ?? 0);
  return {
    args,
    argsPreview: preview,
    bindings,
    decisions,
    aborted: wasAborted(ctx.signal, request.signal),
    caller,
    clientId,
    // perf_hooks' performance (see the import): the global one is a getter on globalThis.
    durationMs: performance.now() - ctx.startTime,
    incidentId,
    outcome: error === undefined ? 'ok' : error.error,
    principal,
    requestId,
    resultBytes: unknownTool ? 0 : contentBytes(result),
    sessionId,
    spanId,
    traceId,
    startedAt: ctx.startedAt,
    tool,
    unknownTool,
    bytes,
    ack: undefined,
  };
}

/**
 * Whether the call's signal, or the caller's own, aborted. Most calls' signal is the caller's: it is
 * read once (an AbortSignal's `aborted` is a private-field load V8 handles as a megamorphic lookup).
 */
function wasAborted(signal: AbortSignal, callerSignal: AbortSignal): boolean {
  return signal.aborted || (signal !== callerSignal && callerSignal.aborted);
}

/**
 * UTF-8 size of what the client hands the model: the text of each text part (measured as it is,
 * never serialised again), the JSON of any other part (image, audio, resource).
 */
function contentBytes(result: ToolResult): number {
  let bytes = 0;
  for (const part of result.content ?? []) {
    bytes +=
      part.type === 'text' && typeof part.text === 'string'
        ? Buffer.byteLength(part.text, 'utf8')
        : Buffer.byteLength(JSON.stringify(part), 'utf8');
  }
  return bytes;
}

/** The last frozen object found to have no keys (core's shared empty bindings): it never gains one. */
let frozenEmpty: object | undefined;

function hasKeys(value: Readonly<Record<string, unknown>> | undefined): boolean {
  if (value === undefined || value === frozenEmpty) return false;
  if (Object.keys(value).length > 0) return true;
  if (Object.isFrozen(value)) frozenEmpty = value;
  return false;
}

/** The key names, chain fields, hash, time and numbers of a line, and the object, in string units. */
const RECORD_OVERHEAD = 640;

// A policy that records the same decision on every call (authz's `allow`) shares one frozen object:
// its redacted JSON is written once per settings and reused, not scanned for secrets again per call.
const sharedDecisionJson = new WeakMap<RecordSettings, WeakMap<object, string>>();

/**
 * The decisions' redacted canonical JSON: exactly `settings.redactedJson(decisions)` (an array's JSON
 * is its items' JSON joined), with each frozen decision without `detail` taken from the cache.
 */
function decisionsJson(decisions: readonly PolicyDecision[], settings: RecordSettings): string {
  let cache = sharedDecisionJson.get(settings);
  if (cache === undefined) {
    cache = new WeakMap();
    sharedDecisionJson.set(settings, cache);
  }
  let out = '[';
  for (let i = 0; i < decisions.length; i += 1) {
    const decision = decisions[i]!;
    let text: string | undefined;
    if (Object.isFrozen(decision) && decision.detail === undefined) {
      text = cache.get(decision);
      if (text === undefined) {
        text = settings.redactedJson(decision);
        cache.set(decision, text);
      }
    } else {
      text = settings.redactedJson(decision);
    }
    if (i > 0) out += ',';
    out += text;
  }
  return `${out}]`;
}

/**
 * A string request id as recorded. It is the client's free text, like an unknown tool's name: a
 * client or relay may build it from a credential, so it is redacted like one, before the cut (a
 * megabyte id would make a megabyte record). Plain ids skip the walk.
 */
function recordedId(id: string, settings: RecordSettings): string {
  if (settings.plainIds && isPlainId(id)) return id;
  return capped(JSON.parse(settings.redactedJson(id)) as string);
}

/** Client text cut to `MAX_CLIENT_CHARS`, marked with `...` where it was cut. */
function capped(text: string): string {
  return text.length > MAX_CLIENT_CHARS ? `${text.slice(0, MAX_CLIENT_CHARS)}...` : text;
}

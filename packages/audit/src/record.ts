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
  caller: string;
  clientId: string | undefined;
  /** Milliseconds, unrounded (rounded to the microsecond when sealed). */
  readonly durationMs: number;
  readonly incidentId: string | undefined;
  readonly outcome: string;
  principal: string | undefined;
  readonly requestId: string | number;
  readonly resultBytes: number;
  sessionId: string | undefined;
  readonly spanId: string | undefined;
  readonly traceId: string | undefined;
  /** Epoch milliseconds of the start; formatted as ISO time when sealed. */
  readonly startedAt: number;
  /** The tool name, cut at 256 characters. */
  readonly tool: string;
  readonly unknownTool: boolean;
  /**
   * Size held in the buffer, about its bytes on the heap once `flattenCaptured` ran, for the byte
   * bound: string units, a long text stored two bytes per character counted twice (the writer adds
   * that for args, bindings and decisions when it flattens them).
   */
  bytes: number;
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
    const cut = argsPreview(args, Math.min(maxArgsChars, ARGS_PREVIEW_CHARS));
    preview = cut === undefined ? undefined : flat(cut);
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
    (preview === undefined ? 0 : heapBytes(preview)) +
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

/**
 * Client text cut to `MAX_CLIENT_CHARS`, marked with `...` where it was cut: flattened, so the record
 * holds the 259 characters it counts, not the client's whole text (a slice keeps its parent alive).
 */
function capped(text: string): string {
  return text.length > MAX_CLIENT_CHARS ? flat(`${text.slice(0, MAX_CLIENT_CHARS)}...`) : text;
}

/** A character past U+00FF: V8 stores a string holding one with two bytes per character. */
const TWO_BYTE = /[\u0100-\uffff]/;

/**
 * About the bytes flat `text` holds on the heap: its length, twice that for a string V8 stores with
 * two bytes per character (CJK text, emoji). Short texts are counted by length alone (at most 256
 * bytes under, within the record's overhead estimate). On a one-byte string the test answers at
 * once (V8 knows none of its characters is past U+00FF); a string built by pieces it would flatten.
 */
function heapBytes(text: string): number {
  return text.length > 256 && TWO_BYTE.test(text) ? text.length * 2 : text.length;
}

/**
 * Makes a record's texts hold what its `bytes` counts: its args, bindings and decisions JSON (written
 * piece by piece, `out += piece`) become flat strings (see `flat`). Returns what they hold beyond that
 * count: the length of each long one V8 stores two bytes per character, for the caller to add to
 * `bytes` before counting the record. The writer calls it for records that wait while a buffer holds
 * more than a small fraction of its bound, not on every call: a record sealed within the millisecond
 * has its texts copied into its line then anyway (the same copy).
 */
export function flattenCaptured(record: CapturedRecord): number {
  const { args, bindings, decisions } = record;
  let extra = heapBytes(flat(args)) - args.length + heapBytes(flat(decisions)) - decisions.length;
  if (bindings !== undefined) extra += heapBytes(flat(bindings)) - bindings.length;
  // The caller's strings come from the token and the app's verifier or `identify`: a slice of a request
  // header would keep the whole header alive in every waiting record, and a long subject in CJK text
  // takes two bytes a character. Each becomes a string of its own, counted as it is held.
  record.caller = own(record.caller);
  extra += heapBytes(record.caller) - record.caller.length;
  if (record.principal !== undefined) {
    record.principal = own(record.principal);
    extra += heapBytes(record.principal) - record.principal.length;
  }
  if (record.clientId !== undefined) {
    record.clientId = own(record.clientId);
    extra += heapBytes(record.clientId) - record.clientId.length;
  }
  if (record.sessionId !== undefined) {
    record.sessionId = own(record.sessionId);
    extra += heapBytes(record.sessionId) - record.sessionId.length;
  }
  return extra;
}

/**
 * A copy of `text` that keeps nothing else alive: a slice (`header.slice(7)`) points to its whole
 * parent, and stays a slice when read. Joined to one more character and flattened, its characters are
 * copied into a string of their own, which the result is a slice of. V8 copies a string shorter than
 * 13 characters instead of slicing it, so such a text is returned as it is.
 */
function own(text: string): string {
  if (text.length < 13) return text;
  return flat(`${text} `).slice(0, -1);
}

/** Where `flat` stores the character it reads, so the read is never optimised away. */
const flatRead = new Int32Array(1);

/**
 * `text` as one flat string, in place. JSON built piece by piece (`out += piece`) is kept by V8 as a
 * tree of its pieces and their joins: about 28 bytes of heap per character for an array of numbers,
 * where the byte bound (`maxBufferBytes`) counts one per character; and a slice keeps its whole
 * parent. Reading a character flattens such a string: V8 copies it into one string, which the tree's
 * root then points to, and the pieces go (measured, heapUsed after gc with records of 30,000-number
 * arrays waiting for a sink that never answers: 28 bytes per counted character before, 1.0 after).
 * On a string that is flat already it is one load.
 */
function flat(text: string): string {
  flatRead[0] = text.charCodeAt(0);
  return text;
}

import {
  canonicalJson,
  errorOf,
  fail,
  isToolError,
  newIncidentId,
  outcomeOf,
  principalOf,
  type ToolContext,
  type ToolResult,
  toolErrorResult,
} from '@toolgate/core';
import { shapeOf } from './args-shape.js';
import type { ArgsMode } from './types.js';

const MAX_TOOL_CHARS = 256;

/** How one tool's records are made, resolved once at factory time. */
export interface RecordSettings {
  readonly args: ArgsMode;
  /** Canonical JSON of a value with its secrets redacted (see `createRedactedJson`). */
  readonly redactedJson: (value: unknown) => string;
}

/**
 * The result core's dispatch will answer for an error that escapes the chain, so the record holds
 * what the client gets. A ToolError keeps its code; anything else is `internal` under an incident id
 * set on the context now, so core's answer carries the same id as the record.
 */
export function resultOfThrow(ctx: ToolContext, error: unknown): ToolResult {
  if (isToolError(error)) return toolErrorResult(error, ctx.incidentId);
  ctx.incidentId ??= newIncidentId();
  return fail('internal', 'Internal error.', { incidentId: ctx.incidentId });
}

/**
 * A call's record, serialised when the call ends: later mutation of its args or result cannot
 * change it, the result itself is not kept, and its size is known for the buffer's byte bound. The
 * chain fields (`prevHash`, `seq`, `hash`) are filled in by the writer; the canonical JSON is
 * `{pre,"prevHash":..,mid,"seq":..,post}` because the keys sort that way.
 */
export interface CapturedRecord {
  /** `aborted` .. `outcome` (`args`, `bindings`, `caller`, `chainId`, ... in sorted order), without braces. */
  readonly pre: string;
  /** `principal`, `requestId`, `resultBytes`. */
  readonly mid: string;
  /** `sessionId` .. `unknownTool`. */
  readonly post: string;
  /** Serialised size, in string units (about its bytes on the heap). */
  readonly bytes: number;
  readonly time: string;
  readonly tool: string;
  readonly outcome: string;
  readonly principal: string | undefined;
  readonly caller: string;
  readonly incidentId: string | undefined;
}

/** Builds and serialises the record of a finished call (see `CapturedRecord`). */
export function captureCall(
  ctx: ToolContext,
  result: ToolResult,
  settings: RecordSettings,
  chainId: string,
  maxArgsChars: number,
): CapturedRecord {
  const unknownTool = ctx.tool === undefined;
  const outcome = outcomeOf(result);
  const incidentId = ctx.incidentId ?? errorOf(result)?.incidentId;
  const principal = principalOf(ctx);
  const clientId = ctx.request.authInfo?.clientId || undefined;
  const aborted = ctx.signal.aborted || ctx.request.signal.aborted;
  const durationMs = Math.round((performance.now() - ctx.startTime) * 1000) / 1000;
  const tool =
    ctx.toolName.length > MAX_TOOL_CHARS ? `${ctx.toolName.slice(0, MAX_TOOL_CHARS)}...` : ctx.toolName;
  const time = isoTime(ctx.startedAt);
  let argsText =
    settings.args === 'shape' ? canonicalJson(shapeOf(ctx.rawArgs)) : settings.redactedJson(ctx.rawArgs);
  // Keeps a hostile megabyte argument from becoming a megabyte record; everything else stays.
  if (argsText.length > maxArgsChars) argsText = JSON.stringify(`[Truncated: ${argsText.length} characters]`);
  // Values bound from the caller (a customer id from the token) are recorded beside the identity,
  // redacted like args: they decide what the call could see.
  const bindings = hasKeys(ctx.bindings) ? settings.redactedJson(ctx.bindings) : undefined;
  const caller = ctx.caller.id;
  const decisions = ctx.decisions.length > 0 ? settings.redactedJson(ctx.decisions) : '[]';
  const resultBytes = unknownTool ? 0 : contentBytes(result);

  let pre = aborted ? `"aborted":true,"args":${argsText}` : `"args":${argsText}`;
  if (bindings !== undefined) pre += `,"bindings":${bindings}`;
  pre += `,"caller":${JSON.stringify(caller)},"chainId":${JSON.stringify(chainId)}`;
  if (clientId !== undefined) pre += `,"clientId":${JSON.stringify(clientId)}`;
  pre += `,"decisions":${decisions},"durationMs":${JSON.stringify(durationMs)}`;
  if (incidentId !== undefined) pre += `,"incidentId":${JSON.stringify(incidentId)}`;
  pre += `,"outcome":${JSON.stringify(outcome)}`;
  let mid = principal === undefined ? '' : `"principal":${JSON.stringify(principal)},`;
  mid += `"requestId":${JSON.stringify(ctx.request.id)},"resultBytes":${resultBytes}`;
  let post =
    ctx.request.sessionId === undefined ? '' : `"sessionId":${JSON.stringify(ctx.request.sessionId)},`;
  const trace = ctx.state.trace;
  if (trace) post += `"spanId":${JSON.stringify(trace.spanId)},`;
  post += `"time":${JSON.stringify(time)},"tool":${JSON.stringify(tool)}`;
  if (trace) post += `,"traceId":${JSON.stringify(trace.traceId)}`;
  if (unknownTool) post += ',"unknownTool":true';
  return {
    pre,
    mid,
    post,
    bytes: pre.length + mid.length + post.length + RECORD_OVERHEAD,
    time,
    tool,
    outcome,
    principal,
    caller,
    incidentId,
  };
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

function hasKeys(value: Readonly<Record<string, unknown>> | undefined): boolean {
  return value !== undefined && Object.keys(value).length > 0;
}

/** The chain fields, the hash and the object around a record's strings, in string units. */
const RECORD_OVERHEAD = 400;

let lastMs = Number.NaN;
let lastIso = '';

/** ISO time of a start, formatted once per millisecond: calls finishing together share it. */
function isoTime(ms: number): string {
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

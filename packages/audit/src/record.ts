import {
  type ErrorCode,
  errorOf,
  fail,
  isToolError,
  newIncidentId,
  outcomeOf,
  type PolicyDecision,
  principalOf,
  type ToolContext,
  type ToolResult,
  toolErrorResult,
} from '@toolgate/core';
import { shapeOf } from './args-shape.js';
import type { UnsealedRecord } from './chain.js';
import type { ArgsMode } from './types.js';

const MAX_TOOL_CHARS = 256;
const NO_DECISIONS: readonly PolicyDecision[] = [];

/** How one tool's records are made, resolved once at factory time. */
export interface RecordSettings {
  readonly args: ArgsMode;
  readonly redact: (value: unknown) => unknown;
}

/**
 * The facts of a finished call, captured on the call's path (cheap copies and references); the
 * expensive parts (redaction, result size, hashing) wait for the writer's batch.
 */
export interface CallFacts {
  readonly settings: RecordSettings;
  readonly startedAt: number;
  readonly requestId: string | number;
  readonly sessionId: string | undefined;
  readonly principal: string | undefined;
  readonly clientId: string | undefined;
  readonly tool: string;
  readonly unknownTool: boolean;
  readonly rawArgs: unknown;
  readonly outcome: 'ok' | ErrorCode;
  readonly incidentId: string | undefined;
  readonly aborted: boolean;
  readonly durationMs: number;
  readonly result: ToolResult;
  readonly trace: { traceId: string; spanId: string } | undefined;
  readonly decisions: readonly PolicyDecision[];
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

export function captureCall(ctx: ToolContext, result: ToolResult, settings: RecordSettings): CallFacts {
  return {
    settings,
    startedAt: ctx.startedAt,
    requestId: ctx.request.id,
    sessionId: ctx.request.sessionId,
    principal: principalOf(ctx),
    clientId: ctx.request.authInfo?.clientId || undefined,
    tool: ctx.toolName,
    unknownTool: ctx.tool === undefined,
    rawArgs: ctx.rawArgs,
    outcome: outcomeOf(result),
    incidentId: ctx.incidentId ?? errorOf(result)?.incidentId,
    aborted: ctx.signal.aborted || ctx.request.signal.aborted,
    durationMs: Math.round((performance.now() - ctx.startTime) * 1000) / 1000,
    result,
    trace: ctx.state.trace,
    decisions: ctx.decisions.length > 0 ? ctx.decisions.slice() : NO_DECISIONS,
  };
}

/** The record of a call, built in the writer's batch. */
export function recordOf(facts: CallFacts): UnsealedRecord {
  const { settings } = facts;
  const record: UnsealedRecord = {
    time: isoTime(facts.startedAt),
    requestId: facts.requestId,
    tool: facts.tool.length > MAX_TOOL_CHARS ? `${facts.tool.slice(0, MAX_TOOL_CHARS)}...` : facts.tool,
    args: settings.args === 'shape' ? shapeOf(facts.rawArgs) : settings.redact(facts.rawArgs),
    outcome: facts.outcome,
    durationMs: facts.durationMs,
    resultBytes: facts.unknownTool ? 0 : Buffer.byteLength(JSON.stringify(facts.result), 'utf8'),
    decisions: facts.decisions.length > 0 ? (settings.redact(facts.decisions) as PolicyDecision[]) : [],
  };
  if (facts.sessionId !== undefined) record.sessionId = facts.sessionId;
  if (facts.principal !== undefined) record.principal = facts.principal;
  if (facts.clientId !== undefined) record.clientId = facts.clientId;
  if (facts.unknownTool) record.unknownTool = true;
  if (facts.incidentId !== undefined) record.incidentId = facts.incidentId;
  if (facts.aborted) record.aborted = true;
  if (facts.trace) {
    record.traceId = facts.trace.traceId;
    record.spanId = facts.trace.spanId;
  }
  return record;
}

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

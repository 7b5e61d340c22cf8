import { type Span, SpanStatusCode } from '@opentelemetry/api';
import {
  cancelledResult,
  ERROR_CODE_DEFAULTS,
  ERROR_META_KEY,
  type ErrorEnvelope,
  errorOf,
  incidentOfThrow,
  isCallerCancel,
  isErrorCode,
  isIncidentId,
  isToolError,
  newIncidentId,
  type ToolContext,
  type ToolResult,
} from '@toolgate/core';
import type { TextRecorder } from './recorded-text.js';
import {
  ATTR_ERROR_TYPE,
  ATTR_EXCEPTION_MESSAGE,
  ATTR_EXCEPTION_STACKTRACE,
  ATTR_EXCEPTION_TYPE,
  ATTR_GEN_AI_TOOL_CALL_RESULT,
  ATTR_RPC_RESPONSE_STATUS_CODE,
  ATTR_TOOLGATE_ERROR_CODE,
  ATTR_TOOLGATE_INCIDENT_ID,
  ERROR_TYPE_TOOL_ERROR,
  EVENT_EXCEPTION,
} from './semconv.js';
import type { OtelRules } from './types.js';

// Core answers a call to an unknown (or disabled) tool with this JSON-RPC error after the chain ran.
const JSONRPC_INVALID_PARAMS = '-32602';
const MAX_STATUS_LENGTH = 1024;
/** The status message of a thrown error: the raw message may hold paths, SQL or secrets. */
export const THROWN_STATUS_MESSAGE = 'Internal error.';
export const UNKNOWN_TOOL_STATUS_MESSAGE = 'Unknown tool.';
/** A confirmation request's message is the call's arguments rendered for the person: never a status. */
export const CONFIRMATION_STATUS_MESSAGE = 'Confirmation required.';

/** Records a returned result on the span; returns its `error.type`, or undefined for a success. */
export function recordResultOutcome(
  span: Span,
  ctx: ToolContext,
  result: ToolResult,
  settings: Readonly<OtelRules>,
  recorder: TextRecorder,
): string | undefined {
  let envelope = errorOf(result);
  if (envelope !== undefined && ctx.tool !== undefined) envelope = asModelSees(ctx, result, envelope);
  if (settings.recordResult && span.isRecording()) {
    const value = envelope ?? result.structuredContent ?? result.content;
    span.setAttribute(ATTR_GEN_AI_TOOL_CALL_RESULT, recorder.json(value));
  }
  if (envelope === undefined) return undefined;
  if (ctx.tool === undefined) {
    // The client gets a JSON-RPC error, not this result: record it as the spec records RPC errors.
    span.setAttribute(ATTR_ERROR_TYPE, JSONRPC_INVALID_PARAMS);
    span.setAttribute(ATTR_RPC_RESPONSE_STATUS_CODE, JSONRPC_INVALID_PARAMS);
    span.setStatus({ code: SpanStatusCode.ERROR, message: UNKNOWN_TOOL_STATUS_MESSAGE });
    return JSONRPC_INVALID_PARAMS;
  }
  span.setAttribute(ATTR_ERROR_TYPE, ERROR_TYPE_TOOL_ERROR);
  span.setAttribute(ATTR_TOOLGATE_ERROR_CODE, envelope.error);
  if (envelope.incidentId !== undefined) span.setAttribute(ATTR_TOOLGATE_INCIDENT_ID, envelope.incidentId);
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: statusMessage(envelope.error, envelope.message, recorder),
  });
  return ERROR_TYPE_TOOL_ERROR;
}

/**
 * The failure as core's boundary will hand it to the model. A result built by middleware inside otel has
 * not passed that boundary yet: one without a well-formed envelope (a raw `isError` result, a relayed
 * envelope whose message is not a string) becomes `internal` with `Internal error.` there, its raw text
 * going to the log only, under an incident id set here so the span, the answer and the log share it; an
 * incident id that core would drop is not recorded either.
 */
function asModelSees(ctx: ToolContext, result: ToolResult, envelope: ErrorEnvelope): ErrorEnvelope {
  const meta = result._meta?.[ERROR_META_KEY] as Partial<ErrorEnvelope> | undefined;
  if (meta !== undefined && isErrorCode(meta.error) && typeof meta.message === 'string') {
    // Core passes on only incident ids of its form; any other value in an envelope is dropped there.
    if (envelope.incidentId === undefined || isIncidentId(envelope.incidentId)) return envelope;
    const { incidentId: _dropped, ...kept } = envelope;
    return kept;
  }
  ctx.incidentId ??= newIncidentId();
  return {
    ok: false,
    error: 'internal',
    message: THROWN_STATUS_MESSAGE,
    hint: ERROR_CODE_DEFAULTS.internal.hint,
    retryable: false,
    incidentId: ctx.incidentId,
  };
}

/**
 * Records a thrown error on the span; returns its `error.type`. A ToolError becomes its result (core
 * answers with its code, and one with a cause under an incident id); anything else becomes `internal`
 * under an incident id. Such an id is set on the context here, so that core's answer, its log entry
 * and this span all carry the same one.
 */
export function recordThrownOutcome(
  span: Span,
  ctx: ToolContext,
  error: unknown,
  settings: Readonly<OtelRules>,
  recorder: TextRecorder,
  errorTypeOf: (error: unknown) => string,
): string {
  // What the caller's own cancel made: core answers it `timeout` (not an incident), and so does the span.
  if (!isToolError(error) && isCallerCancel(ctx, error)) {
    return recordResultOutcome(span, ctx, cancelledResult(ctx.toolName), settings, recorder)!;
  }
  // Core's rule for which throws it answers under an incident id, set now: the span carries the id the
  // model sees.
  const incidentId = incidentOfThrow(ctx, error);
  if (isToolError(error)) {
    // A code none of core's (relayed from an upstream that chose it): core's boundary answers `internal`
    // for it, so the span does too; the code (any text, any length) stays off the span, as a malformed
    // envelope's does.
    const known = isErrorCode(error.code);
    span.setAttribute(ATTR_ERROR_TYPE, ERROR_TYPE_TOOL_ERROR);
    span.setAttribute(ATTR_TOOLGATE_ERROR_CODE, known ? error.code : 'internal');
    if (incidentId !== undefined) span.setAttribute(ATTR_TOOLGATE_INCIDENT_ID, incidentId);
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: known ? statusMessage(error.code, error.message, recorder) : THROWN_STATUS_MESSAGE,
    });
    return ERROR_TYPE_TOOL_ERROR;
  }
  const type = errorTypeOf(error);
  span.setAttribute(ATTR_ERROR_TYPE, type);
  span.setAttribute(ATTR_TOOLGATE_ERROR_CODE, 'internal');
  span.setAttribute(ATTR_TOOLGATE_INCIDENT_ID, incidentId!);
  span.setStatus({ code: SpanStatusCode.ERROR, message: THROWN_STATUS_MESSAGE });
  if (settings.recordErrorStack && span.isRecording()) {
    const { message, stack } = describeThrown(error);
    span.addEvent(EVENT_EXCEPTION, {
      [ATTR_EXCEPTION_TYPE]: type,
      [ATTR_EXCEPTION_MESSAGE]: recorder.text(message),
      [ATTR_EXCEPTION_STACKTRACE]: recorder.text(stack),
    });
  }
  return type;
}

/**
 * The status message of an error result: the message the model sees. Middleware inside otel build their
 * answers (and throw ToolErrors) before core's boundary redacts them for the model, so they pass the
 * same secret patterns here; error paths only.
 */
function statusMessage(code: string, message: string, recorder: TextRecorder): string {
  if (code === 'confirmation_required') return CONFIRMATION_STATUS_MESSAGE;
  return recorder.text(message, MAX_STATUS_LENGTH);
}

// An error built from a service's answer can carry any JSON in these (NestJS sends a list of messages):
// only text may reach the recorder, or recording fails and takes the metric's error.type with it.
function describeThrown(error: unknown): { message: string; stack: string } {
  try {
    if (error instanceof Error) {
      const { message, stack } = error as { message: unknown; stack: unknown };
      return {
        message: typeof message === 'string' ? message : message == null ? '' : String(message),
        stack: typeof stack === 'string' ? stack : '',
      };
    }
    return { message: String(error), stack: '' };
  } catch {
    return { message: '[unreadable error]', stack: '' };
  }
}

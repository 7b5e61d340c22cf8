import {
  type Attributes,
  type Context,
  context,
  type Histogram,
  isSpanContextValid,
  type Span,
  type SpanContext,
  SpanKind,
  type SpanOptions,
  trace,
} from '@opentelemetry/api';
import {
  afterSettled,
  createLogThrottle,
  type Logger,
  type LogThrottle,
  type NextFn,
  type PolicyDecision,
  type ToolContext,
  type ToolDefinition,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { startAttributes } from './call-attributes.js';
import { extractLink, extractParent } from './carrier.js';
import { normaliseOptions, type OtelConfig } from './options.js';
import { recordResultOutcome, recordThrownOutcome } from './outcome.js';
import { clip, type TextRecorder } from './recorded-text.js';
import {
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_MCP_METHOD_NAME,
  ATTR_TOOLGATE_DECISION_ACTION,
  ATTR_TOOLGATE_DECISION_BY,
  ATTR_TOOLGATE_DECISION_REASON,
  EVENT_TOOLGATE_DECISION,
  MCP_METHOD_TOOLS_CALL,
  OTHER,
} from './semconv.js';
import type { OtelOptions, OtelRules } from './types.js';

/** How the chain below ended: its result, or what it threw. */
type Ending = { readonly result: ToolResult } | { readonly thrown: unknown };

const NO_ATTRIBUTES: SpanOptions = { kind: SpanKind.SERVER };

/**
 * Traces every tool call: a SERVER span `tools/call {tool}` per the MCP semantic conventions, child of
 * the trace context the client sent in `params._meta`, with the rest of the chain (and the handler)
 * running inside it; the `mcp.server.operation.duration` histogram; policy decisions as span events.
 * Put it first (outermost) so it times and sees everything.
 */
export function createOtel(options: OtelOptions = {}): ToolMiddleware {
  const config = normaliseOptions(options);
  const sdkFailure = sdkFailureReporter();
  // Not async itself: the untraced path hands next()'s promise straight back, with no await of its own.
  return function otelMiddleware(ctx, next) {
    const rules = config.rules.forTool(ctx.toolName);
    if (rules === undefined) return next();
    const logger = config.logger ?? ctx.logger;
    const active = context.active();
    // `parent` (the default): the client's context is the span's parent; otherwise the server's own is.
    const mode = config.clientContext;
    const parent =
      mode === 'parent' ? extractParent(config.propagator, ctx.request.meta, active, logger) : active;
    let tracing: boolean;
    let histogram: Histogram | undefined;
    try {
      tracing = config.tracing();
      histogram = config.durationHistogram();
    } catch (error) {
      // A provider that throws must not fail the call: it runs as with no SDK at all.
      sdkFailure(logger, 'providers', error);
      return untraced(ctx, next, parent, active);
    }
    if (!tracing && histogram === undefined) return untraced(ctx, next, parent, active);
    const link = mode === 'link' ? extractLink(config.propagator, ctx.request.meta, logger) : undefined;
    return traced(config, rules, tracing, histogram, ctx, next, parent, active, link, logger, sdkFailure);
  };
}

/**
 * The traced call. Not async: two handlers on the chain's promise end the span, so a traced call makes
 * one promise of its own (with an SDK's context manager on, every promise also costs its async hooks).
 */
function traced(
  config: OtelConfig,
  rules: Readonly<OtelRules>,
  tracing: boolean,
  histogram: Histogram | undefined,
  ctx: ToolContext,
  next: NextFn,
  parent: Context,
  active: Context,
  link: SpanContext | undefined,
  logger: Logger,
  sdkFailure: SdkFailureReporter,
): Promise<ToolResult> {
  let span: Span;
  try {
    // A name from the client that matches no tool must not become a span name (cardinality).
    const name = ctx.tool === undefined ? MCP_METHOD_TOOLS_CALL : `${MCP_METHOD_TOOLS_CALL} ${ctx.tool.name}`;
    // Attributes are built only for a provider that records them; given at start so samplers see them.
    span = config.tracer.startSpan(
      name,
      tracing ? spanOptions(ctx, config, rules, link) : NO_ATTRIBUTES,
      parent,
    );
  } catch (error) {
    // A tracer, sampler or span processor that throws must not fail the call: it runs untraced.
    sdkFailure(logger, 'start', error);
    return untraced(ctx, next, parent, active);
  }
  let valid = false;
  try {
    const spanContext = span.spanContext();
    valid = isSpanContextValid(spanContext);
    if (valid) ctx.state.trace = { traceId: spanContext.traceId, spanId: spanContext.spanId };
    if (rules.recordArguments && span.isRecording()) {
      span.setAttribute(ATTR_GEN_AI_TOOL_CALL_ARGUMENTS, config.recorder.json(ctx.rawArgs));
    }
  } catch (error) {
    sdkFailure(logger, 'record', error);
  }
  let below: Promise<ToolResult>;
  try {
    // An invalid span (no SDK and no parent) has nothing to hand down: skip the context copy.
    below = valid
      ? context.with(trace.setSpan(parent, span), next)
      : parent === active
        ? next()
        : context.with(parent, next);
  } catch (error) {
    finish(config, rules, span, histogram, ctx, { thrown: error }, logger, sdkFailure);
    return Promise.reject(error);
  }
  // The span ends beside the chain, not in it: the handlers are the first on `below`, so they run
  // before anything the caller attaches, and the answer goes on without waiting a microtask for them
  // (each hop counts: see `afterSettled`).
  afterSettled(
    below,
    (result) => finish(config, rules, span, histogram, ctx, { result }, logger, sdkFailure),
    (error) => finish(config, rules, span, histogram, ctx, { thrown: error }, logger, sdkFailure),
  );
  return below;
}

/** A recorded span's start options: its attributes (samplers see them) and the client's span as a link. */
function spanOptions(
  ctx: ToolContext,
  config: OtelConfig,
  rules: Readonly<OtelRules>,
  link: SpanContext | undefined,
): SpanOptions {
  const options: SpanOptions = { kind: SpanKind.SERVER, attributes: startAttributes(ctx, config, rules) };
  if (link !== undefined) options.links = [{ context: link }];
  return options;
}

/** Reports an SDK (tracer, span, processor, meter) that threw; one line a minute per stage, with counts. */
type SdkFailureReporter = (
  logger: Logger,
  stage: 'providers' | 'start' | 'record' | 'end' | 'metric',
  error: unknown,
) => void;

function sdkFailureReporter(): SdkFailureReporter {
  let throttle: LogThrottle | undefined;
  return (logger, stage, error) => {
    throttle ??= createLogThrottle();
    throttle(stage, (suppressed) => {
      logger.warn(
        { err: error, stage, ...(suppressed > 0 && { suppressed }) },
        'otel: the OpenTelemetry SDK threw; the call goes on without that part of its telemetry',
      );
    });
  };
}

/** @deprecated Renamed `createOtel`; this alias stays for one release. */
export const otel: (options?: OtelOptions) => ToolMiddleware = createOtel;

/**
 * No tracer and no meter provider registered: no span, no attributes, no clock read. Only the trace
 * context the client sent is handed down (and its ids noted for audit), as the no-op span would have.
 */
function untraced(ctx: ToolContext, next: NextFn, parent: Context, active: Context): Promise<ToolResult> {
  const spanContext = trace.getSpanContext(parent);
  if (spanContext !== undefined && isSpanContextValid(spanContext)) {
    ctx.state.trace = { traceId: spanContext.traceId, spanId: spanContext.spanId };
  }
  return parent === active ? next() : context.with(parent, next);
}

/** Records the outcome, ends the span and records the duration; never changes the call's outcome. */
function finish(
  config: OtelConfig,
  settings: Readonly<OtelRules>,
  span: Span,
  histogram: Histogram | undefined,
  ctx: ToolContext,
  ending: Ending,
  logger: Logger,
  sdkFailure: SdkFailureReporter,
): void {
  let errorType: string | undefined;
  try {
    errorType =
      'thrown' in ending
        ? recordThrownOutcome(span, ctx, ending.thrown, settings, config.recorder, config.errorType)
        : recordResultOutcome(span, ctx, ending.result, settings, config.recorder);
    if (span.isRecording()) {
      // Added now, not before next(): inner middleware push decisions while the chain runs.
      addDecisionEvents(span, ctx.decisions, config.recorder);
      runHook(settings.onSpan, span, ctx, 'result' in ending ? ending.result : undefined, logger);
    }
  } catch (error) {
    logger.warn({ err: error, tool: ctx.toolName }, 'otel: recording the call on its span failed');
  } finally {
    try {
      span.end();
    } catch (error) {
      // A span processor's onEnd (or an exporter it calls) threw: the call's outcome stands.
      sdkFailure(logger, 'end', error);
    }
  }
  if (histogram !== undefined) {
    try {
      histogram.record((performance.now() - ctx.startTime) / 1000, metricAttributes(ctx.tool, errorType));
    } catch (error) {
      sdkFailure(logger, 'metric', error);
    }
  }
}

// Per registered tool, the attributes of a success are built once.
const successAttributes = new WeakMap<ToolDefinition, Attributes>();

// Metrics carry the tool only when it is registered: a client inventing names must not mint series.
function metricAttributes(tool: ToolDefinition | undefined, errorType: string | undefined): Attributes {
  if (tool !== undefined && errorType === undefined) {
    let attributes = successAttributes.get(tool);
    if (attributes === undefined) {
      attributes = { [ATTR_MCP_METHOD_NAME]: MCP_METHOD_TOOLS_CALL, [ATTR_GEN_AI_TOOL_NAME]: tool.name };
      successAttributes.set(tool, attributes);
    }
    return attributes;
  }
  const attributes: Attributes = {
    [ATTR_MCP_METHOD_NAME]: MCP_METHOD_TOOLS_CALL,
    [ATTR_GEN_AI_TOOL_NAME]: tool === undefined ? OTHER : tool.name,
  };
  if (errorType !== undefined) attributes[ATTR_ERROR_TYPE] = errorType;
  return attributes;
}

/** Decision events one span records; a chain that pushes more gets one closing event that counts the rest. */
const MAX_DECISION_EVENTS = 64;
/** `by` and `action` name a policy and its verdict: short words, capped like any other name. */
const MAX_DECISION_WORD = 64;
/** A reason is free text a middleware wrote (it may quote the call): redacted, then capped. */
const MAX_DECISION_REASON = 1024;

function addDecisionEvents(span: Span, decisions: readonly PolicyDecision[], recorder: TextRecorder): void {
  const recorded = decisions.length > MAX_DECISION_EVENTS ? MAX_DECISION_EVENTS - 1 : decisions.length;
  for (let index = 0; index < recorded; index += 1) {
    const decision = decisions[index]!;
    const attributes: Attributes = {
      [ATTR_TOOLGATE_DECISION_BY]: clip(String(decision.by), MAX_DECISION_WORD),
      [ATTR_TOOLGATE_DECISION_ACTION]: clip(String(decision.action), MAX_DECISION_WORD),
    };
    if (typeof decision.reason === 'string') {
      attributes[ATTR_TOOLGATE_DECISION_REASON] = recorder.repeatedText(decision.reason, MAX_DECISION_REASON);
    }
    span.addEvent(EVENT_TOOLGATE_DECISION, attributes);
  }
  if (recorded < decisions.length) {
    span.addEvent(EVENT_TOOLGATE_DECISION, {
      [ATTR_TOOLGATE_DECISION_BY]: 'toolgate',
      [ATTR_TOOLGATE_DECISION_ACTION]: 'decisions-truncated',
      [ATTR_TOOLGATE_DECISION_REASON]: `${decisions.length - recorded} more decisions not recorded`,
    });
  }
}

// The user's hook runs in its own guard: a hook that throws or rejects is reported, never propagated.
function runHook(
  hook: OtelRules['onSpan'],
  span: Span,
  ctx: ToolContext,
  result: ToolResult | undefined,
  logger: Logger,
): void {
  if (hook === undefined) return;
  const report = (error: unknown): void => {
    logger.warn({ err: error, tool: ctx.toolName }, 'otel: the onSpan hook threw; ignored');
  };
  try {
    const returned: unknown = hook(span, ctx, result);
    if (returned instanceof Promise) returned.catch(report);
  } catch (error) {
    report(error);
  }
}

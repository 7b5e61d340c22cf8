import {
  type Context,
  isSpanContextValid,
  ROOT_CONTEXT,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  trace,
} from '@opentelemetry/api';
import type { Logger } from '@toolgate/core';

type Meta = Readonly<Record<string, unknown>>;

// `_meta` comes from the client: read own string members only (never the prototype, never objects or
// arrays: MCP carries each of `traceparent`, `tracestate` and `baggage` as one string, and a propagator
// would read an array as a list of HTTP headers, taking its first traceparent).
const metaGetter: TextMapGetter<Meta> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    if (!Object.hasOwn(carrier, key)) return undefined;
    const value = carrier[key];
    return typeof value === 'string' ? value : undefined;
  },
};

/**
 * The parent context of a call: the trace context a client put in `params._meta` (through the
 * propagator), over the active context, which is also the fallback.
 */
export function extractParent(
  propagator: TextMapPropagator,
  meta: Meta | undefined,
  active: Context,
  logger: Logger,
): Context {
  if (meta === undefined || meta === null || typeof meta !== 'object') return active;
  let extracted: unknown;
  try {
    extracted = propagator.extract(active, meta, metaGetter);
  } catch (error) {
    // A custom propagator that throws must not fail the call; the span starts from the active context.
    logger.warn(
      { err: error },
      'otel: the propagator threw while reading params._meta; using the active context',
    );
    return active;
  }
  // Nothing read (the API's no-op propagator, or no trace context in `_meta`): the same context back.
  if (extracted === active || isContext(extracted)) return extracted as Context;
  // Nor one that answers something else (`undefined` for a carrier it did not expect): every later
  // step (the span's parent, the handler's context, the link) reads it as a context.
  logger.warn(
    { returned: typeof extracted },
    'otel: the propagator returned no context for params._meta; using the active context',
  );
  return active;
}

function isContext(value: unknown): value is Context {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Partial<Context>).getValue === 'function' &&
    typeof (value as Partial<Context>).setValue === 'function'
  );
}

/**
 * The span a client named in `params._meta` (`clientContext: 'link'`), for a span link: read over an
 * empty context, so neither the client's baggage nor its trace reaches the call's own context. The link
 * keeps the ids and flags only: the client's `tracestate` is its own free text (up to 512 characters the
 * propagator accepts), and a client you do not run has nothing to store in your backend.
 */
export function extractLink(
  propagator: TextMapPropagator,
  meta: Meta | undefined,
  logger: Logger,
): SpanContext | undefined {
  const remote = extractParent(propagator, meta, ROOT_CONTEXT, logger);
  if (remote === ROOT_CONTEXT) return undefined;
  const spanContext = trace.getSpanContext(remote);
  if (spanContext === undefined || !isSpanContextValid(spanContext)) return undefined;
  const { traceId, spanId, traceFlags } = spanContext;
  return { traceId, spanId, traceFlags, isRemote: true };
}

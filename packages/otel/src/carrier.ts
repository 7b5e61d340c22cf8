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
  try {
    return propagator.extract(active, meta, metaGetter);
  } catch (error) {
    // A custom propagator that throws must not fail the call; the span starts from the active context.
    logger.warn(
      { err: error },
      'otel: the propagator threw while reading params._meta; using the active context',
    );
    return active;
  }
}

/**
 * The span a client named in `params._meta` (`clientContext: 'link'`), for a span link: read over an
 * empty context, so neither the client's baggage nor its trace reaches the call's own context.
 */
export function extractLink(
  propagator: TextMapPropagator,
  meta: Meta | undefined,
  logger: Logger,
): SpanContext | undefined {
  const remote = extractParent(propagator, meta, ROOT_CONTEXT, logger);
  if (remote === ROOT_CONTEXT) return undefined;
  const spanContext = trace.getSpanContext(remote);
  return spanContext !== undefined && isSpanContextValid(spanContext) ? spanContext : undefined;
}

import type { Context, TextMapGetter, TextMapPropagator } from '@opentelemetry/api';
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

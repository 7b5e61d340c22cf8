import { createNoopMeter, type Histogram, type MeterProvider, metrics } from '@opentelemetry/api';
import { MCP_DURATION_BUCKETS, METRIC_MCP_SERVER_OPERATION_DURATION } from './semconv.js';
import { SCOPE_NAME, SCOPE_VERSION } from './version.js';

/** The duration histogram to record into now, or undefined when only a no-op one exists. */
export type DurationHistogram = () => Histogram | undefined;

// The API's no-op histogram class, known through its public factory: recording into one is skipped,
// with the clock read and the attributes it would need.
const NoopHistogram = createNoopMeter().createHistogram('toolgate.noop').constructor;

function createHistogram(provider: MeterProvider): Histogram | undefined {
  const histogram = provider
    .getMeter(SCOPE_NAME, SCOPE_VERSION)
    .createHistogram(METRIC_MCP_SERVER_OPERATION_DURATION, {
      description: 'MCP request duration as observed on the receiver, until the result is sent.',
      unit: 's',
      advice: { explicitBucketBoundaries: [...MCP_DURATION_BUCKETS] },
    });
  return histogram.constructor === NoopHistogram ? undefined : histogram;
}

/**
 * The `mcp.server.operation.duration` histogram. With no provider given, the global one is re-read on
 * every call: the metrics API has no proxy provider, so a histogram taken before the app registered
 * its SDK would stay a no-op forever.
 */
export function createDurationHistogram(provider: MeterProvider | undefined): DurationHistogram {
  if (provider !== undefined) {
    const histogram = createHistogram(provider);
    return () => histogram;
  }
  let current: MeterProvider | undefined;
  let histogram: Histogram | undefined;
  return () => {
    const global = metrics.getMeterProvider();
    if (global !== current) {
      // Noted first: a provider that throws here is reported once, then read as having no histogram.
      current = global;
      histogram = undefined;
      histogram = createHistogram(global);
    }
    return histogram;
  };
}

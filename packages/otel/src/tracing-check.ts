import { ProxyTracerProvider, type TracerProvider, trace } from '@opentelemetry/api';

// The API's no-op provider, reached through a proxy that has no delegate (the API does not export it).
const NOOP_PROVIDER: TracerProvider = new ProxyTracerProvider().getDelegate();

function isNoop(provider: TracerProvider): boolean {
  const effective = provider instanceof ProxyTracerProvider ? provider.getDelegate() : provider;
  return effective === NOOP_PROVIDER || effective.constructor === NOOP_PROVIDER.constructor;
}

/**
 * Whether spans are recorded anywhere: false while only the API's no-op provider exists. The global
 * provider is re-read on every call (two property reads), so an SDK registered later is picked up; a
 * provider that is not the API's proxy counts as tracing (another API copy's proxy included).
 */
export function createTracingCheck(provider: TracerProvider | undefined): () => boolean {
  if (provider !== undefined && !(provider instanceof ProxyTracerProvider)) {
    const tracing = !isNoop(provider);
    return () => tracing;
  }
  const source = provider;
  return () => !isNoop(source ?? trace.getTracerProvider());
}

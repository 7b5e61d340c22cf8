// The real OTel SDK the benchmarks register: an async-hooks context manager and a BasicTracerProvider
// with a BatchSpanProcessor whose exporter discards. Spans are built, batched and handed over as in
// production; only the network send is skipped.
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';

export const discardingExporter: SpanExporter = {
  export: (_spans, done) => done({ code: ExportResultCode.SUCCESS }),
  shutdown: () => Promise.resolve(),
};

/** Registers the SDK globally; the returned function unregisters it. */
export function registerOtelSdk(): () => Promise<void> {
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(discardingExporter)] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  return async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
  };
}

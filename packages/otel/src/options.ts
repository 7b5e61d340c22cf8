import { propagation, type TextMapPropagator, type Tracer, trace } from '@opentelemetry/api';
import type { Logger } from '@toolgate/core';
import { createDurationHistogram, type DurationHistogram } from './duration.js';
import { createTextRecorder, type TextRecorder } from './recorded-text.js';
import type { OnSpanHook, OtelOptions, ToolOtelOptions } from './types.js';
import { SCOPE_NAME, SCOPE_VERSION } from './version.js';

/** What one tool's calls record, after per-tool overrides. */
export interface CallSettings {
  readonly recordArguments: boolean;
  readonly recordResult: boolean;
  readonly recordErrorStack: boolean;
  readonly onSpan: OnSpanHook | undefined;
}

/** The options, checked and resolved once at factory time. */
export interface OtelConfig {
  readonly tracer: Tracer;
  readonly propagator: TextMapPropagator;
  readonly durationHistogram: DurationHistogram;
  readonly transport: 'pipe' | 'tcp' | undefined;
  readonly protocolVersion: string | undefined;
  readonly recorder: TextRecorder;
  readonly logger: Logger | undefined;
  /** The settings for a tool name, or false when the tool opted out. */
  settingsFor(toolName: string): CallSettings | false;
}

const DEFAULT_MAX_RECORDED_LENGTH = 4096;

export function normaliseOptions(options: OtelOptions): OtelConfig {
  if (options.transport !== undefined && options.transport !== 'pipe' && options.transport !== 'tcp') {
    throw new TypeError(`otel: transport must be 'pipe' or 'tcp', got ${String(options.transport)}`);
  }
  const max = options.maxRecordedLength ?? DEFAULT_MAX_RECORDED_LENGTH;
  if (!Number.isInteger(max) || max < 32) {
    throw new TypeError('otel: maxRecordedLength must be an integer of at least 32');
  }
  const base = resolveSettings(options, undefined, 'otel');
  const perTool = new Map<string, CallSettings | false>();
  for (const [name, override] of Object.entries(options.tools ?? {})) {
    perTool.set(name, override === false ? false : resolveSettings(override, base, `otel: tools.${name}`));
  }
  return {
    // The API's global tracer is a proxy: a provider registered after this factory ran is still used.
    tracer: (options.tracerProvider ?? trace).getTracer(SCOPE_NAME, SCOPE_VERSION),
    // The global propagation API delegates at call time, so late registration works here too.
    propagator: options.propagator ?? propagation,
    durationHistogram: createDurationHistogram(options.meterProvider),
    transport: options.transport,
    protocolVersion: options.protocolVersion,
    recorder: createTextRecorder(options.redact, max),
    logger: options.logger,
    settingsFor: (toolName) => perTool.get(toolName) ?? base,
  };
}

function resolveSettings(
  options: ToolOtelOptions,
  fallback: CallSettings | undefined,
  where: string,
): CallSettings {
  if (options.onSpan !== undefined && typeof options.onSpan !== 'function') {
    throw new TypeError(`${where}: onSpan must be a function`);
  }
  return {
    recordArguments: options.recordArguments ?? fallback?.recordArguments ?? false,
    recordResult: options.recordResult ?? fallback?.recordResult ?? false,
    recordErrorStack: options.recordErrorStack ?? fallback?.recordErrorStack ?? false,
    onSpan: options.onSpan ?? fallback?.onSpan,
  };
}

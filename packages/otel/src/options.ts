import { propagation, type TextMapPropagator, type Tracer, trace } from '@opentelemetry/api';
import { type Logger, resolveToolOptions, type ToolOptionsResolver } from '@toolgate/core';
import { createDurationHistogram, type DurationHistogram } from './duration.js';
import { createErrorTypes } from './error-type.js';
import { createTextRecorder, type TextRecorder } from './recorded-text.js';
import { createTracingCheck } from './tracing-check.js';
import type { ClientContextMode, OtelOptions, OtelRules } from './types.js';
import { SCOPE_NAME, SCOPE_VERSION } from './version.js';

/** The options, checked and resolved once at factory time. */
export interface OtelConfig {
  readonly tracer: Tracer;
  /** False while no tracer provider is registered (the API's no-op): no span attributes are built then. */
  readonly tracing: () => boolean;
  readonly propagator: TextMapPropagator;
  readonly clientContext: ClientContextMode;
  readonly durationHistogram: DurationHistogram;
  readonly transport: 'pipe' | 'tcp' | undefined;
  readonly protocolVersion: string | undefined;
  readonly recorder: TextRecorder;
  /** A thrown error's `error.type`: never secret-shaped, at most `MAX_ERROR_TYPES` distinct values. */
  readonly errorType: (error: unknown) => string;
  readonly logger: Logger | undefined;
  /** Each tool's rules (core's merge rule); `undefined` when the tool opted out. */
  readonly rules: ToolOptionsResolver<OtelRules>;
}

const DEFAULTS: OtelRules = {
  recordArguments: false,
  recordResult: false,
  recordErrorStack: false,
  recordCallerId: false,
  sessionId: 'digest',
  onSpan: undefined,
};
const DEFAULT_MAX_RECORDED_LENGTH = 4096;

function checkRules(rules: Readonly<OtelRules>, where: string): void {
  if (rules.sessionId !== 'digest' && rules.sessionId !== 'raw' && rules.sessionId !== 'omit') {
    throw new TypeError(
      `${where}: sessionId must be 'digest', 'raw' or 'omit', got ${JSON.stringify(rules.sessionId)}`,
    );
  }
  if (rules.onSpan !== undefined && typeof rules.onSpan !== 'function') {
    throw new TypeError(`${where}: onSpan must be a function`);
  }
}

export function normaliseOptions(options: OtelOptions): OtelConfig {
  if (options.transport !== undefined && options.transport !== 'pipe' && options.transport !== 'tcp') {
    throw new TypeError(`createOtel: transport must be 'pipe' or 'tcp', got ${String(options.transport)}`);
  }
  const clientContext = options.clientContext ?? 'parent';
  if (clientContext !== 'parent' && clientContext !== 'link' && clientContext !== 'ignore') {
    throw new TypeError(
      `createOtel: clientContext must be 'parent', 'link' or 'ignore', got ${String(options.clientContext)}`,
    );
  }
  const max = options.maxRecordedLength ?? DEFAULT_MAX_RECORDED_LENGTH;
  if (!Number.isInteger(max) || max < 32) {
    throw new TypeError('createOtel: maxRecordedLength must be an integer of at least 32');
  }
  return {
    // The API's global tracer is a proxy: a provider registered after this factory ran is still used.
    tracer: (options.tracerProvider ?? trace).getTracer(SCOPE_NAME, SCOPE_VERSION),
    tracing: createTracingCheck(options.tracerProvider),
    // The global propagation API delegates at call time, so late registration works here too.
    propagator: options.propagator ?? propagation,
    clientContext,
    durationHistogram: createDurationHistogram(options.meterProvider),
    transport: options.transport,
    protocolVersion: options.protocolVersion,
    recorder: createTextRecorder(options.redact, max),
    errorType: createErrorTypes(options.redact),
    logger: options.logger,
    rules: resolveToolOptions('createOtel', DEFAULTS, options, checkRules),
  };
}

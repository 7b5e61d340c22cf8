// Public face of @toolgate/otel: explicit named exports only.
export { createOtel, otel } from './create-otel.js';
export * as semconv from './semconv.js';
export type { ClientContextMode, OnSpanHook, OtelOptions, OtelRules, ToolOtelOptions } from './types.js';

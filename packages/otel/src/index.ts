// Public face of @toolgate/otel: explicit named exports only.
export { sessionDigest } from './call-attributes.js';
export { createOtel, otel } from './create-otel.js';
export * as semconv from './semconv.js';
export type { ClientContextMode, OnSpanHook, OtelOptions, OtelRules, ToolOtelOptions } from './types.js';

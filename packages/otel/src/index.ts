// Public face of @toolgate/otel: explicit named exports only.
export { otel } from './middleware.js';
export * as semconv from './semconv.js';
export type { OnSpanHook, OtelOptions, ToolOtelOptions } from './types.js';

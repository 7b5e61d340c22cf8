// Public face of @toolgate/circuit-breaker: explicit named exports only.
export { CAPACITY_RETRY_AFTER_MS } from './answers.js';
export { createCircuitBreakers } from './create-circuit-breakers.js';
export { CIRCUIT_BREAKER_DEFAULTS, type ResolvedSettings } from './settings.js';
export type {
  BreakerSettings,
  BreakerStats,
  CircuitBreakerOptions,
  CircuitBreakers,
  CircuitEvent,
  CircuitEventListener,
  CircuitEventType,
  CircuitState,
  ToolBreakerOptions,
} from './types.js';

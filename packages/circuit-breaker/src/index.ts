// Public face of @toolgate/circuit-breaker: explicit named exports only.
export { CAPACITY_RETRY_AFTER_MS } from './answers.js';
export { createCircuitBreaker, createCircuitBreakers } from './create-circuit-breaker.js';
export { CIRCUIT_BREAKER_DEFAULTS, type ResolvedSettings } from './settings.js';
export type {
  BreakerSettings,
  BreakerStats,
  CircuitBreaker,
  CircuitBreakerOptions,
  CircuitBreakers,
  CircuitEvent,
  CircuitEventListener,
  CircuitEventType,
  CircuitState,
  ToolBreakerOptions,
} from './types.js';

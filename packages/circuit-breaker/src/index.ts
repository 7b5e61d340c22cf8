// Public face of @toolgate/circuit-breaker: explicit named exports only.
export {};

// Public face of @toolgate/otel: explicit named exports only.
export {};

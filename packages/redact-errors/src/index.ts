// Public face of @toolgate/redact-errors: explicit named exports only.
export {};

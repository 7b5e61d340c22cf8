// Public face of @toolgate/sql: explicit named exports only.
export {};

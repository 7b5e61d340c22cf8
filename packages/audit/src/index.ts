// Public face of @toolgate/audit: explicit named exports only.
export {};

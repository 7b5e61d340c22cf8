// Public face of @toolgate/exec: explicit named exports only.
export {};

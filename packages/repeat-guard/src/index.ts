// Public face of @toolgate/repeat-guard: explicit named exports only.
export {};

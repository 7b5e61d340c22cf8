// Public face of @toolgate/url-allowlist: explicit named exports only.
export {};

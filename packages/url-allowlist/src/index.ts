// Public face of @toolgate/url-allowlist: explicit named exports only.
export {
  createUrlGuard,
  type UrlArgumentOptions,
  type UrlArgumentOverride,
  type UrlGuardOptions,
  type UrlGuardRules,
  urlArgument,
} from './create-url-guard.js';
export { createDnsResolver, type DnsResolverOptions } from './dns-resolver.js';
export { createLookupResolver, type LookupResolverOptions } from './lookup-resolver.js';
export { DEFAULT_REDIRECT_HEADERS, SAFE_RESPONSE_HEADERS } from './options.js';
export { createUrlPolicy } from './policy.js';
export { isUrlRefusedError, type UrlRefusalReason, UrlRefusedError } from './refusal.js';
export type {
  CheckedUrl,
  Resolver,
  UrlFetchInit,
  UrlFetchResult,
  UrlPolicy,
  UrlPolicyOptions,
} from './types.js';

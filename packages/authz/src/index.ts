// Public face of @toolgate/authz: explicit named exports only.
export { AUTHZ_META_KEY, createAuthz } from './authz.js';
export { createJwtVerifier, type JwtVerifier, type JwtVerifierOptions } from './jwt-verifier.js';
export {
  createProtectedResource,
  type HttpAnswer,
  type ProtectedResource,
  type ProtectedResourceMetadataOptions,
} from './resource-metadata.js';
export {
  type AccessTokenError,
  type AccessTokenErrorFields,
  AccessTokenInvalidError,
  AccessTokenScopeError,
  AccessTokenUnavailableError,
  type InvalidTokenReason,
  isAccessTokenError,
} from './token-errors.js';
export type {
  AccessRequest,
  AuthzMiddleware,
  AuthzOptions,
  AuthzRules,
  ClaimPredicate,
  ToolRequirement,
} from './types.js';

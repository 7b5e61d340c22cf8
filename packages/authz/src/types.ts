import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type {
  CallerIdentity,
  PerToolOptions,
  ToolDefinition,
  ToolMiddleware,
  ToolRequest,
} from '@toolgate/core';

/** What `check` sees: the tool asked for and everything known about who asks. */
export interface AccessRequest {
  readonly tool: ToolDefinition;
  readonly caller: CallerIdentity;
  /** The verified token's info; undefined without auth (stdio, HTTP without a verifier). */
  readonly auth: AuthInfo | undefined;
  readonly request: ToolRequest;
}

/** A predicate over one claim's value (`undefined` when the token lacks the claim). */
export type ClaimPredicate = (value: unknown) => boolean;

/**
 * What a caller must hold to see and call a tool. Every part given must pass (scopes AND anyOf AND
 * claims AND check); `{}` lets every caller through, including one without a token (an expired token
 * passes nothing).
 */
export interface ToolRequirement {
  /** Scopes the token must carry, all of them. @default [] */
  scopes?: readonly string[];
  /** Scope sets of which the token must carry at least one in full, e.g. `[['orders:read'], ['support']]`. @default [] (no alternative asked) */
  anyOf?: readonly (readonly string[])[];
  /** Claim predicates over `authInfo.extra` (the token's claims); each must return true. A throw denies. @default {} */
  claims?: Readonly<Record<string, ClaimPredicate>>;
  /** Anything else, synchronous (it also filters `tools/list`); must return true. A throw denies. @default undefined */
  check?: (access: AccessRequest) => boolean;
}

/** The options a tool may override (or opt out of with `false`). */
export interface AuthzRules {
  /** What a caller must hold; for tools that declare nothing it is the server default. Required at the top level: use `{}` to let every caller through. */
  require: ToolRequirement;
  /**
   * `hidden`: a tool the caller may not use is left out of `tools/list` and a call is answered exactly
   * like an unknown tool. `refuse`: the tool stays listed and a call gets `permission_denied` naming only
   * the missing scopes (for clients that can step up). @default 'hidden'
   */
  mode: 'hidden' | 'refuse';
  /** The caller over a local transport (no auth, `caller.kind === 'local'`: core's stdio or in-memory transport, or one declared with `registerTools`' `localTransport`): `allow` lets it use every tool (only when core also saw a local transport, `request.local`, and the call carries no token; a caller a custom `identify` names `local` otherwise is judged by the requirement); `deny` treats it as a caller without a token. @default 'allow' */
  local: 'allow' | 'deny';
}

/** Options of `createAuthz`: the server default and per-tool overrides (`false`: authz leaves the tool alone). */
export interface AuthzOptions extends Partial<Omit<AuthzRules, 'require'>>, PerToolOptions<AuthzRules> {
  /** What a caller must hold to use a tool that declares nothing. Required: `{}` lets every caller through. */
  require: ToolRequirement;
  /**
   * Clock skew allowed on a token's `expiresAt`, in seconds (0 to 300), for tokens that do not carry the
   * tolerance `createJwtVerifier` accepted them with (that one is used for its own tokens). Set it to your
   * verifier's when that is another. @default 5 (createJwtVerifier's default)
   */
  clockToleranceSec?: number;
}

/** The middleware `createAuthz` returns: place it globally, after redact-errors and before rate-limit. */
export interface AuthzMiddleware extends ToolMiddleware {
  canSee: NonNullable<ToolMiddleware['canSee']>;
  /** Whether this caller may use this tool under this middleware's rules (what `canSee` and the call path ask). */
  allows(tool: ToolDefinition, caller: CallerIdentity, request: ToolRequest): boolean;
}

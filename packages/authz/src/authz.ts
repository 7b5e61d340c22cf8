import {
  type CallerIdentity,
  fail,
  type NextFn,
  type PolicyDecision,
  resolveToolOptions,
  type ToolContext,
  type ToolDefinition,
  type ToolRequest,
  type ToolResult,
} from '@toolgate/core';
import {
  type CheckedRequirement,
  checkRequirement,
  DEFAULT_CLOCK_TOLERANCE_SEC,
  EXPIRED,
  evaluate,
  MAX_CLOCK_TOLERANCE_SEC,
  type Verdict,
} from './requirement.js';
import type { AuthzMiddleware, AuthzOptions, AuthzRules } from './types.js';

/** The `_meta` key of a refusal that lists the missing scopes, for clients that can step up. */
export const AUTHZ_META_KEY = 'toolgate/authz';

interface CompiledRules {
  readonly requirement: CheckedRequirement;
  readonly mode: AuthzRules['mode'];
  readonly local: AuthzRules['local'];
}

const LOCAL_ALLOWED: Verdict = Object.freeze({
  allow: true,
  reason: 'local caller (local transport) allowed',
});

/**
 * Per-tool authorization: each tool requires scopes, scope alternatives, claim predicates or a
 * function; tools that declare nothing get `require`. The same predicate filters `tools/list`
 * (`canSee`) and guards `tools/call`, and every decision lands on `ctx.decisions`.
 *
 * ```ts
 * const authz = createAuthz({
 *   require: { scopes: ['orders:read'] },
 *   tools: { refund: { require: { scopes: ['orders:write'] }, mode: 'refuse' } },
 * });
 * registerTools(server, tools, { middleware: [otel, audit, redactErrors, authz, rateLimit] });
 * ```
 */
export function createAuthz(options: AuthzOptions): AuthzMiddleware {
  if (typeof options !== 'object' || options === null || options.require === undefined) {
    throw new TypeError(
      'createAuthz: give require, the default for tools that declare nothing ({} lets every caller through)',
    );
  }
  const resolver = resolveToolOptions<AuthzRules>(
    'createAuthz',
    { require: options.require, mode: 'hidden', local: 'allow' },
    options,
    checkRules,
  );
  const compile = (rules: Readonly<AuthzRules>, where: string): CompiledRules =>
    Object.freeze({
      requirement: checkRequirement(rules.require, where),
      mode: rules.mode,
      local: rules.local,
    });
  const toleranceSec = options.clockToleranceSec ?? DEFAULT_CLOCK_TOLERANCE_SEC;
  if (
    typeof toleranceSec !== 'number' ||
    !Number.isFinite(toleranceSec) ||
    toleranceSec < 0 ||
    toleranceSec > MAX_CLOCK_TOLERANCE_SEC
  ) {
    throw new RangeError(
      `createAuthz: clockToleranceSec must be between 0 and ${MAX_CLOCK_TOLERANCE_SEC} seconds`,
    );
  }
  const global = compile(resolver.global, 'createAuthz');
  const perTool = new Map<string, CompiledRules | undefined>();
  for (const name of Object.keys(options.tools ?? {})) {
    const rules = resolver.forTool(name);
    perTool.set(name, rules === undefined ? undefined : compile(rules, `createAuthz: tools.${name}`));
  }
  const rulesOf = (name: string): CompiledRules | undefined =>
    perTool.has(name) ? perTool.get(name) : global;
  // Tools core asked about, by name: a call to a hidden tool reaches the chain as an unknown tool, and
  // this is how the middleware still records that authz hid it.
  const known = new Map<string, ToolDefinition>();

  // `expiry` false: what the token's rights alone allow (what `tools/list` shows: an expired token sees
  // the tools a fresh one would, and a call to one is answered as expired, not as an unknown tool).
  const decide = (
    rules: CompiledRules,
    tool: ToolDefinition,
    caller: CallerIdentity,
    request: ToolRequest,
    expiry = true,
  ): Verdict => {
    if (rules.local === 'allow' && isLocalCaller(caller, request)) return LOCAL_ALLOWED;
    return evaluate(rules.requirement, tool, caller, request, expiry ? toleranceSec : null);
  };

  const allows = (tool: ToolDefinition, caller: CallerIdentity, request: ToolRequest): boolean => {
    const rules = rulesOf(tool.name);
    return rules === undefined || decide(rules, tool, caller, request).allow;
  };

  // Not async: the allowed path hands next()'s promise straight back (one promise less per call).
  const middleware = (ctx: ToolContext, next: NextFn): Promise<ToolResult> => {
    const tool = ctx.tool;
    if (tool === undefined) {
      // Unknown to core: really unknown, disabled, or hidden by canSee (then record why, server-side only).
      const hidden = known.get(ctx.toolName);
      const rules = hidden === undefined ? undefined : rulesOf(hidden.name);
      if (hidden !== undefined && rules !== undefined && rules.mode === 'hidden') {
        const verdict = decide(rules, hidden, ctx.caller, ctx.request, false);
        if (!verdict.allow) ctx.decisions.push({ by: 'authz', action: 'hide', reason: verdict.reason });
      }
      return next();
    }
    const rules = rulesOf(tool.name);
    if (rules === undefined) return next();
    const verdict = decide(rules, tool, ctx.caller, ctx.request);
    if (verdict.allow) {
      ctx.decisions.push(allowDecision(verdict.reason));
      return next();
    }
    ctx.decisions.push({
      by: 'authz',
      action: 'deny',
      reason: verdict.reason,
      ...(verdict.missingScopes.length > 0 ? { detail: { missingScopes: [...verdict.missingScopes] } } : {}),
    });
    // An expired token is told so in either mode: canSee showed it the tools its rights allow.
    if (verdict === EXPIRED) return Promise.resolve(expiredRefusal(tool.name));
    // In hidden mode canSee already answered this call as unknown; reaching here means authz runs
    // outside the global chain (no canSee) or a check changed its mind: refuse without naming anything.
    return Promise.resolve(refusal(tool.name, rules.mode === 'refuse' ? verdict.missingScopes : []));
  };

  return Object.assign(middleware, {
    canSee(tool: ToolDefinition, caller: CallerIdentity, request: ToolRequest): boolean {
      if (known.get(tool.name) !== tool) known.set(tool.name, tool);
      const rules = rulesOf(tool.name);
      return (
        rules === undefined || rules.mode === 'refuse' || decide(rules, tool, caller, request, false).allow
      );
    },
    allows,
  });
}

/**
 * The caller `local: 'allow'` lets use every tool: core named it `local`, core saw a local transport
 * (`request.local`, decided from the connection's transport class, which no identity rule can set) and
 * no token came with the call. A custom `identify` that names callers `local` by a guess (no HTTP
 * headers, the rule before the transport decided it) cannot give a remote transport's callers every tool.
 */
function isLocalCaller(caller: CallerIdentity, request: ToolRequest): boolean {
  return caller.kind === 'local' && request.local === true && request.authInfo == null;
}

function checkRules(rules: Readonly<AuthzRules>, where: string): void {
  if (rules.mode !== 'hidden' && rules.mode !== 'refuse')
    throw new TypeError(`${where}: mode must be 'hidden' or 'refuse'`);
  if (rules.local !== 'allow' && rules.local !== 'deny')
    throw new TypeError(`${where}: local must be 'allow' or 'deny'`);
}

function refusal(toolName: string, missingScopes: readonly string[]): ToolResult {
  if (missingScopes.length === 0) {
    return fail('permission_denied', `You may not call ${toolName}.`);
  }
  const result = fail(
    'permission_denied',
    `Calling ${toolName} needs the scope(s) ${missingScopes.join(' ')}, which this authorization does not grant.`,
    {
      hint: 'Do not retry as is. Tell the user which scope(s) the call needs; it can succeed after they authorize again with them.',
      retryable: false,
    },
  );
  result._meta = { ...result._meta, [AUTHZ_META_KEY]: { missingScopes: [...missingScopes] } };
  return result;
}

function expiredRefusal(toolName: string): ToolResult {
  return fail('permission_denied', `The access token has expired; calling ${toolName} needs a fresh one.`, {
    hint: 'Do not retry with this token. The client must obtain a fresh one (refresh it, or have the user sign in again); the call can succeed then.',
    retryable: false,
  });
}

// An allowed call's decision is one of a few fixed texts: one frozen record per text, shared by every
// call, instead of an object per call (decisions are read, never changed).
const allowDecisions = new Map<string, PolicyDecision>();

function allowDecision(reason: string): PolicyDecision {
  let decision = allowDecisions.get(reason);
  if (decision === undefined) {
    decision = Object.freeze({ by: 'authz', action: 'allow', reason });
    if (allowDecisions.size < 64) allowDecisions.set(reason, decision);
  }
  return decision;
}

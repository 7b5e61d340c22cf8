import { canonicalJson } from './canonical-json.js';
import type { ToolContext } from './types.js';

type ScopeParts = Pick<ToolContext, 'caller' | 'bindings'>;
type CallParts = Pick<ToolContext, 'caller' | 'bindings' | 'toolName' | 'args'>;

// Several policies key on the same call (rate-limit, repeat-guard, idempotency, confirm), each through
// these functions: the canonical JSON is computed once per context and reused while the parts it was
// computed from are the same objects. A middleware that replaces `ctx.args` (or passes a copy with
// other args) gets a fresh key; one that mutates the args object in place must not (args are validated
// values the chain treats as read-only).
const scopes = new WeakMap<object, { caller: unknown; bindings: unknown; key: string }>();
const calls = new WeakMap<
  object,
  { caller: unknown; bindings: unknown; toolName: string; args: unknown; key: string }
>();

/**
 * Who a call acts for, as a key: the caller's identity plus the values the tool bound from the caller.
 * Every per-caller key (rate limits, quotas) starts from this. JSON-encoded, so no identity can be
 * crafted to collide with another (an id containing a separator).
 */
export function callerScope(ctx: ScopeParts): string {
  const cached = scopes.get(ctx);
  if (cached !== undefined && cached.caller === ctx.caller && cached.bindings === ctx.bindings) {
    return cached.key;
  }
  const key = canonicalJson([ctx.caller.id, ctx.bindings]);
  scopes.set(ctx, { caller: ctx.caller, bindings: ctx.bindings, key });
  return key;
}

/**
 * The key of one call: caller identity, bindings, tool and the canonical JSON of the validated
 * arguments. Repeat caches, idempotency and confirmation key on it, so two callers (or two customers
 * behind one client) never share an entry.
 */
export function callKey(ctx: CallParts): string {
  const cached = calls.get(ctx);
  if (
    cached !== undefined &&
    cached.args === ctx.args &&
    cached.caller === ctx.caller &&
    cached.bindings === ctx.bindings &&
    cached.toolName === ctx.toolName
  ) {
    return cached.key;
  }
  const key = canonicalJson([ctx.caller.id, ctx.bindings, ctx.toolName, ctx.args]);
  calls.set(ctx, { caller: ctx.caller, bindings: ctx.bindings, toolName: ctx.toolName, args: ctx.args, key });
  return key;
}

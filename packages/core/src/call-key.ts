import { canonicalJson } from './canonical-json.js';
import type { ToolContext } from './types.js';

/**
 * Who a call acts for, as a key: the caller's identity plus the values the tool bound from the caller.
 * Every per-caller key (rate limits, quotas) starts from this. JSON-encoded, so no identity can be
 * crafted to collide with another (an id containing a separator).
 */
export function callerScope(ctx: Pick<ToolContext, 'caller' | 'bindings'>): string {
  return canonicalJson([ctx.caller.id, ctx.bindings]);
}

/**
 * The key of one call: caller identity, bindings, tool and the canonical JSON of the validated
 * arguments. Repeat caches, idempotency and confirmation key on it, so two callers (or two customers
 * behind one client) never share an entry.
 */
export function callKey(ctx: Pick<ToolContext, 'caller' | 'bindings' | 'toolName' | 'args'>): string {
  return canonicalJson([ctx.caller.id, ctx.bindings, ctx.toolName, ctx.args]);
}

import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import type { ToolContext } from './types.js';

type ScopeParts = Pick<ToolContext, 'caller' | 'bindings'>;
type CallParts = Pick<ToolContext, 'caller' | 'bindings' | 'toolName' | 'args'>;

interface ScopeEntry {
  readonly caller: unknown;
  readonly bindings: unknown;
  readonly key: string;
}

interface CallEntry extends ScopeEntry {
  readonly toolName: string;
  readonly args: unknown;
}

// Several policies key on the same call (rate-limit, repeat-guard, idempotency, confirm), each through
// these functions: the key is computed once per context and reused while the parts it was computed
// from are the same objects. A middleware that replaces `ctx.args` (or passes a copy with other args)
// gets a fresh key; one that mutates the args object in place must not (args are validated values the
// chain treats as read-only).
//
// Core's own call contexts hold the cached keys in two slots of their own (a WeakMap entry per call
// measured over half a microsecond, and more in the garbage collector); any other object, such as a
// test context, uses the WeakMaps.
export const SCOPE_KEY_SLOT = Symbol('toolgate.callerScope');
export const CALL_KEY_SLOT = Symbol('toolgate.callKey');

interface KeySlots {
  [SCOPE_KEY_SLOT]?: ScopeEntry | undefined;
  [CALL_KEY_SLOT]?: CallEntry | undefined;
}

const scopes = new WeakMap<object, ScopeEntry>();

/** The bindings of a call whose tool binds nothing: one frozen object, so a key can tell at a glance. */
export const NO_BINDINGS: Readonly<Record<string, unknown>> = Object.freeze({});

// The scope of the last caller seen without bindings. One server mostly serves one caller at a time
// (stdio's `local`, one client's token), and its scope is then one comparison of the id, not a walk of
// the parts and a new string per call. Keyed by the id's text, never by the identity object: a key
// depends on the id alone, so a custom identity that changes cannot be served another caller's scope.
let lastUnboundId: string | undefined;
let lastUnboundScope = '';

function unboundScope(id: string): string {
  if (id !== lastUnboundId) {
    // Exactly canonicalJson([id, {}]): a string and an empty object are written as JSON.stringify does.
    lastUnboundScope = JSON.stringify([id, NO_BINDINGS]);
    lastUnboundId = id;
  }
  return lastUnboundScope;
}
const calls = new WeakMap<object, CallEntry>();

/**
 * Who a call acts for, as a key: the caller's identity plus the values the tool bound from the caller.
 * Every per-caller key (rate limits, quotas) starts from this. JSON-encoded, so no identity can be
 * crafted to collide with another (an id containing a separator).
 */
export function callerScope(ctx: ScopeParts): string {
  const slots = ctx as ScopeParts & KeySlots;
  const hasSlot = SCOPE_KEY_SLOT in slots;
  const cached = hasSlot ? slots[SCOPE_KEY_SLOT] : scopes.get(ctx);
  if (cached !== undefined && cached.caller === ctx.caller && cached.bindings === ctx.bindings) {
    return cached.key;
  }
  // One JSON.stringify for plain parts (canonicalJson's fast path): a flat string, which a Map hashes
  // without first copying pieces of a concatenation together.
  const id = ctx.caller.id;
  const key =
    ctx.bindings === NO_BINDINGS && typeof id === 'string'
      ? unboundScope(id)
      : canonicalJson([id, ctx.bindings]);
  const entry: ScopeEntry = { caller: ctx.caller, bindings: ctx.bindings, key };
  if (hasSlot) slots[SCOPE_KEY_SLOT] = entry;
  else scopes.set(ctx, entry);
  return key;
}

/**
 * The key of one call: caller identity, bindings, tool and the canonical JSON of the validated
 * arguments. Repeat caches, idempotency and confirmation key on it, so two callers (or two customers
 * behind one client) never share an entry.
 */
export function callKey(ctx: CallParts): string {
  const slots = ctx as CallParts & KeySlots;
  const hasSlot = CALL_KEY_SLOT in slots;
  const cached = hasSlot ? slots[CALL_KEY_SLOT] : calls.get(ctx);
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
  const entry: CallEntry = {
    caller: ctx.caller,
    bindings: ctx.bindings,
    toolName: ctx.toolName,
    args: ctx.args,
    key,
  };
  if (hasSlot) slots[CALL_KEY_SLOT] = entry;
  else calls.set(ctx, entry);
  return key;
}

// A server sees few callers and many calls: tags are kept (bounded) rather than rehashed per call.
// Only for scopes up to MAX_CACHED_SCOPE_CHARS: a subject or bound value can be as long as a token
// allows (16 KiB), and 4096 such scopes held as keys would be some 130 MB. Longer ones are hashed on
// every call (a microsecond or two; such callers are rare).
const MAX_CACHED_TAGS = 4096;
const MAX_CACHED_SCOPE_CHARS = 512;
const tags = new Map<string, string>();

/**
 * A short digest of `callerScope(ctx)` (22 base64url characters of its SHA-256) for a store key's
 * hash tag: `prefix:{tag}:rest`. The one per-caller tag every package puts in its shared-state keys:
 * in Redis Cluster each caller's keys share a slot, and core's memory store counts them against one
 * caller's `maxEntriesPerScope`. A digest, never the scope itself: a scope is JSON, and a `}` in it
 * would end the tag early, letting arguments or claims choose it.
 */
export function callerTag(ctx: ScopeParts): string {
  const scope = callerScope(ctx);
  let tag = tags.get(scope);
  if (tag === undefined) {
    tag = createHash('sha256').update(scope).digest('base64url').slice(0, 22);
    if (scope.length > MAX_CACHED_SCOPE_CHARS) return tag;
    if (tags.size >= MAX_CACHED_TAGS) tags.clear();
    tags.set(scope, tag);
  }
  return tag;
}

import { hash } from 'node:crypto';
import { callerScope, canonicalJson, callKey as coreCallKey, type ToolContext } from '@toolgate/core';

/**
 * The store key of one call: a SHA-256 of core's `callKey` (caller identity, the tool's bindings such
 * as the bound customer id, tool and canonical arguments) and the optional extra scope, so a key's
 * size is fixed whatever the model sends. The extra scope only narrows: two callers never share a key
 * whatever it returns.
 */
export function repeatCallKey(ctx: ToolContext, scope: string | undefined): string {
  return `c:${sha256(canonicalJson([coreCallKey(ctx), scope ?? null]))}`;
}

/**
 * The key of one call in the memory store: core's `callKey` itself (bounded by the store's `maxSize`,
 * which counts keys), so no hash and no second JSON per call. `callKey` is one complete JSON array, so
 * appending the scope's JSON string keeps every (key, scope) pair distinct; a shared store hashes
 * instead (`repeatCallKey`), so its keys have a fixed size.
 */
export function memoryCallKey(ctx: ToolContext, scope: string | undefined): string {
  const key = coreCallKey(ctx);
  return scope === undefined ? key : key + JSON.stringify(scope);
}

/** The store key of one tool's no-progress streak for one caller (identity + bindings) and extra scope. */
export function progressKey(ctx: ToolContext, scope: string | undefined): string {
  return `p:${sha256(canonicalJson([callerScope(ctx), ctx.toolName, scope ?? null]))}`;
}

// One-shot hashing (Node 20.12+): no Hash object per call on the hot path.
export function sha256(text: string): string {
  return hash('sha256', text, 'base64url');
}

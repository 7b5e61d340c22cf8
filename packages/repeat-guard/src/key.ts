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
 * The memory store's keys: each caller scope (identity + bindings, and the extra scope) and tool get
 * a short prefix of their own, and a call's key is that prefix and its arguments' canonical JSON. The
 * same call as core's `callKey`, without writing the caller's id and bindings into every key: 10,000
 * remembered calls keep a few bytes each instead of the whole identity, and each call serialises its
 * arguments alone. Prefixes are never reused (a counter), so two callers or tools never share a key;
 * the least recently used are forgotten by generations like the entries (a forgotten prefix's entries
 * are simply never found again and age out).
 */
export class CallPrefixes {
  #young = new Map<string, Map<string, number>>();
  #old = new Map<string, Map<string, number>>();
  #youngCount = 0;
  #next = 0;
  readonly #perGeneration: number;

  /** `maxPrefixes`: caller scope and tool pairs held, about (the older half is dropped at once). */
  constructor(maxPrefixes: number) {
    this.#perGeneration = Math.max(1, Math.floor(maxPrefixes / 2));
  }

  /** The key of the call in `ctx` (with the guard's extra `scope`, if any). */
  keyOf(ctx: ToolContext, scope: string | undefined): string {
    // callerScope is one JSON array, so a scope's JSON string after it keeps every pair distinct.
    const caller = scope === undefined ? callerScope(ctx) : callerScope(ctx) + JSON.stringify(scope);
    // One JSON array: a flat string (a prefix joined to the JSON would be kept as a concatenation).
    return canonicalJson([this.#prefixOf(caller, ctx.toolName), ctx.args]);
  }

  #prefixOf(caller: string, tool: string): number {
    let tools = this.#young.get(caller);
    if (tools === undefined) {
      tools = this.#old.get(caller);
      if (tools !== undefined) {
        // Used again: it moves to the young generation with its prefixes (its entries stay reachable).
        this.#old.delete(caller);
        this.#admit(caller, tools, tools.size);
      } else {
        tools = new Map();
        this.#admit(caller, tools, 0);
      }
    }
    let prefix = tools.get(tool);
    if (prefix === undefined) {
      prefix = this.#next++;
      tools.set(tool, prefix);
      this.#youngCount += 1;
    }
    return prefix;
  }

  #admit(caller: string, tools: Map<string, number>, count: number): void {
    if (this.#youngCount >= this.#perGeneration) {
      this.#old = this.#young;
      this.#young = new Map();
      this.#youngCount = 0;
    }
    this.#young.set(caller, tools);
    this.#youngCount += count;
  }
}

/** The store key of one tool's no-progress streak for one caller (identity + bindings) and extra scope. */
export function progressKey(ctx: ToolContext, scope: string | undefined): string {
  return `p:${sha256(canonicalJson([callerScope(ctx), ctx.toolName, scope ?? null]))}`;
}

// One-shot hashing (Node 20.12+): no Hash object per call on the hot path.
export function sha256(text: string): string {
  return hash('sha256', text, 'base64url');
}

import { hash } from 'node:crypto';
import { callerScope, canonicalJson, callKey as coreCallKey, type ToolContext } from '@toolgate/core';
import { type Expiring, Generations } from './generations.js';

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
 * a number of their own, and a call's key is that number and its canonical arguments in one JSON array.
 * The same call as core's `callKey`, without writing the caller's id and bindings into every key:
 * 10,000 remembered calls keep a few bytes each instead of the whole identity, and each call
 * serialises its arguments alone. Numbers are never reused (a counter), so two callers or tools never
 * share a key. Callers are held like the entries (`Generations`, by count): a forgotten caller's
 * entries are simply never found again and age out. Each caller holds a number per tool it called,
 * at most the server's registered tools (unknown tools pass the guard by).
 */
export class CallerNumbers {
  // Callers never expire by time: a clock that stands still, so a lookup reads no time.
  readonly #callers: Generations<CallerEntry>;
  #next = 0;

  /**
   * `maxCallers`: caller scopes held, about (the older half is dropped at once); `maxSize`: their
   * summed characters. A scope is as long as what it is made of (claims, bindings, a `scope` built
   * from what the client sent), so counting them alone would let distinct long ones hold
   * `maxCallers` times that. A scope longer than `maxSize` is not held: each of its calls gets a
   * fresh number, so it never repeats (and never meets another caller).
   */
  constructor(maxCallers: number, maxSize: number) {
    this.#callers = new Generations<CallerEntry>(maxCallers, maxSize, () => 0);
  }

  /** Summed characters of the caller scopes held now. */
  get size(): number {
    return this.#callers.totalSize;
  }

  /** The key of the call in `ctx` (with the guard's extra `scope`, if any). */
  keyOf(ctx: ToolContext, scope: string | undefined): string {
    // callerScope is one JSON array, so a scope's JSON string after it keeps every pair distinct.
    const caller = scope === undefined ? callerScope(ctx) : callerScope(ctx) + JSON.stringify(scope);
    let entry = this.#callers.get(caller);
    if (entry === undefined) {
      entry = { expiresAt: Number.POSITIVE_INFINITY, size: caller.length, tools: new Map() };
      this.#callers.set(caller, entry);
    }
    let number = entry.tools.get(ctx.toolName);
    if (number === undefined) {
      number = this.#next++;
      entry.tools.set(ctx.toolName, number);
    }
    // One JSON array: a flat string (a number joined to the JSON would be kept as a concatenation).
    return canonicalJson([number, ctx.args]);
  }
}

interface CallerEntry extends Expiring {
  /** This caller's number for each tool it called. */
  readonly tools: Map<string, number>;
}

/** The store key of one tool's no-progress streak for one caller (identity + bindings) and extra scope. */
export function progressKey(ctx: ToolContext, scope: string | undefined): string {
  return `p:${sha256(canonicalJson([callerScope(ctx), ctx.toolName, scope ?? null]))}`;
}

// One-shot hashing (Node 20.12+): no Hash object per call on the hot path.
export function sha256(text: string): string {
  return hash('sha256', text, 'base64url');
}

import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import {
  createMemoryStore,
  defineTool,
  type KeyValueStore,
  type MemoryStoreOptions,
  ok,
  type PolicyDecision,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import * as z from 'zod';
import { confirmationArgument } from '../src/index.js';

export const SECRET = 'test-secret-of-at-least-32-bytes-0123456789';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A refund tool that declares the confirmation argument and counts its runs. */
export function refundTool(name = 'create_refund', declareConfirmation = true) {
  const runs = { count: 0, args: [] as unknown[] };
  const tool = defineTool({
    name,
    title: 'Refund an order',
    description: 'Refund an amount on an order.',
    input: declareConfirmation
      ? {
          order_id: z.string(),
          amount: z.number().positive(),
          note: z.string().optional(),
          confirmation: confirmationArgument,
        }
      : { order_id: z.string(), amount: z.number().positive(), note: z.string().optional() },
    handler: async (args) => {
      runs.count += 1;
      runs.args.push(args);
      return ok({ refund_id: `R-${runs.count}` });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

/** The outermost middleware of a test chain: keeps each call's decisions. */
export function decisionsOf(calls: PolicyDecision[][]): ToolMiddleware {
  return async (ctx, next) => {
    try {
      return await next();
    } finally {
      calls.push([...ctx.decisions]);
    }
  };
}

export function authAs(subject: string): AuthInfo {
  return {
    token: `token-${subject}`,
    clientId: 'desk',
    scopes: [],
    extra: { iss: 'https://idp.test', sub: subject },
  };
}

// After `confirm:`, the server's audience: every test that passes a store names it 'orders'.
const KINDS: readonly (readonly [RegExp, string])[] = [
  [/^confirm:orders:url-slot:\{[\w-]{22}\}:\d+$/, 'slot'],
  [/^confirm:orders:url-open:\{[\w-]{22}\}:[\w-]{22}$/, 'mark'],
  [/^confirm:orders:url:\{[\w-]{22}\}$/, 'pending'],
  [/^confirm:orders:url:\{[\w-]{22}\}:answer$/, 'answer'],
];

/** A URL-mode key by what it is (`slot`, `mark`, `pending`, `answer`); any other key as it is. */
export const kindOf = (key: string): string => KINDS.find(([shape]) => shape.test(key))?.[1] ?? key;

/** Core's memory store, noting every key written, so a test can list what it still holds. */
export function watchedStore(options: MemoryStoreOptions = {}) {
  const memory = createMemoryStore(options);
  const written: string[] = [];
  const store: KeyValueStore = {
    ...memory,
    setIfAbsent: (key, value, ttlMs, op) => {
      written.push(key);
      return memory.setIfAbsent(key, value, ttlMs, op);
    },
    set: (key, value, ttlMs, op) => {
      written.push(key);
      return memory.set(key, value, ttlMs, op);
    },
  };
  /** The kinds of the keys written that the store still holds, sorted. */
  const held = async (): Promise<string[]> => {
    const keys = [...new Set(written)];
    const values = await Promise.all(keys.map((key) => memory.get(key)));
    return keys
      .filter((_, i) => values[i] !== undefined)
      .map(kindOf)
      .sort();
  };
  return { store, written, held };
}

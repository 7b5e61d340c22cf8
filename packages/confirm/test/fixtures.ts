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
import { expectFailure, type serveTools, type TestClient } from '@toolgate/core/testing';
import * as z from 'zod';
import { CONFIRM_META, type ConfirmToolOptions, confirmationArgument, createConfirm } from '../src/index.js';

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

/** What a two-step answer's message says before the prompt. */
export const TWO_STEP = 'Confirmation required. Show the user: ';

/**
 * Every way the prompt for `args` reaches a person (as alice): by form elicitation, in two steps (the
 * answer's message and its _meta prompt), by URL (the elicitation's message and the page). `serve` is
 * the test file's own (it closes what it opens).
 */
export async function promptsShown(
  serve: (...args: Parameters<typeof serveTools>) => Promise<TestClient>,
  tool: ToolDefinition,
  args: Record<string, unknown>,
  options: Partial<ConfirmToolOptions> = {},
): Promise<{ form: string; twoStep: string; meta: string; urlMessage: string; page: string }> {
  const tools = { [tool.name]: options };
  const asked: string[] = [];
  const form = await serve([tool], {
    middleware: [createConfirm({ secret: SECRET, tools })],
    authInfo: authAs('alice'),
    onElicit: (params) => {
      asked.push((params as { message: string }).message);
      return { action: 'decline' };
    },
  });
  await form.callTool(tool.name, args);
  const twoStep = await serve([tool], {
    middleware: [createConfirm({ secret: SECRET, tools })],
    authInfo: authAs('alice'),
  });
  const first = await twoStep.callTool(tool.name, args);
  const required = expectFailure(first);
  if (!required.message.startsWith(TWO_STEP)) throw new Error(`not a two-step prompt: ${required.message}`);
  const meta = first._meta?.[CONFIRM_META] as { prompt: string };
  const onPage: (string | undefined)[] = [];
  const confirm = createConfirm({
    secret: SECRET,
    tools,
    url: { build: ({ id }) => `https://page.test/confirm/${id}`, pollMs: 10 },
  });
  const page = await serve([tool], {
    middleware: [confirm],
    authInfo: authAs('alice'),
    elicitUrl: true,
    onElicit: async (params) => {
      asked.push((params as { message: string }).message);
      const id = (params as { elicitationId: string }).elicitationId;
      onPage.push((await confirm.pending(id, 'alice'))?.prompt);
      return { action: 'decline' };
    },
  });
  await page.callTool(tool.name, args);
  return {
    form: asked[0]!,
    twoStep: required.message.slice(TWO_STEP.length),
    meta: meta.prompt,
    urlMessage: asked[1]!,
    page: onPage[0]!,
  };
}

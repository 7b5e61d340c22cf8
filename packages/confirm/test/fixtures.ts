import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import {
  defineTool,
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

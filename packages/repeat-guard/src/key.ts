import { hash } from 'node:crypto';
import { canonicalJson, principalOf, type ToolContext } from '@toolgate/core';

/**
 * The default scope: the transport session, else the authenticated principal, else "anonymous".
 * Prefixed by kind so a session id can never equal a principal's name.
 */
export function defaultScope(ctx: ToolContext): string {
  const session = ctx.request.sessionId;
  if (session !== undefined && session !== '') return `session:${session}`;
  const principal = principalOf(ctx);
  return principal === undefined ? 'anonymous' : `principal:${principal}`;
}

/**
 * The store key of one call: a SHA-256 of the scope, tool and canonical arguments, so a key's size
 * is fixed whatever the model sends. One canonical JSON array keeps the three parts unambiguous.
 */
export function callKey(scope: string, toolName: string, args: unknown): string {
  return `c:${sha256(canonicalJson([scope, toolName, args]))}`;
}

/** The store key of one tool's no-progress streak in one scope. */
export function progressKey(scope: string, toolName: string): string {
  return `p:${sha256(canonicalJson([scope, toolName]))}`;
}

// One-shot hashing (Node 20.12+): no Hash object per call on the hot path.
export function sha256(text: string): string {
  return hash('sha256', text, 'base64url');
}

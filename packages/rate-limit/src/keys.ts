import { createHash } from 'node:crypto';
import { callerScope, type ToolContext } from '@toolgate/core';
import { isCallerLimit, type Limit } from './limits.js';

// Hashing the same caller on every call costs more than the limiter itself; a small bounded cache of
// recent callers keeps it off the hot path.
const MAX_CACHED_CALLERS = 4096;

/**
 * Builds the store keys of a call. Caller limits: `<prefix>:{<callerhash>}:<limit>[:<tool>]`, the
 * braces a Redis Cluster hash tag so every key of one caller lives in one slot; tool and global limits
 * involve no caller: `<prefix>:<limit>[:<tool>]`.
 */
export function createKeyBuilder(prefix: string): (limit: Limit, ctx: ToolContext) => string {
  const hashes = new Map<string, string>();
  const callerHash = (ctx: ToolContext): string => {
    const scope = callerScope(ctx);
    let hash = hashes.get(scope);
    if (hash === undefined) {
      hash = createHash('sha256').update(scope).digest('base64url').slice(0, 22);
      if (hashes.size >= MAX_CACHED_CALLERS) hashes.clear();
      hashes.set(scope, hash);
    }
    return hash;
  };
  return (limit, ctx) => {
    const base = isCallerLimit(limit)
      ? `${prefix}:{${callerHash(ctx)}}:${limit.name}`
      : `${prefix}:${limit.name}`;
    return limit.per === 'caller-tool' || limit.per === 'tool' ? `${base}:${ctx.toolName}` : base;
  };
}

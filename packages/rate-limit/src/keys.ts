import { callerTag, type ToolContext } from '@toolgate/core';
import { isCallerLimit, type Limit } from './limits.js';

/**
 * Builds the store keys of a call. Caller limits: `<prefix>:{<callerhash>}:<limit>[:<tool>]`, the
 * braces a Redis Cluster hash tag so every key of one caller lives in one slot; tool and global limits
 * involve no caller: `<prefix>:<limit>[:<tool>]`.
 */
export function createKeyBuilder(prefix: string): (limit: Limit, ctx: ToolContext) => string {
  return (limit, ctx) => {
    const base = isCallerLimit(limit)
      ? `${prefix}:{${callerTag(ctx)}}:${limit.name}`
      : `${prefix}:${limit.name}`;
    return limit.per === 'caller-tool' || limit.per === 'tool' ? `${base}:${ctx.toolName}` : base;
  };
}

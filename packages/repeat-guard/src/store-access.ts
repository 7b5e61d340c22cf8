import type { ToolContext } from '@toolgate/core';
import type { RepeatStore } from './types.js';

// The guard fails open: a store that is down or slow to answer must not take the tools down with it,
// so every store error is logged and the call runs as if nothing were remembered.

export async function readStore(
  store: RepeatStore,
  key: string,
  ctx: ToolContext,
): Promise<string | undefined> {
  try {
    return (await store.get(key)) ?? undefined;
  } catch (error) {
    ctx.logger.warn(
      { tool: ctx.toolName, requestId: ctx.request.id, err: error },
      'repeat-guard: store read failed; the call runs unguarded',
    );
    return undefined;
  }
}

export async function writeStore(
  store: RepeatStore,
  key: string,
  value: string | undefined,
  ttlMs: number,
  ctx: ToolContext,
): Promise<void> {
  try {
    if (value === undefined) await store.delete(key);
    else await store.set(key, value, Math.max(1, Math.ceil(ttlMs)));
  } catch (error) {
    ctx.logger.warn(
      { tool: ctx.toolName, requestId: ctx.request.id, err: error },
      'repeat-guard: store write failed; this call is not remembered',
    );
  }
}

import { createHash } from 'node:crypto';
import {
  callerScope,
  callerTag,
  callKey,
  canonicalJson,
  fail,
  type ToolContext,
  type ToolResult,
} from '@toolgate/core';

/** `_meta` keys a client may send an explicit idempotency key under (the first found wins). */
export const IDEMPOTENCY_KEY_META = ['toolgate/idempotency-key', 'idempotencyKey'] as const;

const MAX_KEY_LENGTH = 200;

/** The keys of one call. */
export interface CallKeys {
  /** The store key: `idem:{<caller digest>}:<key digest>` (the braces are the Redis Cluster hash tag). */
  readonly storeKey: string;
  /** The key digest shown in `_meta` and decisions (never the raw key or arguments). */
  readonly digest: string;
  /** Digest of caller, bindings, tool and arguments: a key reused with other arguments is refused. */
  readonly args: string;
  /** Whether the client sent the key. */
  readonly explicit: boolean;
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('base64url');

/**
 * Every key comes from core's `callerScope`/`callKey`: an explicit key is scoped by the caller (one
 * caller can never replay another's result) and bound to the arguments' digest.
 */
export function keysOf(
  ctx: ToolContext,
  ignoreArguments: readonly string[],
): { keys: CallKeys } | { refused: ToolResult } {
  const meta = ctx.request.meta;
  let explicit: unknown;
  for (const name of IDEMPOTENCY_KEY_META) {
    if (meta?.[name] !== undefined) {
      explicit = meta[name];
      break;
    }
  }
  if (
    explicit !== undefined &&
    !(typeof explicit === 'string' && explicit.length >= 1 && explicit.length <= MAX_KEY_LENGTH)
  ) {
    const refused = fail(
      'invalid_argument',
      `The idempotency key must be a string of 1 to ${MAX_KEY_LENGTH} characters.`,
      {
        hint: 'Send a short unique string (a UUID) as the idempotency key, or none.',
      },
    );
    return { refused };
  }
  const args = ignoreArguments.length === 0 ? ctx.args : withoutArguments(ctx.args, ignoreArguments);
  const argsDigest = sha256(callKey({ ...ctx, args }));
  const scope = callerTag(ctx);
  const digest =
    explicit === undefined
      ? argsDigest
      : sha256(canonicalJson(['key', callerScope(ctx), ctx.toolName, explicit]));
  return {
    keys: {
      storeKey: `idem:{${scope}}:${digest}`,
      digest,
      args: argsDigest,
      explicit: explicit !== undefined,
    },
  };
}

function withoutArguments(args: Record<string, unknown>, names: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(args)) if (!names.includes(name)) out[name] = value;
  return out;
}

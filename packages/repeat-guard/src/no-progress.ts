import { canonicalJson, type ToolContext, type ToolResult } from '@toolgate/core';
import { noProgressFailure, noProgressNote, withNote } from './answers.js';
import { progressKey, sha256 } from './key.js';
import type { StoreAccess } from './store-access.js';
import type { RepeatRules } from './types.js';

interface StoredStreak {
  v: 1;
  /** The call key of the latest call (its arguments, hashed). */
  a: string;
  /** A hash of the latest result as the model saw it. */
  r: string;
  /** How many calls in a row returned that result, each with arguments different from the one before. */
  s: number;
}

/**
 * Tracks, per caller (identity and bindings) and tool, how many calls in a row returned an identical result with different
 * arguments, and flags the result that reaches `rules.noProgress`. The same arguments again (a
 * repeat under the threshold) neither extends nor breaks the streak.
 */
export async function checkProgress(
  ctx: ToolContext,
  rules: Readonly<RepeatRules>,
  store: StoreAccess,
  scope: string | undefined,
  callKey: string,
  result: ToolResult,
): Promise<ToolResult> {
  const limit = rules.noProgress;
  if (limit === false) return result;
  const key = progressKey(ctx, scope);
  let stored: string | undefined;
  try {
    stored = await store.read(key, ctx);
  } catch {
    return result; // the call already ran: a store that is down or a cancel only skips the check
  }
  const previous = decodeStreak(stored);
  let resultHash: string;
  try {
    resultHash = sha256(
      canonicalJson([result.isError === true, result.content, result.structuredContent ?? null]),
    );
  } catch {
    // A result canonical JSON cannot write (a Map in its data, nesting past the stack): the call has
    // run and its result stands; only the check is skipped.
    return result;
  }
  // A shared store's call key is a hash already; a memory store's holds the arguments themselves,
  // hashed here so a streak is a few dozen characters whatever the model sent (see `MAX_STREAK_CHARS`).
  const callId = callKey.startsWith('c:') ? callKey : sha256(callKey);
  let streak = 1;
  if (previous && previous.r === resultHash) streak = previous.a === callId ? previous.s : previous.s + 1;
  const next: StoredStreak = { v: 1, a: callId, r: resultHash, s: streak };
  await store.write(key, JSON.stringify(next), rules.windowMs, ctx);
  if (streak < limit) return result;
  const answer = rules.onNoProgress === 'fail' ? 'repeated_call' : 'note';
  ctx.decisions.push({
    by: 'repeat-guard',
    action: 'no-progress',
    reason: 'identical result with different arguments',
    detail: { streak, answer },
  });
  ctx.logger.info(
    { tool: ctx.toolName, requestId: ctx.request.id, streak, answer },
    'repeat-guard: no progress across calls with different arguments',
  );
  return answer === 'note'
    ? withNote(result, noProgressNote(ctx.toolName, streak))
    : noProgressFailure(ctx.toolName, streak);
}

/**
 * The longest streak value the guard writes is about 120 characters (two hashes, a count); a longer
 * one under the key is not ours (a huge value put there) and is not parsed.
 */
const MAX_STREAK_CHARS = 512;

function decodeStreak(text: string | undefined): StoredStreak | undefined {
  if (typeof text !== 'string' || text.length > MAX_STREAK_CHARS) return undefined;
  try {
    const stored = JSON.parse(text) as Partial<StoredStreak> | null;
    if (
      stored?.v === 1 &&
      typeof stored.a === 'string' &&
      typeof stored.r === 'string' &&
      Number.isInteger(stored.s)
    ) {
      return stored as StoredStreak;
    }
  } catch {
    // A foreign or truncated value reads as no streak.
  }
  return undefined;
}

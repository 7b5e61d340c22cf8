import type { ToolResult } from './result.js';
import type { ToolContext } from './types.js';

/**
 * What a handler came to after its call had been answered without it: the model-facing result it
 * returned (or the ToolError it threw, as the model would have seen it), or what it threw otherwise
 * (never shown to anyone but the log).
 */
export type LateOutcome =
  | { readonly result: ToolResult; readonly error?: undefined }
  | { readonly result?: undefined; readonly error: unknown };

export type LateOutcomeListener = (outcome: LateOutcome) => void;

/** Core's per-call record of who waits for a late outcome (absent on calls nobody asked about). */
export interface LateSlot {
  /** Set once the chain's answer left the chain: from then on, the handler's outcome is late. */
  answered: boolean;
  readonly listeners: LateOutcomeListener[];
}

export const LATE_OUTCOME_SLOT = Symbol('toolgate.lateOutcome');

type WithSlot = { [LATE_OUTCOME_SLOT]?: LateSlot | undefined };

/**
 * Asks to be told what the call's handler came to if it settles after the call was answered without
 * it: core abandoned it (cancelled, then still running `abandonAfterMs` later) or a middleware answered
 * for it (a breaker's deadline), while the handler went on and may have done its side effect.
 * Idempotency uses it to keep what an abandoned call did, so a retry is answered instead of running
 * the call a second time.
 *
 * Call it while the call runs (typically when the chain's answer says `timeout`). The listener runs at
 * most once, in a promise reaction outside the call; it is never called when the handler settled in
 * time (its outcome then is the answer) or never settles. A listener that throws is logged (the call's
 * logger, `warn`), never fatal. The outcome is delivered only for calls core dispatched: a test context
 * that never runs a handler never calls it.
 */
export function onLateOutcome(ctx: ToolContext, listener: LateOutcomeListener): void {
  if (typeof listener !== 'function') throw new TypeError('onLateOutcome: listener must be a function');
  const holder = ctx as ToolContext & WithSlot;
  const slot = holder[LATE_OUTCOME_SLOT];
  if (slot === undefined) holder[LATE_OUTCOME_SLOT] = { answered: false, listeners: [listener] };
  else slot.listeners.push(listener);
}

/** The slot of a call, when anyone asked for its late outcome. */
export function lateSlotOf(ctx: ToolContext): LateSlot | undefined {
  return (ctx as ToolContext & WithSlot)[LATE_OUTCOME_SLOT];
}

/** Hands `outcome` to every listener of `slot`, each once; one that throws is logged and skipped. */
export function notifyLate(slot: LateSlot, ctx: ToolContext, outcome: LateOutcome): void {
  const listeners = slot.listeners.splice(0);
  for (const listener of listeners) {
    try {
      listener(outcome);
    } catch (error) {
      try {
        ctx.logger.warn(
          { tool: ctx.toolName, requestId: ctx.request.id, err: error },
          'a late-outcome listener threw',
        );
      } catch {
        // the logger itself is broken
      }
    }
  }
}

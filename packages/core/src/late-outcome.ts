import { outcomeOf, type ToolResult } from './result.js';
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

/**
 * What the call's innermost step (its handler) settled with, model-facing, once it settled: the result,
 * or a `StepThrow` for what it threw otherwise. Kept on every call (one field write) so that a handler
 * settling while the chain was still finishing an answer given without it is handed over too.
 */
export const STEP_SETTLED = Symbol('toolgate.stepSettled');

/** A step that settled by throwing (not a ToolError): what it threw. */
export class StepThrow {
  constructor(readonly error: unknown) {}
}

type WithSlot = { [LATE_OUTCOME_SLOT]?: LateSlot | undefined };

/**
 * Asks to be told what the call's handler came to if it settles after the call was answered without
 * it: core abandoned it (cancelled, then still running `abandonAfterMs` later) or a middleware answered
 * for it (a breaker's deadline), while the handler went on and may have done its side effect.
 * Idempotency uses it to keep what an abandoned call did, so a retry is answered instead of running
 * the call a second time.
 *
 * Call it while the call runs (typically when the chain's answer says `timeout`). The listener runs at
 * most once, in a promise reaction outside the call: when the handler settles after the chain's answer,
 * or settled after a middleware's `timeout` answer while the chain outside was still finishing (the
 * chain's answer says `timeout`, the handler's outcome does not). It is never called when the handler
 * settled in time (its outcome then is the answer, a `timeout` of its own included) or never settles. A listener that throws is logged (the call's
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

/**
 * At the end of the chain: when its answer says `timeout` but the handler had settled with another
 * outcome before the chain finished (a middleware's deadline answered for it, and the handler settled
 * while the middleware outside went on, e.g. awaiting a store), that outcome is late for whoever asked:
 * it is handed over, in a microtask, as a later settle would be.
 */
export function handSettledStep(
  slot: LateSlot,
  ctx: ToolContext,
  answer: ToolResult,
  settled: unknown,
): void {
  if (slot.listeners.length === 0 || settled === undefined || outcomeOf(answer) !== 'timeout') return;
  const outcome: LateOutcome =
    settled instanceof StepThrow ? { error: settled.error } : { result: settled as ToolResult };
  if (outcome.result !== undefined && outcomeOf(outcome.result) === 'timeout') return;
  queueMicrotask(() => notifyLate(slot, ctx, outcome));
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

import type { ToolContext } from './types.js';

/**
 * Where a call's `ctx.signal` comes from while a middleware derives it lazily (circuit-breaker: the
 * caller's signal combined with a deadline, built only if something reads it).
 */
export interface SignalSource {
  /** The signal `ctx.signal` reads as. */
  readSignal(): AbortSignal;
  /** A middleware further in assigned `ctx.signal` (e.g. `AbortSignal.any([ctx.signal, own])`). */
  writeSignal(signal: AbortSignal): void;
}

/** Core's call contexts take a signal source through this slot. */
export const DEFER_SIGNAL = Symbol('toolgate.deferSignal');

interface DeferringContext {
  [DEFER_SIGNAL]?: (source: SignalSource) => void;
}

/**
 * Makes `ctx.signal` read from and write to `source` from now on. Core's own call contexts have a slot
 * for it; any other context (a test context, a copy) gets an accessor property defined on it instead,
 * which works the same and costs more (V8 turns the object into a dictionary).
 */
export function deferSignal(ctx: ToolContext, source: SignalSource): void {
  const slot = (ctx as ToolContext & DeferringContext)[DEFER_SIGNAL];
  if (typeof slot === 'function') {
    slot.call(ctx, source);
    return;
  }
  Object.defineProperty(ctx, 'signal', {
    configurable: true,
    enumerable: true,
    get: () => source.readSignal(),
    set: (value: AbortSignal) => source.writeSignal(value),
  });
}

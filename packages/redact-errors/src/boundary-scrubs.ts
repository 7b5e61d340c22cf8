import { mapStrings, type ToolContext } from '@toolgate/core';
import type { RemovedCounts } from './scrub.js';

/** What core's boundary hook removed from a call's failure while this middleware was running it. */
export interface BoundaryScrubs {
  removed: RemovedCounts;
  /** Each scrubbed string, mapped back to the text the hook received (already secret-free: core redacts first). */
  readonly originals: Map<string, string>;
}

// Core scrubs a handler's failure at the boundary right after the handler, before this middleware
// sees it: without this record the debug log could say neither what was removed nor what the tool
// meant to show. Kept on the call's context under a private symbol, and only while the middleware
// runs the call (a WeakMap set and delete per call measured costlier than one property the context's
// shape gains once). undefined: not running; null: running, nothing scrubbed yet, so a successful
// call allocates no record.
const RUNNING = Symbol('toolgate.redact-errors.boundary-scrubs');

type WithScrubs = ToolContext & { [RUNNING]?: BoundaryScrubs | null | undefined };

/** Starts recording for a call; `endBoundaryScrubs` stops it. */
export function startBoundaryScrubs(ctx: ToolContext): void {
  (ctx as WithScrubs)[RUNNING] = null;
}

/** Stops recording for a call: what the boundary scrubbed meanwhile, or undefined when nothing. */
export function endBoundaryScrubs(ctx: ToolContext): BoundaryScrubs | undefined {
  const scrubs = (ctx as WithScrubs)[RUNNING];
  (ctx as WithScrubs)[RUNNING] = undefined;
  return scrubs ?? undefined;
}

/** Records one scrubbed string; false when no call of this middleware is running (the exit pass). */
export function noteBoundaryScrub(
  ctx: ToolContext,
  removed: RemovedCounts,
  before: string,
  after: string,
): boolean {
  let scrubs = (ctx as WithScrubs)[RUNNING];
  if (scrubs === undefined) return false;
  if (scrubs === null) {
    scrubs = { removed: {}, originals: new Map() };
    (ctx as WithScrubs)[RUNNING] = scrubs;
  }
  for (const [name, count] of Object.entries(removed))
    scrubs.removed[name] = (scrubs.removed[name] ?? 0) + count;
  scrubs.originals.set(after, before);
  return true;
}

/** `value` with every string the boundary scrubbed put back as it was (for the debug log). */
export function withOriginals(value: unknown, scrubs: BoundaryScrubs | undefined): unknown {
  if (scrubs === undefined || scrubs.originals.size === 0) return value;
  return mapStrings(value, (text) => scrubs.originals.get(text) ?? text);
}

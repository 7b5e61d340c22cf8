import { type CallerIdentity, callerTag, type ToolContext } from '@toolgate/core';

const UNBOUND: Readonly<Record<string, unknown>> = Object.freeze({});
let taggedId: string | undefined;
let lastTag = '';

/**
 * core's `callerTag` of the caller's identity alone, whatever values the tool bound: the tag the same
 * caller has on a tool that binds nothing. The breaker weighs and refuses callers by identity, so one
 * person reaching a dependency through tools that bind different values is one caller, not several.
 * The last one is kept: a server mostly sees one caller at a time.
 */
export function identityTag(caller: CallerIdentity): string {
  if (caller.id !== taggedId) {
    lastTag = callerTag({ caller, bindings: UNBOUND });
    taggedId = caller.id;
  }
  return lastTag;
}

/**
 * Most callers whose failures one breaker remembers (about 100 bytes each). Past it, the least recently
 * failing caller that is not refused is forgotten, so a flood of new identities cannot grow memory nor
 * push a refused caller out.
 */
export const MAX_TRACKED_CALLERS = 1024;

/** One caller's counted failures of one breaker. */
interface CallerRecord {
  /** Its counted failures in the breaker's current generation and window. */
  failures: number;
  /** The window rotation of its last failure: older than the window, its failures are forgotten. */
  rotation: number;
  /** The breaker generation (state changes) its failures belong to. */
  generation: number;
  /** performance.now() until which it is refused; after that, until its record expires, it is on probation. */
  openUntil: number;
}

/** Where a counted failure of a closed breaker goes. */
export type FailureRoute =
  /** Into the shared window, as without isolation. */
  | { readonly to: 'shared' }
  /** The caller was refused while this failure was on its way: it leaves the window again. */
  | { readonly to: 'refused-caller' }
  /** The caller alone is refused from now; its `failures` in the window leave it. */
  | {
      readonly to: 'open-caller';
      readonly tag: string;
      readonly failures: number;
      readonly again: boolean;
      /** Whether another caller succeeded within the window (for the reason given). */
      readonly othersSucceeded: boolean;
    };

const SHARED: FailureRoute = Object.freeze({ to: 'shared' });
const REFUSED: FailureRoute = Object.freeze({ to: 'refused-caller' });

/**
 * Which callers a breaker's failures come from, and which callers it refuses on their own. A caller is
 * its identity (core's `CallerIdentity` id), not identity plus bindings: one person calling two tools of
 * one dependency that bind different values is one failing caller, refused on both. Records are keyed
 * by `identityTag` (digested: the raw identity is never held as a key nor logged). Successes are tracked
 * without a lookup: the last successful caller and the last one before it that differs, compared by
 * reference first, so a steady caller costs one comparison.
 */
export class CallerLedger {
  readonly #records = new Map<string, CallerRecord>();
  readonly #buckets: number;
  readonly #minFailingCallers: number;
  readonly #max: number;
  /** Window rotations so far: the clock of "within the window". */
  #rotations = 0;
  /** Records whose `openUntil` is set (refused now, or on probation since): only then does a success look its caller up. */
  #flagged = 0;
  /** The latest `openUntil` of any caller; 0 when none is refused (the per-call check reads only this). */
  #refusingUntil = 0;
  // The last successful caller (by reference, and its id) and the last one before it with another id.
  #okCaller: unknown;
  #okScope: string | undefined;
  #okRotation = 0;
  #otherScope: string | undefined;
  #otherRotation = 0;

  constructor(buckets: number, minFailingCallers: number, max = MAX_TRACKED_CALLERS) {
    this.#buckets = buckets;
    this.#minFailingCallers = minFailingCallers;
    this.#max = max;
  }

  /** True while some caller may be refused: only then does a call pay for a lookup. */
  get refusing(): boolean {
    return this.#refusingUntil !== 0;
  }

  /** The window slid one bucket: callers whose failures all left it are forgotten (unless refused). */
  rotate(): void {
    this.#rotations += 1;
    if (this.#records.size === 0) return;
    const now = performance.now();
    // Least recently failing first: stop at the first caller whose failures are still in the window.
    for (const [tag, record] of this.#records) {
      if (this.#recent(record.rotation)) return;
      if (record.openUntil <= now) this.#forget(tag, record);
    }
  }

  /**
   * A counted success of `ctx`'s caller. A caller on probation (refused before, let through again) that
   * succeeds leaves it, as a successful probe closes a half-open breaker: its next failure is counted
   * like anyone's, not refused at once.
   */
  noteSuccess(ctx: ToolContext): void {
    if (ctx.caller !== this.#okCaller) this.#noteCaller(ctx);
    this.#okRotation = this.#rotations;
    // Only while some caller is refused or on probation: a steady caller otherwise pays no lookup.
    if (this.#flagged !== 0) this.#endProbation(ctx);
  }

  /** Milliseconds until `ctx`'s caller is let through again, or undefined when it is not refused. */
  refusedFor(ctx: ToolContext, now: number): number | undefined {
    if (now >= this.#refusingUntil) {
      this.#refusingUntil = 0;
      return undefined;
    }
    const record = this.#records.get(identityTag(ctx.caller));
    if (record === undefined || record.openUntil <= now) return undefined;
    return Math.max(1, Math.ceil(record.openUntil - now));
  }

  /**
   * Notes a counted failure of `ctx`'s caller as soon as it is counted, before it is weighed, so that
   * failures landing together are all seen by the first one weighed. False when the caller is refused
   * now (a call that was running when it was refused): its failure counts for nothing.
   */
  noteFailure(ctx: ToolContext, generation: number, now: number): boolean {
    const record = this.#touch(identityTag(ctx.caller), generation, now);
    if (record.openUntil > now) return false;
    record.failures += 1;
    return true;
  }

  /**
   * Attributes a failure (already noted) that may open the breaker to its caller. `trips` says whether
   * the window now opens the breaker for everyone. The breaker opens for everyone when at least
   * `minFailingCallers` distinct callers failed within the window (callers refused on their own
   * included). Otherwise the caller alone is refused: always for a caller that is not `local`, whether
   * or not anyone else called (one identity failing while nobody else is about is no outage, and would
   * otherwise open the breaker for the next caller to come); for core's `local` caller (stdio,
   * in-process: the only caller there is) only while another caller succeeded within the window, so a
   * caller alone opens it as before.
   */
  weighFailure(
    ctx: ToolContext,
    generation: number,
    now: number,
    resetTimeout: number,
    trips: boolean,
  ): FailureRoute {
    const tag = identityTag(ctx.caller);
    const record = this.#records.get(tag);
    // Forgotten meanwhile (a flood of new callers): weighed as anyone's.
    if (record === undefined) return SHARED;
    if (record.openUntil > now) return REFUSED;
    // On probation (refused before, within the window): its next failure refuses it again at once.
    const again = record.openUntil !== 0;
    if (!again && !trips) return SHARED;
    const local = ctx.caller.kind === 'local';
    if (local && !this.#othersSucceeded(ctx.caller.id)) return SHARED;
    if (this.#failingCallers(tag, generation) >= this.#minFailingCallers) return SHARED;
    const failures = record.failures;
    record.failures = 0;
    this.#setOpen(record, now + resetTimeout);
    if (record.openUntil > this.#refusingUntil) this.#refusingUntil = record.openUntil;
    return { to: 'open-caller', tag, failures, again, othersSucceeded: this.#othersSucceeded(ctx.caller.id) };
  }

  /** Callers tracked, and callers refused now. */
  counts(now: number): { tracked: number; refused: number } {
    let refused = 0;
    for (const record of this.#records.values()) if (record.openUntil > now) refused += 1;
    return { tracked: this.#records.size, refused };
  }

  #noteCaller(ctx: ToolContext): void {
    const scope = ctx.caller.id;
    if (scope !== this.#okScope) {
      this.#otherScope = this.#okScope;
      this.#otherRotation = this.#okRotation;
      this.#okScope = scope;
    }
    this.#okCaller = ctx.caller;
  }

  /** Ends the probation of `ctx`'s caller, if it is on probation (not while it is still refused). */
  #endProbation(ctx: ToolContext): void {
    const record = this.#records.get(identityTag(ctx.caller));
    if (record === undefined || record.openUntil === 0 || record.openUntil > performance.now()) return;
    this.#setOpen(record, 0);
  }

  /** Sets a record's `openUntil`, counting the records that have one. */
  #setOpen(record: CallerRecord, until: number): void {
    if (record.openUntil === 0 && until !== 0) this.#flagged += 1;
    else if (record.openUntil !== 0 && until === 0) this.#flagged -= 1;
    record.openUntil = until;
  }

  /** Drops a caller's record. */
  #forget(tag: string, record: CallerRecord): void {
    this.#records.delete(tag);
    if (record.openUntil !== 0) this.#flagged -= 1;
  }

  #recent(rotation: number): boolean {
    return this.#rotations - rotation < this.#buckets;
  }

  /** Whether a caller other than `scope` succeeded within the window. */
  #othersSucceeded(scope: string): boolean {
    if (this.#okScope !== undefined && this.#okScope !== scope && this.#recent(this.#okRotation)) return true;
    return this.#otherScope !== undefined && this.#otherScope !== scope && this.#recent(this.#otherRotation);
  }

  /**
   * Distinct callers, `tag`'s included, that failed within the window in this generation: with failures
   * counted, or refused on their own (now or on probation); stops at the threshold.
   */
  #failingCallers(tag: string, generation: number): number {
    let count = 1;
    for (const [other, record] of this.#records) {
      if (other === tag || (record.failures === 0 && record.openUntil === 0)) continue;
      if (record.generation !== generation || !this.#recent(record.rotation)) continue;
      count += 1;
      if (count >= this.#minFailingCallers) break;
    }
    return count;
  }

  /** The caller's record, fresh for this generation and window, moved to the newest end of the map. */
  #touch(tag: string, generation: number, now: number): CallerRecord {
    let record = this.#records.get(tag);
    if (record === undefined) {
      if (this.#records.size >= this.#max) this.#evict(now);
      record = { failures: 0, rotation: this.#rotations, generation, openUntil: 0 };
    } else {
      this.#records.delete(tag);
      const expired = !this.#recent(record.rotation);
      if (expired || record.generation !== generation) record.failures = 0;
      if (expired && record.openUntil <= now) this.#setOpen(record, 0);
    }
    record.generation = generation;
    record.rotation = this.#rotations;
    this.#records.set(tag, record);
    return record;
  }

  /** Forgets the least recently failing caller that is not refused (refused ones move to the newest end). */
  #evict(now: number): void {
    for (let turns = this.#records.size; turns > 0; turns -= 1) {
      const [tag, record] = this.#records.entries().next().value as [string, CallerRecord];
      if (record.openUntil <= now) {
        this.#forget(tag, record);
        return;
      }
      this.#records.delete(tag);
      this.#records.set(tag, record);
    }
    // Every tracked caller is refused: the oldest goes.
    const oldest = this.#records.entries().next().value;
    if (oldest !== undefined) this.#forget(oldest[0], oldest[1]);
  }
}

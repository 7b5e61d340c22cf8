import { lookup } from 'node:dns/promises';
import type { Resolver } from './types.js';

/** Options of `createLookupResolver`. */
export interface LookupResolverOptions {
  /**
   * OS lookups (getaddrinfo, on libuv's thread pool) in flight at once, over every policy sharing
   * this resolver. libuv runs at most half its pool on DNS; the default keeps one of those slots
   * free for the rest of the process even when every lookup of ours hangs.
   * @default max(1, ceil(UV_THREADPOOL_SIZE / 2) - 1): 1 with the default pool of 4
   */
  maxConcurrent?: number;
  /**
   * Distinct host names waiting for a slot; a lookup beyond that is refused at once
   * (`unavailable`) rather than queued behind names that will likely time out too. @default 64
   */
  maxWaiting?: number;
}

/** A resolver that follows the call's signal: a lookup still waiting for a slot leaves the queue. */
type SignalledResolver = (hostname: string, signal: AbortSignal) => Promise<readonly string[]>;

// Where a resolver made here keeps its signal-following form (the public `Resolver` takes no signal).
const SIGNALLED: unique symbol = Symbol('url-allowlist.signalled-resolver');

/** Thrown when `maxWaiting` names already wait: the policy answers `unavailable`. */
export class LookupQueueFullError extends Error {
  constructor(readonly waiting: number) {
    super(`url-allowlist: ${waiting} host names are already waiting to be resolved`);
    this.name = 'LookupQueueFullError';
  }
}

const DEFAULT_MAX_WAITING = 64;

/**
 * The OS resolver (`dns.lookup`, every A and AAAA answer, as `http.get` would use: /etc/hosts,
 * nsswitch, search domains), with a bound on concurrent lookups. A name whose DNS server never
 * answers holds a libuv thread until the OS resolver gives up (tens of seconds), whatever the call's
 * deadline; unbounded, a model asking for many such URLs fills libuv's DNS slots, and every other
 * lookup in the process (database host, exporters) queues behind them.
 */
export function createLookupResolver(options: LookupResolverOptions = {}): Resolver {
  return boundLookups(lookupAddresses, {
    maxConcurrent: positive('maxConcurrent', options.maxConcurrent, defaultMaxConcurrent()),
    maxWaiting: positive('maxWaiting', options.maxWaiting, DEFAULT_MAX_WAITING),
  });
}

let shared: Resolver | undefined;

/** The resolver of every policy without `resolve`: one bound for the whole process, like the pool. */
export function defaultResolver(): Resolver {
  shared ??= createLookupResolver();
  return shared;
}

async function lookupAddresses(hostname: string): Promise<readonly string[]> {
  const answers = await lookup(hostname, { all: true, verbatim: true });
  return answers.map((answer) => answer.address);
}

interface Entry {
  readonly hostname: string;
  readonly waiters: Set<(outcome: Outcome) => void>;
  started: boolean;
}

type Outcome = { ok: true; answers: readonly string[] } | { ok: false; error: unknown };

/**
 * Bounds `raw` to `maxConcurrent` calls in flight; lookups of the same name share one call. A slot is held until `raw` itself settles, not
 * until the call that asked gives up: the thread stays busy either way, and that is what is bounded.
 * Exported for tests, which substitute `raw`.
 */
export function boundLookups(
  raw: (hostname: string) => Promise<readonly string[]>,
  limits: { maxConcurrent: number; maxWaiting: number },
): Resolver {
  const entries = new Map<string, Entry>();
  const queue: Entry[] = [];
  let running = 0;

  const run = (entry: Entry): void => {
    running += 1;
    entry.started = true;
    let work: Promise<readonly string[]>;
    try {
      work = raw(entry.hostname);
    } catch (error) {
      work = Promise.reject(error);
    }
    work.then(
      (answers) => settle(entry, { ok: true, answers: Object.freeze([...answers]) }),
      (error: unknown) => settle(entry, { ok: false, error }),
    );
  };
  const settle = (entry: Entry, outcome: Outcome): void => {
    running -= 1;
    entries.delete(entry.hostname);
    for (const waiter of entry.waiters) waiter(outcome);
    while (running < limits.maxConcurrent && queue.length > 0) run(queue.shift()!);
  };

  const resolveSignalled: SignalledResolver = (hostname, signal) => {
    if (signal.aborted) return Promise.reject(abortReason(signal));
    let entry = entries.get(hostname);
    if (entry === undefined) {
      if (running >= limits.maxConcurrent && queue.length >= limits.maxWaiting) {
        return Promise.reject(new LookupQueueFullError(queue.length));
      }
      entry = { hostname, waiters: new Set(), started: false };
      entries.set(hostname, entry);
      if (running < limits.maxConcurrent) run(entry);
      else queue.push(entry);
    }
    const joined = entry;
    return new Promise((resolve, reject) => {
      const waiter = (outcome: Outcome): void => {
        signal.removeEventListener('abort', onAbort);
        if (outcome.ok) resolve(outcome.answers);
        else reject(outcome.error);
      };
      const onAbort = (): void => {
        joined.waiters.delete(waiter);
        // Nobody wants a name that has not started: it never takes a slot.
        if (!joined.started && joined.waiters.size === 0) {
          entries.delete(joined.hostname);
          queue.splice(queue.indexOf(joined), 1);
        }
        reject(abortReason(signal));
      };
      joined.waiters.add(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  };

  const resolver: Resolver = (hostname) => resolveSignalled(hostname, new AbortController().signal);
  return Object.assign(resolver, { [SIGNALLED]: resolveSignalled });
}

/** The signal-following form of a resolver made by this package, or undefined for any other. */
export function signalledOf(resolver: Resolver): SignalledResolver | undefined {
  const own = (resolver as Resolver & { [SIGNALLED]?: SignalledResolver })[SIGNALLED];
  return typeof own === 'function' ? own : undefined;
}

function defaultMaxConcurrent(): number {
  // libuv reads UV_THREADPOOL_SIZE when the pool starts (default 4, at most 1024) and lets DNS
  // work use at most half of it, rounded up.
  const size = Math.min(Math.max(Number.parseInt(process.env.UV_THREADPOOL_SIZE ?? '', 10) || 4, 1), 1024);
  return Math.max(1, Math.ceil(size / 2) - 1);
}

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new TypeError(`createLookupResolver: ${name} must be an integer >= 1`);
  }
  return value;
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

import type { Resolver } from '../../src/index.js';

/** A resolver over a fixed table (never real DNS) that counts its calls per name. */
export interface StubResolver {
  readonly resolve: Resolver;
  readonly calls: string[];
  callsFor(name: string): number;
}

/**
 * `answers[name]` is one answer list, or a list of answer lists given in turn (the last repeats):
 * a name that answers differently on its second lookup models DNS rebinding.
 */
export function stubResolver(
  answers: Record<string, readonly string[] | readonly (readonly string[])[]>,
): StubResolver {
  const calls: string[] = [];
  const resolve: Resolver = async (name) => {
    const turn = calls.filter((called) => called === name).length;
    calls.push(name);
    const entry = answers[name];
    if (entry === undefined) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    }
    if (entry.length > 0 && Array.isArray(entry[0])) {
      const turns = entry as readonly (readonly string[])[];
      return turns[Math.min(turn, turns.length - 1)]!;
    }
    return entry as readonly string[];
  };
  return { resolve, calls, callsFor: (name) => calls.filter((called) => called === name).length };
}

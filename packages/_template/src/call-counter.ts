import { callerScope, isPassThrough, resolveToolOptions, type ToolMiddleware } from '@toolgate/core';
import type { CallCounterOptions, CallCounterRules } from './types.js';

const DEFAULTS: CallCounterRules = { every: 100 };

function checkRules(rules: Readonly<CallCounterRules>, where: string): void {
  if (!(Number.isInteger(rules.every) && rules.every >= 1)) {
    throw new RangeError(`${where}: every must be a positive integer`);
  }
}

/**
 * Counts each caller's calls per tool and records a decision on every `every`-th one. The template's
 * stand-in for a real policy: options resolved once, pass-through for unknown tools and refused
 * arguments, keys from the caller's identity, facts left on `ctx.decisions`.
 */
export function createCallCounter(options: CallCounterOptions = {}): ToolMiddleware & { counts(): number } {
  const rules = resolveToolOptions('createCallCounter', DEFAULTS, options, checkRules);
  const counts = new Map<string, number>();
  const middleware: ToolMiddleware = (ctx, next) => {
    const own = isPassThrough(ctx) ? undefined : rules.forTool(ctx.toolName);
    if (own === undefined) return next();
    const key = `${callerScope(ctx)}|${ctx.toolName}`;
    const count = (counts.get(key) ?? 0) + 1;
    counts.set(key, count);
    if (count % own.every === 0)
      ctx.decisions.push({ by: 'call-counter', action: 'note', detail: { count } });
    return next();
  };
  return Object.assign(middleware, { counts: () => counts.size });
}

import type { RepeatGuardOptions, RepeatRules } from './types.js';

/** The defaults every rule falls back to. */
export const DEFAULT_RULES: Readonly<RepeatRules> = Object.freeze({
  threshold: 2,
  windowMs: 60_000,
  onRepeat: 'cached',
  onFailedRepeat: 'refuse',
  noProgress: false,
  onNoProgress: 'note',
  maxResultSize: 1_000_000,
});

/** The rules of every tool, resolved once at factory time: a tool's own rules, or false (opted out). */
export interface ResolvedRules {
  readonly global: Readonly<RepeatRules>;
  readonly tools: ReadonlyMap<string, Readonly<RepeatRules> | false>;
}

export function resolveRules(options: RepeatGuardOptions): ResolvedRules {
  const global = checkRules(pickRules(DEFAULT_RULES, options), 'repeatGuard');
  const tools = new Map<string, Readonly<RepeatRules> | false>();
  for (const [name, override] of Object.entries(options.tools ?? {})) {
    if (override === false) tools.set(name, false);
    else if (typeof override === 'object' && override !== null) {
      tools.set(name, checkRules(pickRules(global, override), `repeatGuard: tools.${name}`));
    } else {
      throw new TypeError(`repeatGuard: tools.${name} must be an object of rules or false`);
    }
  }
  return { global, tools };
}

// Copies only the rule fields, so store, scope and tools never leak into a tool's rules.
function pickRules(base: Readonly<RepeatRules>, override: Partial<RepeatRules>): RepeatRules {
  return {
    threshold: override.threshold ?? base.threshold,
    windowMs: override.windowMs ?? base.windowMs,
    onRepeat: override.onRepeat ?? base.onRepeat,
    onFailedRepeat: override.onFailedRepeat ?? base.onFailedRepeat,
    noProgress: override.noProgress ?? base.noProgress,
    onNoProgress: override.onNoProgress ?? base.onNoProgress,
    maxResultSize: override.maxResultSize ?? base.maxResultSize,
  };
}

function checkRules(rules: RepeatRules, where: string): Readonly<RepeatRules> {
  if (!Number.isInteger(rules.threshold) || rules.threshold < 2) {
    throw new RangeError(`${where}: threshold must be an integer of at least 2 (the first call always runs)`);
  }
  if (!Number.isFinite(rules.windowMs) || rules.windowMs < 1) {
    throw new RangeError(`${where}: windowMs must be a finite number of at least 1`);
  }
  if (rules.onRepeat !== 'cached' && rules.onRepeat !== 'fail') {
    throw new TypeError(`${where}: onRepeat must be 'cached' or 'fail'`);
  }
  if (rules.onFailedRepeat !== 'refuse' && rules.onFailedRepeat !== 'run') {
    throw new TypeError(`${where}: onFailedRepeat must be 'refuse' or 'run'`);
  }
  if (rules.noProgress !== false && (!Number.isInteger(rules.noProgress) || rules.noProgress < 2)) {
    throw new RangeError(`${where}: noProgress must be false or an integer of at least 2`);
  }
  if (rules.onNoProgress !== 'note' && rules.onNoProgress !== 'fail') {
    throw new TypeError(`${where}: onNoProgress must be 'note' or 'fail'`);
  }
  if (!Number.isFinite(rules.maxResultSize) || rules.maxResultSize < 1) {
    throw new RangeError(`${where}: maxResultSize must be a finite number of at least 1`);
  }
  return Object.freeze(rules);
}

import { resolveToolOptions, type ToolOptionsResolver } from '@toolgate/core';
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

/** Every tool's rules, resolved once at factory time with core's one merge rule. */
export function resolveRules(options: RepeatGuardOptions): ToolOptionsResolver<RepeatRules> {
  return resolveToolOptions('createRepeatGuard', DEFAULT_RULES, options, checkRules);
}

function checkRules(rules: Readonly<RepeatRules>, where: string): void {
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
}

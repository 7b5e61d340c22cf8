import { resolveToolOptions, type ToolOptionsResolver } from '@toolgate/core';
import { DEFAULT_MAX_SCRUB_CHARS, MIN_MAX_SCRUB_CHARS } from './scrub-budget.js';
import type { RedactErrorsOptions, RedactErrorsRules } from './types.js';

const DEFAULTS: RedactErrorsRules = {
  patterns: [],
  classify: undefined,
  internalMessage: 'Internal error.',
  logger: undefined,
  maxScrubChars: DEFAULT_MAX_SCRUB_CHARS,
};

/** The rules of every tool, resolved and checked once by core's one merge rule. */
export function resolveRules(options: RedactErrorsOptions): ToolOptionsResolver<RedactErrorsRules> {
  return resolveToolOptions('createRedactErrors', DEFAULTS, options, checkRules);
}

/** Refuses a mistake when the middleware is created, not on the first failure in production. */
function checkRules(rules: Readonly<RedactErrorsRules>, where: string): void {
  if (!Array.isArray(rules.patterns)) throw new TypeError(`${where}: patterns must be an array`);
  for (const [i, entry] of rules.patterns.entries()) {
    const ok =
      typeof entry === 'object' &&
      entry !== null &&
      typeof entry.name === 'string' &&
      entry.pattern instanceof RegExp &&
      typeof entry.replace === 'string';
    if (!ok)
      throw new TypeError(
        `${where}: patterns[${i}] must be { name: string, pattern: RegExp, replace: string }`,
      );
  }
  if (rules.classify !== undefined && typeof rules.classify !== 'function') {
    throw new TypeError(`${where}: classify must be a function`);
  }
  if (typeof rules.internalMessage !== 'string' || rules.internalMessage.trim() === '') {
    throw new TypeError(`${where}: internalMessage must be a non-empty string`);
  }
  const max: unknown = rules.maxScrubChars;
  if (!(typeof max === 'number' && Number.isSafeInteger(max) && max >= MIN_MAX_SCRUB_CHARS)) {
    throw new RangeError(`${where}: maxScrubChars must be an integer of at least ${MIN_MAX_SCRUB_CHARS}`);
  }
  const logger = rules.logger as unknown as Record<string, unknown> | undefined;
  if (logger !== undefined) {
    const missing = ['error', 'warn', 'info', 'debug'].filter(
      (level) => typeof logger?.[level] !== 'function',
    );
    if (missing.length > 0) throw new TypeError(`${where}: logger lacks ${missing.join(', ')}`);
  }
}

import type { Logger } from '@toolgate/core';
import { describe, expect, it } from 'vitest';
import { createRedactErrors, type RedactErrorsOptions, redactErrors } from '../src/index.js';

describe('createRedactErrors: options are resolved and checked once (core’s resolveToolOptions)', () => {
  it('redactErrors is the deprecated alias of createRedactErrors', () => {
    expect(redactErrors).toBe(createRedactErrors);
  });

  it('the returned middleware carries core’s boundary hook and close()', () => {
    const middleware = createRedactErrors();
    expect(typeof middleware).toBe('function');
    expect(typeof middleware.scrubText).toBe('function');
    expect(typeof middleware.close).toBe('function');
  });

  it.each<[string, RedactErrorsOptions, RegExp]>([
    [
      'an unknown per-tool option (a typo)',
      { tools: { orders: { pattern: [] } as never } },
      /^createRedactErrors: tools\.orders has unknown option\(s\) pattern; a tool may set patterns, classify, internalMessage, logger, maxScrubChars$/,
    ],
    [
      'a per-tool entry that is neither object nor false',
      { tools: { orders: true as never } },
      /tools\.orders must be an object of options or false/,
    ],
    [
      'a pattern that is not a RegExp',
      { patterns: [{ name: 'x', pattern: 'JIRA-' as never, replace: '[x]' }] },
      /^createRedactErrors: patterns\[0\] must be \{ name: string, pattern: RegExp, replace: string \}$/,
    ],
    [
      'a per-tool patterns that is not an array',
      { tools: { orders: { patterns: 'x' as never } } },
      /^createRedactErrors: tools\.orders: patterns must be an array$/,
    ],
    [
      'a classify that is not a function',
      { classify: 'x' as never },
      /^createRedactErrors: classify must be a function$/,
    ],
    [
      'an empty internalMessage',
      { internalMessage: ' ' },
      /^createRedactErrors: internalMessage must be a non-empty string$/,
    ],
    [
      'a logger without debug',
      { logger: { error() {}, warn() {}, info() {} } as unknown as Logger },
      /^createRedactErrors: logger lacks debug$/,
    ],
  ])('refuses %s when created', (_name, options, message) => {
    expect(() => createRedactErrors(options)).toThrow(message);
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('refuses logIntervalMs %s', (logIntervalMs) => {
    expect(() => createRedactErrors({ logIntervalMs })).toThrow(
      /^createRedactErrors: logIntervalMs must be a finite number of at least 1$/,
    );
  });
});

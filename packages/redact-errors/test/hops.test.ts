import { callNext, createSilentLogger, mapSettled, type ToolMiddleware } from '@toolgate/core';
import { countAnswerHops } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import { createRedactErrors } from '../src/index.js';

// A middleware inside redact-errors that maps the outcome (as the circuit-breaker answers).
const innerStep: ToolMiddleware = (_ctx, next) =>
  mapSettled(
    callNext(next),
    (result) => result,
    (error) => {
      throw error;
    },
  );

describe('the answer path through redact-errors', () => {
  it('adds no hop of its own over the after-call step inside it: its step runs in the same pass', async () => {
    const none = await countAnswerHops([]);
    const redact = createRedactErrors({ logger: createSilentLogger() });
    expect(await countAnswerHops([redact])).toBe(none + 1);
    // With a `.then` of its own this was none + 2.
    expect(await countAnswerHops([redact, innerStep])).toBe(none + 1);
  });
});

import { callNext, createSilentLogger, mapSettled, type ToolMiddleware } from '@toolgate/core';
import { countAnswerHops } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import { createCircuitBreaker } from '../src/index.js';

// A middleware outside the breaker that maps the outcome, as redact-errors and audit do.
const outerStep: ToolMiddleware = (_ctx, next) =>
  mapSettled(
    callNext(next),
    (result) => result,
    (error) => {
      throw error;
    },
  );

describe('the answer path through the breaker', () => {
  it('costs the race one hop, and the after-call steps outside it run in that hop, not one each', async () => {
    const none = await countAnswerHops([]);
    const alone = createCircuitBreaker({ logger: createSilentLogger() });
    expect(await countAnswerHops([alone])).toBe(none + 1);
    alone.close();
    // The steps outside stack onto the breaker's own answer (core's createSettleable): with a plain
    // promise of its own, each step outside took a hop more (none + 3 here).
    const stacked = createCircuitBreaker({ logger: createSilentLogger() });
    expect(await countAnswerHops([outerStep, outerStep, stacked])).toBe(none + 1);
    expect(await countAnswerHops([outerStep, outerStep, stacked], { handler: 'async' })).toBe(
      (await countAnswerHops([], { handler: 'async' })) + 1,
    );
    stacked.close();
  });
});

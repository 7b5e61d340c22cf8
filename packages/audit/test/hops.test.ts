import { callNext, createSilentLogger, mapSettled, type ToolMiddleware } from '@toolgate/core';
import { countAnswerHops } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import { createAudit } from '../src/index.js';
import { memorySink } from './helpers.js';

// A middleware inside audit that maps the outcome (as redact-errors does).
const innerStep: ToolMiddleware = (_ctx, next) =>
  mapSettled(
    callNext(next),
    (result) => result,
    (error) => {
      throw error;
    },
  );

describe('the answer path through audit', () => {
  it('records each call in the pass of the after-call step inside it: no hop of its own', async () => {
    const none = await countAnswerHops([]);
    const memory = memorySink();
    const audit = createAudit({ sink: memory.sink, logger: createSilentLogger() });
    try {
      expect(await countAnswerHops([audit])).toBe(none + 1);
      // With a `.then` of its own this was none + 2.
      expect(await countAnswerHops([audit, innerStep])).toBe(none + 1);
      await audit.flush();
      expect(memory.records).toHaveLength(10);
      expect(memory.records.every((record) => record.outcome === 'ok')).toBe(true);
    } finally {
      await audit.close();
    }
  });
});

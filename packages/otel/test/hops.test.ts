import { createSilentLogger } from '@toolgate/core';
import { countAnswerHops } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createOtel } from '../src/index.js';
import { createTelemetry, type Telemetry } from './harness.js';

let telemetry: Telemetry | undefined;
afterEach(async () => {
  await telemetry?.shutdown();
  telemetry = undefined;
});

describe('otel on the answer path', () => {
  it('ends a recorded span beside the chain: the answer comes in as few hops as with no policy', async () => {
    telemetry = createTelemetry();
    const otel = createOtel({ tracerProvider: telemetry.tracerProvider, logger: createSilentLogger() });
    expect(await countAnswerHops([otel])).toBe(await countAnswerHops([]));
    // Every call's span was ended, with its outcome, before its answer reached the client.
    const spans = telemetry.exporter.getFinishedSpans();
    expect(spans).toHaveLength(5);
    expect(spans.every((span) => span.name === 'tools/call echo' && span.ended)).toBe(true);
  });
});

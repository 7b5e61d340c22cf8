import { metrics } from '@opentelemetry/api';
import { DataPointType } from '@opentelemetry/sdk-metrics';
import { defineTool, ok } from '@toolgate/core';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createOtel } from '../src/index.js';
import {
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_MCP_METHOD_NAME,
  MCP_DURATION_BUCKETS,
  METRIC_MCP_SERVER_OPERATION_DURATION,
  OTHER,
} from '../src/semconv.js';
import { closeAll, createTelemetry, getOrder, serve } from './harness.js';

const telemetry = createTelemetry();

afterEach(closeAll);
afterAll(async () => {
  await telemetry.shutdown();
  metrics.disable();
});

const slow = defineTool({
  name: 'slow_report',
  description: 'Takes a while.',
  input: {},
  handler: async () => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    return ok();
  },
});

describe('otel: mcp.server.operation.duration', () => {
  it('is a histogram in seconds with the spec buckets, one series per tool and error.type, no ids', async () => {
    const middleware = createOtel({
      tracerProvider: telemetry.tracerProvider,
      meterProvider: telemetry.meterProvider,
    });
    const c = await serve([middleware], { tools: [getOrder, slow], sessionId: 'sess-1' });
    await c.callTool('get_order', { id: 'A-1' });
    await c.callTool('get_order', { id: 'A-2' });
    await c.callTool('get_order', { id: 'missing' });
    await c.callTool('get_order', { id: 'boom' });
    await c.callTool('slow_report', {});
    await expect(c.callTool('made_up_tool_1', {})).rejects.toThrow(/Unknown tool/);
    await expect(c.callTool('made_up_tool_2', {})).rejects.toThrow(/Unknown tool/);

    const metric = await telemetry.durationMetric();
    expect(metric?.descriptor).toMatchObject({
      name: METRIC_MCP_SERVER_OPERATION_DURATION,
      unit: 's',
    });
    expect(metric?.dataPointType).toBe(DataPointType.HISTOGRAM);
    const points = await telemetry.durationPoints();
    const series = points.map((point) => ({ attributes: point.attributes, count: point.value.count }));
    expect(series).toHaveLength(5);
    expect(series).toEqual(
      expect.arrayContaining([
        {
          attributes: { [ATTR_MCP_METHOD_NAME]: 'tools/call', [ATTR_GEN_AI_TOOL_NAME]: 'get_order' },
          count: 2,
        },
        {
          attributes: {
            [ATTR_MCP_METHOD_NAME]: 'tools/call',
            [ATTR_GEN_AI_TOOL_NAME]: 'get_order',
            [ATTR_ERROR_TYPE]: 'tool_error',
          },
          count: 1,
        },
        {
          attributes: {
            [ATTR_MCP_METHOD_NAME]: 'tools/call',
            [ATTR_GEN_AI_TOOL_NAME]: 'get_order',
            [ATTR_ERROR_TYPE]: 'TypeError',
          },
          count: 1,
        },
        {
          attributes: { [ATTR_MCP_METHOD_NAME]: 'tools/call', [ATTR_GEN_AI_TOOL_NAME]: 'slow_report' },
          count: 1,
        },
        // Invented tool names share one series instead of minting one each.
        {
          attributes: {
            [ATTR_MCP_METHOD_NAME]: 'tools/call',
            [ATTR_GEN_AI_TOOL_NAME]: OTHER,
            [ATTR_ERROR_TYPE]: '-32602',
          },
          count: 2,
        },
      ]),
    );
    for (const point of points) {
      expect(point.value.buckets.boundaries).toEqual([...MCP_DURATION_BUCKETS]);
      expect(point.value.buckets.counts).toHaveLength(MCP_DURATION_BUCKETS.length + 1);
    }
    expect(MCP_DURATION_BUCKETS).toEqual([0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]);

    // In seconds, not milliseconds: a 30 ms call lands above the 0.02 s boundary and far below 10 s.
    const slowPoint = points.find((point) => point.attributes[ATTR_GEN_AI_TOOL_NAME] === 'slow_report')!;
    expect(slowPoint.value.min).toBeGreaterThanOrEqual(0.025);
    expect(slowPoint.value.max).toBeLessThan(10);
    expect(slowPoint.value.buckets.counts.slice(0, 2)).toEqual([0, 0]);
  });

  it('a tool that opted out records no duration', async () => {
    const fresh = createTelemetry();
    const middleware = createOtel({
      tracerProvider: fresh.tracerProvider,
      meterProvider: fresh.meterProvider,
      tools: { get_order: false },
    });
    const c = await serve([middleware]);
    await c.callTool('get_order', { id: 'A-1' });
    expect(await fresh.durationPoints()).toEqual([]);
    expect(fresh.exporter.getFinishedSpans()).toEqual([]);
    await fresh.shutdown();
  });
});

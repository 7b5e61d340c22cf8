import { AsyncLocalStorage } from 'node:async_hooks';
import type { ToolMiddleware } from '@toolgate/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createAudit, createFunctionSink } from '../src/index.js';
import { closeConnections, serve } from './helpers.js';

afterEach(closeConnections);

describe('the writer runs outside the calls it records', () => {
  it("a sink's writes never see the async context of the call whose record started the batch", async () => {
    // What an OpenTelemetry context manager does around the rest of the chain (otel's context.with):
    // every call runs inside a store of its own.
    const storage = new AsyncLocalStorage<string>();
    const perCall: ToolMiddleware = (ctx, next) => storage.run(`call ${String(ctx.request.id)}`, next);
    const seenByWrites: (string | undefined)[] = [];
    const written: number[] = [];
    const audit = createAudit({
      sink: createFunctionSink(async (records) => {
        seenByWrites.push(storage.getStore());
        // The write's own awaits stay outside every call too.
        await new Promise((resolve) => setTimeout(resolve, 1));
        seenByWrites.push(storage.getStore());
        written.push(records.length);
      }),
    });
    const client = await serve([perCall, audit]);
    // Inside each call the store is there (the control: the middleware really sets it).
    const insideCalls: (string | undefined)[] = [];
    const probe: ToolMiddleware = (_ctx, next) => {
      insideCalls.push(storage.getStore());
      return next();
    };
    const probed = await serve([perCall, probe, audit]);
    await Promise.all(Array.from({ length: 20 }, (_, i) => client.callTool('echo', { value: i })));
    for (let i = 0; i < 5; i += 1) await client.callTool('echo', { value: `sequential ${i}` });
    await probed.callTool('echo', { value: 'probe' });
    await audit.flush();
    expect(insideCalls).toHaveLength(1);
    expect(insideCalls[0]).toMatch(/^call /);
    expect(written.reduce((sum, n) => sum + n, 0)).toBe(26);
    expect(seenByWrites.length).toBeGreaterThan(0);
    expect(seenByWrites.every((store) => store === undefined)).toBe(true);
    await audit.close();
  });
});

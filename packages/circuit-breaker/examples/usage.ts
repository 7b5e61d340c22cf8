// The README's Usage example, typechecked with the package (README imports '@toolgate/circuit-breaker'
// where this file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createStderrLogger, defineTool, fail, ok, registerTools } from '@toolgate/core';
import * as z from 'zod';
import { createCircuitBreaker } from '../src/index.js';

const carrier = 'https://carrier.example';

const trackShipment = defineTool({
  name: 'track_shipment',
  description: 'Where a shipment is now, by tracking number. Not for order status.',
  input: { trackingNumber: z.string().regex(/^[A-Z0-9]{10,20}$/) },
  handler: async ({ trackingNumber }, ctx) => {
    // Pass ctx.signal on: when the breaker's deadline passes, the request is really cancelled.
    const response = await fetch(`${carrier}/track/${trackingNumber}`, { signal: ctx.signal });
    if (response.status === 404) return fail('not_found', `No shipment ${trackingNumber}.`); // not counted
    if (!response.ok) return fail('unavailable', 'The carrier did not answer.'); // counted
    const body = (await response.json()) as { status: string };
    return ok({ status: body.status });
  },
});

const getCarrierEta = defineTool({
  name: 'get_carrier_eta',
  description: 'Estimated delivery date of a shipment, by tracking number.',
  input: { trackingNumber: z.string().regex(/^[A-Z0-9]{10,20}$/) },
  handler: async ({ trackingNumber }, ctx) => {
    const response = await fetch(`${carrier}/eta/${trackingNumber}`, { signal: ctx.signal });
    if (!response.ok) return fail('unavailable', 'The carrier did not answer.');
    const body = (await response.json()) as { eta: string };
    return ok({ eta: body.eta });
  },
});

const logger = createStderrLogger();
const breaker = createCircuitBreaker({
  timeout: 10_000,
  tools: {
    track_shipment: { dependency: 'carrier-api' },
    get_carrier_eta: { dependency: 'carrier-api' },
  },
  dependencies: { 'carrier-api': { volumeThreshold: 10, resetTimeout: 20_000, capacity: 8 } },
});
breaker.on('open', (event) => logger.warn({ breaker: event.breaker }, 'page the on-call'));

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, [trackShipment, getCarrierEta], {
  // In a full server: [otel, audit, redactErrors, authz, rateLimit, repeatGuard, idempotency, confirm, breaker]
  middleware: [breaker],
  logger,
});
// breaker.state('carrier-api') and breaker.stats() feed a health endpoint.
server.server.onclose = () => breaker.close();
await server.connect(new StdioServerTransport());

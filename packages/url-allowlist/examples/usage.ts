// The README's Usage section, typechecked with the package (README shows '@toolgate/url-allowlist'
// where this file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { defineTool, ok, registerTools } from '@toolgate/core';
import * as z from 'zod';
import { createUrlGuard, createUrlPolicy } from '../src/index.js';

const carrier = createUrlPolicy({
  allow: ['api.carrier.example', '*.tracking.carrier.example'],
  schemes: ['https'],
  maxBodyBytes: 256 * 1024,
  timeoutMs: 5000,
});

const trackShipment = defineTool({
  name: 'track_shipment',
  description: 'Fetch the tracking page of a shipment from the carrier. Only carrier URLs work.',
  input: { url: z.string().describe('The carrier tracking URL') },
  // Refuses a bad URL before the handler runs, and leaves the checked URL in ctx.state.
  middleware: [createUrlGuard({ paths: 'url', policy: carrier })],
  handler: async ({ url }, ctx) => {
    // Fetches what the middleware checked (no second DNS lookup), pinned to the checked address.
    const page = await carrier.fetch(ctx.state.checkedUrls?.url ?? url, { signal: ctx.signal });
    return ok(
      { status: page.status, body: page.body, url: page.url },
      page.note === undefined ? {} : { note: page.note },
    );
  },
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, [trackShipment]);

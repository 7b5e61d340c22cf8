import { defineTool, fail, ok, type ToolDefinition, ToolError } from '@toolgate/core';
import { createUrlGuard, type UrlPolicy } from '@toolgate/url-allowlist';
import * as z from 'zod';

export interface TrackShipmentOptions {
  /** The carrier tracking API's base URL (its host is the only one allowlisted). */
  carrierUrl: string;
  /** The policy built for that host. */
  policy: UrlPolicy;
}

const CarrierAnswer = z.object({
  trackingNumber: z.string(),
  carrier: z.string(),
  status: z.string(),
  events: z.array(z.object({ at: z.string(), where: z.string(), what: z.string() })),
});

/**
 * `track_shipment`: asks the carrier's tracking API. A tracking link the user pasted is checked
 * against the carrier allowlist before the handler runs (url-allowlist), and every call is guarded
 * by the "carrier-api" breaker.
 */
export function trackShipmentTool(options: TrackShipmentOptions): ToolDefinition {
  const base = options.carrierUrl.replace(/\/+$/, '');
  return defineTool({
    name: 'track_shipment',
    title: 'Track a shipment',
    description:
      'Where a shipped order is now, from the carrier: status and scan events. Give the tracking number from ' +
      "get_order_status (TRK followed by 8 digits), or a carrier tracking link the user pasted. Only the carrier's " +
      'own links work. Not for orders that have not shipped.',
    input: {
      tracking_number: z
        .string()
        .regex(/^TRK\d{8}$/)
        .optional()
        .describe('Tracking number, e.g. "TRK00000042".'),
      tracking_url: z.string().max(2048).optional().describe("A tracking link on the carrier's site."),
    },
    output: CarrierAnswer.shape,
    annotations: { readOnlyHint: true, openWorldHint: true },
    middleware: [createUrlGuard({ paths: 'tracking_url', policy: options.policy })],
    handler: async ({ tracking_number, tracking_url }, ctx) => {
      if (tracking_number === undefined && tracking_url === undefined) {
        return fail('invalid_argument', 'Give a tracking number or a tracking link.', {
          hint: 'Look the tracking number up with get_order_status, then call track_shipment with it.',
          fields: [{ path: 'tracking_number', expected: 'TRK followed by 8 digits' }],
        });
      }
      const target =
        tracking_url !== undefined
          ? (ctx.state.checkedUrls?.tracking_url ?? tracking_url)
          : `${base}/track/${tracking_number}`;
      const response = await options.policy.fetch(target, { signal: ctx.signal });
      if (response.status === 404) {
        return fail('not_found', 'The carrier does not know this tracking number.', {
          hint: 'Check the tracking number with get_order_status; it can take 24 hours to appear.',
        });
      }
      if (response.status >= 500 || response.status === 429) {
        throw new ToolError('unavailable', 'The carrier tracking service is unavailable.', {
          retryAfterMs: 30_000,
        });
      }
      if (response.status !== 200) {
        throw new Error(`carrier answered HTTP ${response.status} for ${response.url}`);
      }
      // A malformed answer is the carrier's bug, not the model's: it surfaces as an internal error.
      const answer = CarrierAnswer.parse(JSON.parse(response.body));
      return ok(answer);
    },
  });
}

import { defineTool, fail, ok, type ToolDefinition, ToolError } from '@toolgate/core';
import type { Queryable } from '@toolgate/sql';
import { createUrlGuard, type UrlPolicy } from '@toolgate/url-allowlist';
import * as z from 'zod';
import { bindCustomerId } from '../customer-scope.js';
import type { ServerSecrets } from '../server-secrets.js';
import { thirdPartyAnswer } from '../third-party-text.js';

export interface TrackShipmentOptions {
  /** The carrier tracking API's base URL (its host is the only one allowlisted). */
  carrierUrl: string;
  /** The policy built for that host. */
  policy: UrlPolicy;
  /** The orders, to tell whose shipment a tracking number is (customer-scoped only). */
  db: Queryable;
  /**
   * Track only shipments of the caller's own orders (`customerId` from the token), as the order tools
   * list only them: tracking numbers are sequential, so any other number is another customer's parcel.
   * @default false
   */
  customerScoped?: boolean;
  /** The service's own secret values (CARRIER_URL's key among them), never passed on from the carrier's answer. */
  secrets?: ServerSecrets;
}

const TRACKING_NUMBER = /^TRK\d{8}$/;
const OWN_SHIPMENT = 'SELECT 1 FROM orders WHERE tracking_number = $1 AND customer_id = $2';

// What the carrier may say, bounded: an answer past these sizes is the carrier's bug, answered
// `internal` (a success passes core's boundary unscrubbed: what is returned is what the model reads).
const CarrierAnswer = z.object({
  trackingNumber: z.string().max(64),
  carrier: z.string().max(200),
  status: z.string().max(200),
  events: z
    .array(z.object({ at: z.string().max(64), where: z.string().max(500), what: z.string().max(500) }))
    .max(200),
});

/**
 * `track_shipment`: asks the carrier's tracking API. A tracking link the user pasted is checked
 * against the carrier allowlist before the handler runs (url-allowlist), and every call is guarded
 * by the "carrier-api" breaker.
 */
export function trackShipmentTool(options: TrackShipmentOptions): ToolDefinition {
  const base = options.carrierUrl.replace(/\/+$/, '');
  const carrier = new URL(base);
  const scoped = options.customerScoped ?? false;
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
        .regex(TRACKING_NUMBER)
        .optional()
        .describe('Tracking number, e.g. "TRK00000042".'),
      tracking_url: z.string().max(2048).optional().describe("A tracking link on the carrier's site."),
    },
    output: CarrierAnswer.shape,
    annotations: { readOnlyHint: true, openWorldHint: true },
    middleware: [createUrlGuard({ paths: 'tracking_url', policy: options.policy })],
    bind: bindCustomerId(scoped),
    handler: async ({ tracking_number, tracking_url }, ctx) => {
      if (tracking_number === undefined && tracking_url === undefined) {
        return fail('invalid_argument', 'Give a tracking number or a tracking link.', {
          hint: 'Look the tracking number up with get_order_status, then call track_shipment with it.',
          fields: [{ path: 'tracking_number', expected: 'TRK followed by 8 digits' }],
        });
      }
      const checked =
        tracking_url !== undefined ? (ctx.state.checkedUrls?.tracking_url ?? tracking_url) : undefined;
      let target = checked ?? `${base}/track/${tracking_number}`;
      if (scoped) {
        // A link only names the number: the carrier is asked by the number itself, once it is the caller's.
        const number =
          tracking_number ??
          trackingNumberIn(typeof checked === 'string' ? checked : checked!.url.href, carrier);
        if (number === undefined) {
          return fail('invalid_argument', 'That link does not name a tracking number.', {
            hint: 'Give the tracking number itself (TRK followed by 8 digits), from get_order_status.',
            fields: [
              { path: 'tracking_url', expected: 'a carrier tracking link ending in the tracking number' },
            ],
          });
        }
        const owned = await options.db.readOnly({ timeoutMs: 2000, signal: ctx.signal }, (runner) =>
          runner.query(OWN_SHIPMENT, [number, ctx.bindings.customerId]),
        );
        // Another customer's parcel answers exactly like a number the carrier does not know.
        if (owned.rows.length === 0) return unknownTrackingNumber();
        target = `${base}/track/${number}`;
      }
      const response = await options.policy.fetch(target, { signal: ctx.signal });
      if (response.status === 404) return unknownTrackingNumber();
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
      // A third party's words: the service's own secrets (the carrier echoing the URL it was asked for,
      // key and all), credentials, and the carrier's internals (hosts, ports, paths, SQL, stack frames)
      // are removed before the model reads them, and a terminal escape or a direction override is
      // written out as visible text (the person may read it too).
      return ok(thirdPartyAnswer(answer, options.secrets));
    },
  });
}

function unknownTrackingNumber(): ReturnType<typeof fail> {
  return fail('not_found', 'The carrier does not know this tracking number.', {
    hint: 'Check the tracking number with get_order_status; it can take 24 hours to appear.',
  });
}

/** The tracking number a carrier link names (`{base}/track/{number}`), or undefined. */
function trackingNumberIn(link: string, carrier: URL): string | undefined {
  const url = URL.canParse(link) ? new URL(link) : undefined;
  const prefix = `${carrier.pathname.replace(/\/+$/, '')}/track/`;
  if (url?.origin !== carrier.origin || !url.pathname.startsWith(prefix)) return undefined;
  const number = url.pathname.slice(prefix.length);
  return TRACKING_NUMBER.test(number) ? number : undefined;
}

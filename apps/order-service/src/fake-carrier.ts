import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * How the fake carrier answers: normally, with 503s, not at all (the caller's timeout must fire), or
 * with a broken 200 page that leaks its internals (what a misconfigured proxy really sends).
 */
export type CarrierMode = 'ok' | 'fail' | 'stall' | 'garbage';

export interface FakeCarrier {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  mode: CarrierMode;
  /** Tracking requests received so far. */
  readonly requests: number;
  close(): Promise<void>;
}

/**
 * A small stand-in for a carrier's tracking API, on 127.0.0.1 only. `GET /track/{number}` answers
 * JSON; `mode` makes it fail (503) or stall (never answers) for demos and fault tests.
 */
export async function startFakeCarrier(
  options: { port?: number; mode?: CarrierMode } = {},
): Promise<FakeCarrier> {
  let mode: CarrierMode = options.mode ?? 'ok';
  let requests = 0;
  const server: Server = createServer((req, res) => {
    const match = /^\/track\/([A-Za-z0-9]{1,32})$/.exec(req.url ?? '');
    if (req.method !== 'GET' || !match) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    requests += 1;
    if (mode === 'stall') return; // never answers; the caller's timeout must fire
    if (mode === 'fail') {
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"carrier maintenance"}');
      return;
    }
    if (mode === 'garbage') {
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          '<html>upstream connect error: db-7.carrier.internal:5432 (password=hunter2) at /srv/carrier/app.js:42</html>',
        );
      return;
    }
    const trackingNumber = match[1]!;
    const serial = Number.parseInt(trackingNumber.replace(/\D/g, '') || '0', 10);
    const delivered = serial % 2 === 0;
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        trackingNumber,
        carrier: 'Parcelwise',
        status: delivered ? 'delivered' : 'in_transit',
        events: [
          { at: '2026-11-20T09:00:00Z', where: 'Warehouse', what: 'Picked up' },
          { at: '2026-11-21T17:30:00Z', where: 'Hub', what: 'In transit' },
          ...(delivered ? [{ at: '2026-11-23T11:12:00Z', where: 'Destination', what: 'Delivered' }] : []),
        ],
      }),
    );
  });
  await new Promise<void>((resolveListen) => server.listen(options.port ?? 0, '127.0.0.1', resolveListen));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get mode() {
      return mode;
    },
    set mode(next: CarrierMode) {
      mode = next;
    },
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolveClose) => {
        server.closeAllConnections();
        server.close(() => resolveClose());
      }),
  };
}

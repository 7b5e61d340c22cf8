// What the fleet tests share: a scratch database per run, callers unique to the run (Redis outlives a
// run: rate-limit counters, idempotency results and repeat entries of an earlier run must not be met
// again), and SDK clients that note which replica answered (HAProxy's x-toolgate-replica header).
import { randomBytes } from 'node:crypto';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import pg from 'pg';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL;

/** Row 1 of the seed: paid, 8407 cents. Row 6: pending. */
export const PAID = '4000000000007919';
export const PENDING = '4000000000047514';

export interface ScratchDatabase {
  readonly url: string;
  query<T>(text: string, values?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

/** A fresh database `toolgate_fleet_<random>` beside TEST_DATABASE_URL's, dropped by `drop()`. */
export async function createScratchDatabase(baseUrl: string): Promise<ScratchDatabase> {
  const name = `toolgate_fleet_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.href, max: 2 });
  // DROP DATABASE ... WITH (FORCE) ends any connection still closing; that is expected.
  pool.on('error', () => undefined);
  return {
    url: url.href,
    async query<T>(text: string, values: unknown[] = []) {
      return (await pool.query(text, values)).rows as T[];
    },
    async drop() {
      await pool.end();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

export interface FleetCaller {
  readonly token: string;
  readonly entry: { token: string; clientId: string; scopes: string[]; claims: Record<string, unknown> };
}

/** A caller of this run only: its subject carries the run's random id. */
export function fleetCaller(name: string, run: string, scopes: string[]): FleetCaller {
  const token = `${name}-${run}-token-0123456789`;
  return { token, entry: { token, clientId: 'fleet-test', scopes, claims: { sub: `${name}-${run}` } } };
}

export interface NotingClient {
  readonly client: Client;
  /** The replica of each answer, in arrival order (empty when called directly, without HAProxy). */
  readonly servedBy: string[];
  close(): Promise<void>;
}

export async function fleetClient(url: string, token: string): Promise<NotingClient> {
  const servedBy: string[] = [];
  const client = new Client({ name: 'fleet-test', version: '0.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        const replica = response.headers.get('x-toolgate-replica');
        if (replica && (init?.method ?? 'GET') === 'POST' && String(init?.body).includes('tools/call')) {
          servedBy.push(replica);
        }
        return response;
      },
    }),
  );
  return { client, servedBy, close: () => client.close() };
}

export interface CuttableProxy {
  readonly url: string;
  /** Stops listening and resets every relayed connection: Redis is gone, as a client sees it. */
  cut(): Promise<void>;
}

/** A loopback TCP relay to `target` (a redis:// URL) that a test can cut. */
export async function startCuttableProxy(target: string): Promise<CuttableProxy> {
  const { hostname, port } = new URL(target);
  const live = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(port || 6379), hostname);
    for (const socket of [client, upstream]) {
      live.add(socket);
      socket
        .on('error', () => undefined)
        .on('close', () => {
          live.delete(socket);
          client.destroy();
          upstream.destroy();
        });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const address = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${address.port}`,
    async cut() {
      const closed = new Promise<void>((done) => server.close(() => done()));
      for (const socket of live) socket.resetAndDestroy();
      await closed;
    },
  };
}

import type pg from 'pg';
import type { PgPoolClientLike, PgPoolLike } from '../src/index.js';

/** A pool whose checked-out clients record the text of every statement they send: one per round trip. */
export interface CountingPool {
  readonly pool: PgPoolLike;
  readonly statements: string[];
}

/**
 * Wraps a real pg Pool. Each client is proxied once (the same proxy on every checkout, as pg hands out
 * the same client), so whatever the adapter stores on a connection stays on it, and the cancel request
 * still reads the real client's pid, key, host and port.
 */
export function countingPool(pool: pg.Pool): CountingPool {
  const statements: string[] = [];
  const proxies = new WeakMap<object, PgPoolClientLike>();
  const wrap = (client: pg.PoolClient): PgPoolClientLike => {
    let proxy = proxies.get(client);
    if (proxy === undefined) {
      proxy = new Proxy(client, {
        get(target, key) {
          if (key === 'query') {
            return (config: { text: string; values?: unknown[] }) => {
              statements.push(config.text);
              return target.query(config);
            };
          }
          const value: unknown = Reflect.get(target, key, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      }) as unknown as PgPoolClientLike;
      proxies.set(client, proxy);
    }
    return proxy;
  };
  return {
    statements,
    pool: {
      connect: async () => wrap(await pool.connect()),
      query: (text, values) => pool.query(text, values),
      get totalCount() {
        return pool.totalCount;
      },
    },
  };
}

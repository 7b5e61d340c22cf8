#!/usr/bin/env node
// `pnpm --filter @toolgate/order-service db:setup`: creates the schema and inserts the deterministic
// seed in the PostgreSQL database named by DATABASE_URL. Idempotent: run it as often as you like.
import { openDatabase, SEED_ORDERS } from './db.js';

const url = process.env.DATABASE_URL;
if (!url) {
  process.stderr.write('db:setup: set DATABASE_URL to the PostgreSQL database to prepare\n');
  process.exit(2);
}
const database = await openDatabase({ url, setup: true });
const { rows } = await database.pool!.query<{ n: number }>('SELECT count(*)::int AS n FROM orders');
await database.close();
process.stderr.write(`db:setup: schema ready, ${rows[0]!.n} orders (the seed has ${SEED_ORDERS})\n`);

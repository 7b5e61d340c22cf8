// The README's PostgreSQL example, typechecked with the package (see usage.ts).
import pg from 'pg';
import { createAudit, createPostgresSink } from '../src/index.js';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
// An idle connection that dies is reported here; with no listener, Node ends the process.
pool.on('error', () => {});
export const audit = createAudit({
  sink: createPostgresSink({ client: pool, table: 'audit.tool_calls' }),
  chainId: process.env.POD_NAME, // optional: a stable id continues one chain across restarts
});

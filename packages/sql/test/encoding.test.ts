// A database whose encoding cannot hold every character the model may send (LATIN1, a legacy ERP's
// database): PostgreSQL refuses the value (22P05), and that is the model's input, not an incident.
import { randomBytes } from 'node:crypto';
import { createSilentLogger, type ToolDefinition } from '@toolgate/core';
import { expectFailure, serveTools, type TestClient } from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgQueryable, sqlTool } from '../src/index.js';

const url = process.env.TEST_DATABASE_URL;
const NEEDS =
  'needs TEST_DATABASE_URL (a real PostgreSQL server: PGlite is UTF-8 only); not set, so the LATIN1 database test did not run';
if (url === undefined && process.env.CI === 'true') {
  throw new Error('TEST_DATABASE_URL must be set in CI: the LATIN1 database test must run on a real server');
}

if (url === undefined) {
  describe('a LATIN1 database', () => {
    it(NEEDS, (context) => {
      context.skip(NEEDS);
    });
  });
} else {
  describe('a LATIN1 database on PostgreSQL', () => {
    const name = `toolgate_latin1_${randomBytes(4).toString('hex')}`;
    let admin: pg.Client;
    let pool: pg.Pool;
    let client: TestClient;
    beforeAll(async () => {
      admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(
        `CREATE DATABASE ${name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`,
      );
      const address = new URL(url);
      address.pathname = `/${name}`;
      pool = new pg.Pool({ connectionString: address.href, max: 2 });
      // DROP DATABASE ... WITH (FORCE) ends the pool's connections that are still closing.
      pool.on('error', () => {});
      await pool.query('CREATE TABLE notes (id integer PRIMARY KEY, body text NOT NULL)');
      await pool.query("INSERT INTO notes VALUES (1, 'café au lait'), (2, 'crème brûlée')");
      const notes = sqlTool({
        name: 'search_notes',
        description: 'Search notes.',
        from: { table: 'notes' },
        columns: ['id', 'body'],
        filters: { body: { kind: 'contains', maxLength: 100, description: 'Text inside the note.' } },
        sort: { keys: { id: 'id' }, default: 'id_asc' },
        limit: { default: 10, max: 10 },
        db: pgQueryable(pool),
      }) as ToolDefinition;
      client = await serveTools([notes], { logger: createSilentLogger() });
    }, 30_000);
    afterAll(async () => {
      await client?.close();
      await pool?.end();
      await admin?.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin?.end();
    });

    it('text its encoding cannot hold is refused as the argument it is (invalid_argument), not internal', async () => {
      // What LATIN1 holds is found as usual.
      const found = await client.callTool('search_notes', { body: 'crème' });
      expect((found.structuredContent as { items: unknown[] }).items).toEqual([
        { id: 2, body: 'crème brûlée' },
      ]);
      for (const body of ['☕ coffee', 'café 😀', '咖啡']) {
        const refused = expectFailure(await client.callTool('search_notes', { body }));
        expect(refused, body).toEqual({
          ok: false,
          error: 'invalid_argument',
          message: 'An argument holds characters the data cannot store.',
          hint: 'Leave out the characters the data cannot hold (emoji, for example) and call again.',
          retryable: false,
          // The database's error is in the log under it.
          incidentId: expect.stringMatching(/^inc_/),
        });
        expect(JSON.stringify(refused)).not.toMatch(/LATIN1|notes|encoding "|0x/);
      }
    });
  });
}

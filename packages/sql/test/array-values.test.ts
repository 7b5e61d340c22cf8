// Values an answer must carry through JSON, inside array columns too. PGlite parses an int8[] to
// bigints (past 2^53) and a bytea[] to Uint8Arrays; one bigint anywhere in structuredContent made the
// answer fail to serialise, so every call whose page held such a row answered `internal` for whoever
// listed it. Item by item they get the scalar's form: an exact int8 as a number, a larger one as its
// decimal text, bytes as base64.
import type { PGlite } from '@electric-sql/pglite';
import { createSilentLogger, type ToolDefinition } from '@toolgate/core';
import { serveTools, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgliteQueryable, sqlTool } from '../src/index.js';
import { createPGlite } from './pglite.js';

describe('array columns on PGlite', () => {
  let pglite: PGlite;
  let client: TestClient;

  beforeAll(async () => {
    pglite = await createPGlite();
    await pglite.exec(`CREATE TABLE parcels (
        id integer PRIMARY KEY, codes int8[] NOT NULL, seals bytea[] NOT NULL, grid int8[][] NOT NULL);
      INSERT INTO parcels VALUES
        (1, ARRAY[7, 9007199254740993], ARRAY['\\x0102'::bytea], ARRAY[[1, -9223372036854775808]]),
        (2, ARRAY[8], ARRAY[]::bytea[], ARRAY[[2, 3]])`);
    const tool = sqlTool({
      name: 'list_parcels',
      description: 'Parcels with their codes.',
      db: pgliteQueryable(pglite),
      from: 'parcels',
      columns: ['id', 'codes', 'seals', 'grid'],
      sort: { keys: ['id'], default: 'id_asc' },
      limit: { default: 10, max: 10 },
    }) as ToolDefinition;
    client = await serveTools([tool], { logger: createSilentLogger() });
  });
  afterAll(async () => {
    await client.close();
    await pglite.close();
  });

  it('an int8[] past 2^53, a bytea[] and a two-dimensional int8[] answer as JSON, not internal', async () => {
    const result = await client.callTool('list_parcels', {});
    expect(result.isError ?? false).toBe(false);
    expect(result.structuredContent).toMatchObject({
      ok: true,
      total: 2,
      items: [
        { id: 1, codes: [7, '9007199254740993'], seals: ['AQI='], grid: [[1, '-9223372036854775808']] },
        { id: 2, codes: [8], seals: [], grid: [[2, 3]] },
      ],
    });
  });
});

// Round 25 of the secret patterns, each through a real tools/call: an XML element named like a secret,
// a SQL credential clause echoed by a failed statement, and a URL whose userinfo is a bare token. A
// handler fails with the text as an upstream, a driver or Node prints it, in its message and `_meta`;
// the boundary's redaction (core alone) must leave no `hunter2` for the model.
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { defineTool, fail, REDACTED } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';
import { upstreamFailure } from './fixtures/upstream-failure.js';

const R = REDACTED;
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

/** A tool that fails with `message`, and `meta` under `_meta['acme/upstream']`. */
const failing = (message: string, meta: Record<string, unknown>) =>
  upstreamFailure('sync_account', 'Syncs an account upstream.', message, meta);

describe('secrets core’s patterns now read, through a real tools/call', () => {
  it('an upstream SOAP fault: the text of its secret-named elements, the tags and the rest kept', async () => {
    const body =
      '<soap:Fault><faultstring>Login refused</faultstring><detail><req:Login>' +
      '<req:user>ann</req:user><req:Password>hunter2</req:Password>' +
      '<req:apiKey type="live">\n  hunter2-key\n</req:apiKey></req:Login></detail></soap:Fault>';
    client = await serveTools([failing(`Upstream fault: ${body}`, { status: 500, body })]);
    const result = await client.callTool('sync_account', {});
    const envelope = expectFailure(result);
    const redacted =
      '<soap:Fault><faultstring>Login refused</faultstring><detail><req:Login>' +
      `<req:user>ann</req:user><req:Password>${R}</req:Password>` +
      `<req:apiKey type="live">${R}</req:apiKey></req:Login></detail></soap:Fault>`;
    expect(envelope.message).toBe(`Upstream fault: ${redacted}`);
    expect(result._meta?.['acme/upstream']).toEqual({ status: 500, body: redacted });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it('a failed statement as PostgreSQL and MySQL drivers print it: the password literal, quotes kept', async () => {
    // mysql2's error for a statement cut off by a syntax error: `sqlMessage` quotes the statement's tail
    // (`near '...'`), `sql` holds the statement; pg's error echoed with the statement by a logger.
    const sqlMessage =
      "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'IDENTIFIED BY 'hun''ter2'' at line 1";
    const meta = {
      code: 'ER_PARSE_ERROR',
      errno: 1064,
      sqlMessage,
      sql: "CREATE USER 'app'@'%' IDENTIFIED WITH caching_sha2_password BY 'hun''ter2'",
      pg: 'error: role "app" does not exist\n  statement: ALTER ROLE app WITH LOGIN PASSWORD \'hunter2\';',
    };
    client = await serveTools([failing(`Query failed: ${sqlMessage}`, meta)]);
    const result = await client.callTool('sync_account', {});
    const envelope = expectFailure(result);
    const near =
      "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'IDENTIFIED BY '";
    expect(envelope.message).toBe(`Query failed: ${near}${R}`);
    expect(result._meta?.['acme/upstream']).toEqual({
      code: 'ER_PARSE_ERROR',
      errno: 1064,
      sqlMessage: `${near}${R}`,
      sql: `CREATE USER 'app'@'%' IDENTIFIED WITH caching_sha2_password BY '${R}'`,
      pg: `error: role "app" does not exist\n  statement: ALTER ROLE app WITH LOGIN PASSWORD '${R}';`,
    });
    expect(JSON.stringify(result)).not.toContain('ter2');
  });

  it('Node’s own fetch error for a URL with a bare token as its userinfo: the token goes, scheme and host stay', async () => {
    const remote = 'https://ghp_hunter2@github.com/org/repo.git';
    const tool = defineTool({
      name: 'fetch_remote',
      description: 'Fetches a remote.',
      input: { path: z.string() },
      handler: async ({ path }) => {
        try {
          await fetch(`${remote}/${path}`);
          return fail('internal', 'unexpected success');
        } catch (error) {
          const message = (error as Error).message;
          const result = fail('unavailable', message);
          result._meta = { ...result._meta, 'acme/fetch': { url: `${remote}/${path}`, message } };
          return result;
        }
      },
    });
    client = await serveTools([tool]);
    const result = await client.callTool('fetch_remote', { path: 'info/refs' });
    const envelope = expectFailure(result);
    // The real message, as Node's fetch words it, with the token cut out (the URL after `credentials:`
    // is read as a URL, not as the value of a key named like a secret).
    expect(envelope.message).toMatch(
      /credentials: https:\/\/\[REDACTED\]@github\.com\/org\/repo\.git\/info\/refs$/,
    );
    expect(result._meta?.['acme/fetch']).toEqual({
      url: `https://${R}@github.com/org/repo.git/info/refs`,
      message: envelope.message,
    });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });
});

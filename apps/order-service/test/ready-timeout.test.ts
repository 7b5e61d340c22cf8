import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { join } from 'node:path';
import { createSilentLogger } from '@toolgate/core';
import { type FaultProxy, reportMissingService, startFaultProxy } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type RunningHttpServer, startHttpServer } from '../src/http.js';
import { APP, type ChildServer, startChildServer, waitFor } from './child-server.js';
import { createScratchDatabase, type ScratchDatabase, TEST_DATABASE_URL } from './fleet-harness.js';

// A load balancer probes GET /ready every few hundred ms and reads a probe that does not answer in
// time as a failure of its own. With the database silent (a partition: neither answers nor resets),
// /ready must still answer, 503, within its bound, and a flood of probes must not become a flood of pings.

interface Answer {
  status: number;
  body: unknown;
}

function getReady(url: string): Promise<Answer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path: '/ready', method: 'GET' }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** `promise`, or a failure naming `what` after 30 s: a probe that never answers is the bug. */
async function answered<T>(what: string, promise: Promise<T>, log: () => string = () => ''): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within 30 s\n${log()}`)), 30_000);
  });
  try {
    return await Promise.race([promise, bound]);
  } finally {
    clearTimeout(timer);
  }
}

const NOT_READY: Answer = { status: 503, body: { status: 'not_ready' } };

describe('GET /ready with a readiness check that never answers', () => {
  let http: RunningHttpServer | undefined;
  afterEach(async () => {
    await http?.close(0);
    http = undefined;
  });

  it('a flood of 50 probes starts one check, and each probe reads 503 not_ready once readyTimeoutMs has run out', async () => {
    const signals: AbortSignal[] = [];
    http = await startHttpServer({
      port: 0,
      verifier: undefined,
      createServer: () => {
        throw new Error('no MCP request in this test');
      },
      // A ping on a connection that went silent: it ignores its signal and never settles.
      ready: (signal) => {
        signals.push(signal);
        return new Promise<boolean>(() => undefined);
      },
      readyTimeoutMs: 200,
      logger: createSilentLogger(),
    });
    const url = http.url;
    const flood = await answered(
      'the flood of probes',
      Promise.all(Array.from({ length: 50 }, () => getReady(url))),
    );
    expect(flood).toEqual(Array.from({ length: 50 }, () => NOT_READY));
    expect(signals).toHaveLength(1);
    expect(signals[0]!.aborted).toBe(true);
    // The next probe after the bound starts the next check (one at a time, not one per probe).
    expect(await answered('a later probe', getReady(url))).toEqual(NOT_READY);
    expect(signals).toHaveLength(2);
  });

  it('refuses a readyTimeoutMs that is not a positive integer', async () => {
    await expect(
      startHttpServer({
        port: 0,
        verifier: undefined,
        createServer: () => {
          throw new Error('unused');
        },
        readyTimeoutMs: 0,
        logger: createSilentLogger(),
      }),
    ).rejects.toThrow(/readyTimeoutMs must be a positive integer/);
  });
});

if (!TEST_DATABASE_URL) {
  reportMissingService(
    it,
    'the /ready test with PostgreSQL silent',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
}

describe.runIf(TEST_DATABASE_URL)('GET /ready of the built server with PostgreSQL silent', () => {
  let server: ChildServer | undefined;
  let proxy: FaultProxy | undefined;
  let database: ScratchDatabase | undefined;
  afterEach(async () => {
    const child = server?.child;
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await proxy?.close();
    await database?.drop();
  });

  it('answers a flood of probes 503 once TOOLGATE_READY_TIMEOUT_MS runs out, opens no connection for them, drops the silent one and reads 200 again', async () => {
    database = await createScratchDatabase(TEST_DATABASE_URL!);
    const setup = spawnSync(process.execPath, [join(APP, 'dist', 'db-setup.js')], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DATABASE_URL: database.url },
      encoding: 'utf8',
    });
    expect(setup.status, setup.stderr).toBe(0);
    const target = new URL(database.url);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const viaProxy = new URL(database.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    // Names the server's connections in pg_stat_activity.
    viaProxy.searchParams.set('application_name', 'ready-timeout-test');
    const running = startChildServer(['--http', '--insecure-no-auth', '--port', '0'], {
      DATABASE_URL: viaProxy.href,
      CARRIER_URL: 'http://127.0.0.1:9',
      TOOLGATE_READY_TIMEOUT_MS: '1000',
    });
    server = running;
    const stderr = running.stderr;
    await waitFor('the listening line', () => stderr().includes('"listening"'));
    const url = /"url":"([^"]+)"/.exec(stderr())![1]!;
    const serverConnections = async (): Promise<number> => {
      const [row] = await database!.query<{ count: number }>(
        "SELECT count(*)::int AS count FROM pg_stat_activity WHERE application_name = 'ready-timeout-test'",
      );
      return row!.count;
    };

    expect(await answered('the first probe', getReady(url), stderr)).toEqual({
      status: 200,
      body: { status: 'ready' },
    });
    // The ping's connection is idle in the pool; from now on it neither answers nor resets.
    proxy.silenceLive();
    const opened = proxy.connections;
    const flood = await answered(
      'the flood of probes',
      Promise.all(Array.from({ length: 40 }, () => getReady(url))),
      stderr,
    );
    expect(flood).toEqual(Array.from({ length: 40 }, () => NOT_READY));
    // One ping for the whole flood, on the silent connection: a ping per probe would have opened new ones.
    expect(proxy.connections - opened).toBe(0);

    // The ping's own timeout made pg drop the silent connection, so PostgreSQL sees it go and the
    // next ping opens a fresh one: /ready recovers instead of waiting behind a ping that never ends.
    let answer = NOT_READY;
    for (let probe = 0; probe < 10 && answer.status !== 200; probe += 1) {
      answer = await answered('a probe after the flood', getReady(url), stderr);
    }
    expect(answer).toEqual({ status: 200, body: { status: 'ready' } });
    let connections = await serverConnections();
    for (let poll = 0; poll < 100 && connections !== 1; poll += 1) {
      await new Promise((done) => setTimeout(done, 100));
      connections = await serverConnections();
    }
    expect(connections).toBe(1);
  }, 120_000);
});

// A DNS server that never answers must not hold a call past its deadline, nor let the calls of a
// model take libuv's threads from the rest of the server. The DNS servers here are real (UDP on
// loopback, reading and dropping every query); nothing leaves the machine.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { pbkdf2 } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, defineTool, ok, registerTools } from '@toolgate/core';
import { connectTestClient, expectFailure, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  createDnsResolver,
  createLookupResolver,
  createUrlGuard,
  createUrlPolicy,
  type UrlPolicy,
} from '../src/index.js';
import { boundLookups } from '../src/lookup-resolver.js';
import { type BlackHoleDns, startBlackHoleDns } from './support/black-hole-dns.js';
import { RCODE, startRcodeDns } from './support/rcode-dns.js';

let client: TestClient | undefined;
let dns: BlackHoleDns | undefined;
afterEach(async () => {
  await client?.close();
  await dns?.close();
  client = undefined;
  dns = undefined;
});

/** A tool whose `urls` argument the guard checks before the handler runs. */
async function serve(policy: UrlPolicy): Promise<TestClient> {
  const fetchPages = defineTool({
    name: 'fetch_pages',
    description: 'Fetch pages from the carrier.',
    input: { urls: z.array(z.string()) },
    middleware: [createUrlGuard({ paths: 'urls[]', policy })],
    handler: (_args, ctx) => ok({ checked: Object.keys(ctx.state.checkedUrls ?? {}) }),
  });
  const server = new McpServer({ name: 'dns-stall', version: '1.0.0' });
  registerTools(server, [fetchPages], { logger: createSilentLogger() });
  client = await connectTestClient(server);
  return client;
}

const TIMEOUT_HINT =
  'The host name did not resolve in time; try again later, and if it keeps failing, tell the user.';

describe('createDnsResolver against a DNS server that never answers', () => {
  it('answers timeout at the call deadline while the query is still outstanding', async () => {
    dns = await startBlackHoleDns();
    const resolve = createDnsResolver({ servers: [`127.0.0.1:${dns.port}`], timeoutMs: 1500, tries: 1 });
    const events: string[] = [];
    let query: Promise<unknown> | undefined;
    const policy = createUrlPolicy({
      allow: ['*.stuck.test'],
      timeoutMs: 100,
      resolve: (hostname) => {
        const answers = resolve(hostname);
        query = answers.then(
          () => events.push('dns answered'),
          () => events.push('dns gave up'),
        );
        return answers;
      },
    });
    const c = await serve(policy);
    const envelope = expectFailure(await c.callTool('fetch_pages', { urls: ['https://a.stuck.test/'] }));
    events.push('call answered');
    expect(envelope).toEqual({
      ok: false,
      error: 'timeout',
      message: 'Argument urls[0]: Resolving a.stuck.test took longer than 100 ms.',
      hint: TIMEOUT_HINT,
      retryable: true,
    });
    expect(dns.names).toEqual(['a.stuck.test']);
    await query;
    expect(events).toEqual(['call answered', 'dns gave up']);
  });

  it('answers unavailable when the queries time out before the call does', async () => {
    dns = await startBlackHoleDns();
    const policy = createUrlPolicy({
      allow: ['*.stuck.test'],
      timeoutMs: 30_000,
      resolve: createDnsResolver({ servers: [`127.0.0.1:${dns.port}`], timeoutMs: 50, tries: 1 }),
    });
    const c = await serve(policy);
    const envelope = expectFailure(await c.callTool('fetch_pages', { urls: ['https://b.stuck.test/'] }));
    expect(envelope).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'Argument urls[0]: Host b.stuck.test could not be resolved.',
      hint: 'Check the host name for typos; if it is right, the service may be down: tell the user.',
      retryable: true,
    });
    expect(dns.names).toEqual(['b.stuck.test']);
  });

  it('refuses a malformed server address when created', () => {
    expect(() => createDnsResolver({ servers: ['not an address'] })).toThrow(TypeError);
    expect(() => createDnsResolver({ tries: 0 })).toThrow('createDnsResolver: tries must be an integer >= 1');
  });
});

/**
 * A stand-in for getaddrinfo that really holds a libuv thread: open(2) of a FIFO blocks on the
 * pool until something opens the other end. (getaddrinfo itself reads /etc/resolv.conf, which a
 * test process cannot point at loopback: the namespace test below does that.)
 */
function threadHoldingLookups() {
  const fifo = join(mkdtempSync(join(tmpdir(), 'url-allowlist-')), 'dns.fifo');
  execFileSync('mkfifo', [fifo]);
  const started: string[] = [];
  const finished: Promise<void>[] = [];
  let writer: number | undefined;
  const raw = (hostname: string): Promise<readonly string[]> => {
    started.push(hostname);
    const lookup = open(fifo, 'r').then((handle) => handle.close());
    finished.push(lookup);
    return lookup.then(() => {
      throw Object.assign(new Error(`getaddrinfo EAI_AGAIN ${hostname}`), { code: 'EAI_AGAIN' });
    });
  };
  return {
    raw,
    started,
    /** Lets every blocked open return (O_RDWR on a FIFO never blocks and wakes the readers). */
    release: async (): Promise<void> => {
      writer ??= openSync(fifo, 'r+');
      await Promise.all(finished);
    },
    close: (): void => {
      if (writer !== undefined) closeSync(writer);
    },
  };
}

const poolWork = (): Promise<unknown> =>
  Promise.all([
    promisify(pbkdf2)('secret', 'salt', 1, 32, 'sha256'),
    promisify(pbkdf2)('secret', 'salt', 1, 32, 'sha256'),
    readFile(fileURLToPath(import.meta.url)),
  ]);

describe('the default resolver bounds lookups in flight', () => {
  it('holds at most maxConcurrent threads while lookups hang; waiting ones answer timeout and never start', async () => {
    const lookups = threadHoldingLookups();
    try {
      const policy = createUrlPolicy({
        allow: ['*.stuck.test'],
        timeoutMs: 100,
        resolve: boundLookups(lookups.raw, { maxConcurrent: 1, maxWaiting: 64 }),
      });
      const c = await serve(policy);
      const urls = [1, 2, 3, 4, 5, 6].map((n) => `https://n${n}.stuck.test/`);
      const envelope = expectFailure(await c.callTool('fetch_pages', { urls }));
      const events = ['call answered'];
      expect(envelope).toEqual({
        ok: false,
        error: 'timeout',
        message: 'Argument urls[0]: Resolving n1.stuck.test took longer than 100 ms.',
        hint: TIMEOUT_HINT,
        retryable: true,
      });
      // The pool still has threads: this work finishes while n1's lookup still hangs. (Should it not,
      // the lookups are released after a while, so a failure shows as an order, not a hang.)
      const fallback = setTimeout(() => {
        events.push('lookups released');
        void lookups.release();
      }, 3000);
      await poolWork();
      clearTimeout(fallback);
      events.push('pool work done');
      expect(events).toEqual(['call answered', 'pool work done']);
      await lookups.release();
      expect(lookups.started).toEqual(['n1.stuck.test']);
    } finally {
      lookups.close();
    }
  });

  it('lets lookups of one name share a single lookup', async () => {
    const started: string[] = [];
    const policy = createUrlPolicy({
      allow: ['*.stuck.test'],
      allowPrivate: ['127.0.0.1'],
      resolve: boundLookups(
        async (hostname) => {
          started.push(hostname);
          await new Promise((resolve) => setImmediate(resolve));
          return ['127.0.0.1'];
        },
        { maxConcurrent: 1, maxWaiting: 64 },
      ),
    });
    const c = await serve(policy);
    const urls = ['https://n1.stuck.test/a', 'https://n1.stuck.test/b', 'https://n1.stuck.test/c'];
    const result = await c.callTool('fetch_pages', { urls });
    expect(result.structuredContent).toEqual({ ok: true, checked: ['urls[0]', 'urls[1]', 'urls[2]'] });
    expect(started).toEqual(['n1.stuck.test']);
  });

  it('answers unavailable at once when maxWaiting names already wait', async () => {
    let first: () => void = () => undefined;
    const firstStarted = new Promise<void>((resolve) => {
      first = resolve;
    });
    const started: string[] = [];
    const policy = createUrlPolicy({
      allow: ['*.stuck.test'],
      timeoutMs: 300,
      resolve: boundLookups(
        (hostname) => {
          started.push(hostname);
          first();
          return new Promise(() => undefined);
        },
        { maxConcurrent: 1, maxWaiting: 1 },
      ),
    });
    const c = await serve(policy);
    const events: string[] = [];
    // n1 takes the one slot and n2 the one place in the queue, in the same turn.
    const stuck = c
      .callTool('fetch_pages', { urls: ['https://n1.stuck.test/', 'https://n2.stuck.test/'] })
      .then((result) => {
        events.push('stuck call answered');
        return expectFailure(result);
      });
    await firstStarted;
    const refused = expectFailure(await c.callTool('fetch_pages', { urls: ['https://n3.stuck.test/'] }));
    events.push('third call answered');
    expect(refused).toEqual({
      ok: false,
      error: 'unavailable',
      message:
        'Argument urls[0]: Host n3.stuck.test could not be resolved now: too many lookups are waiting.',
      hint: 'Try again in a few seconds, with fewer URLs at once; if it keeps failing, tell the user.',
      retryable: true,
    });
    expect((await stuck).error).toBe('timeout');
    expect(events).toEqual(['third call answered', 'stuck call answered']);
    expect(started).toEqual(['n1.stuck.test']);
  });

  it('refuses bounds that are not positive integers', () => {
    expect(() => createLookupResolver({ maxConcurrent: 0 })).toThrow(
      'createLookupResolver: maxConcurrent must be an integer >= 1',
    );
    expect(() => createLookupResolver({ maxWaiting: 1.5 })).toThrow(
      'createLookupResolver: maxWaiting must be an integer >= 1',
    );
  });
});

// The real thing: getaddrinfo on libuv's pool, reading a resolv.conf that names a DNS server on
// loopback that never answers. Needs network and mount namespaces (root, or unprivileged user
// namespaces); CI runs as root.
const namespaces = spawnSync('unshare', ['-rmn', 'true']).status === 0;
const NEEDS_NAMESPACES =
  'needs unshare -rmn (user, mount and network namespaces): the real getaddrinfo test did not run';

describe('the default resolver with the OS resolver stuck (own namespaces)', () => {
  if (!namespaces) {
    it(NEEDS_NAMESPACES, (context) => {
      if (process.env.CI === 'true') throw new Error(`${NEEDS_NAMESPACES}; CI=true requires it`);
      context.skip(NEEDS_NAMESPACES);
    });
    return;
  }

  it('keeps one lookup in flight; the rest of the process still resolves and uses the pool', async () => {
    const resolvConf = join(mkdtempSync(join(tmpdir(), 'url-allowlist-')), 'resolv.conf');
    writeFileSync(resolvConf, 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n');
    const script = 'ip link set lo up && mount --bind "$0" /etc/resolv.conf && exec "$1" --import tsx "$2"';
    const child = spawn(
      'unshare',
      [
        '-rmn',
        'sh',
        '-c',
        script,
        resolvConf,
        process.execPath,
        fileURLToPath(new URL('fixtures/stalled-getaddrinfo.ts', import.meta.url)),
      ],
      {
        cwd: fileURLToPath(new URL('..', import.meta.url)),
        env: { ...process.env, UV_THREADPOOL_SIZE: '4' },
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(stdout)).toEqual({
      events: [
        'dns server asked for n1.stuck.test',
        `checks answered: ${Array(6).fill('timeout/timeout').join(' ')}`,
        'localhost resolved',
        'pool work done',
        'dns server asked for n7.stuck.test',
      ],
      // n2..n6 gave up while waiting and never reached getaddrinfo; n7 got n1's slot once it came back.
      asked: ['n1.stuck.test', 'n7.stuck.test'],
    });
  }, 30_000);
});

describe('createDnsResolver: a name DNS says does not exist, against a server that fails', () => {
  it('NXDOMAIN is not_found (the model named it: a breaker must not count it); SERVFAIL stays unavailable', async () => {
    const server = await startRcodeDns((name) =>
      name === 'broken.carrier.test' ? RCODE.SERVFAIL : RCODE.NXDOMAIN,
    );
    try {
      const resolve = createDnsResolver({ servers: [`127.0.0.1:${server.port}`], timeoutMs: 1000, tries: 1 });
      const policy = createUrlPolicy({
        allow: ['*.carrier.test'],
        schemes: ['http'],
        resolve,
        timeoutMs: 5000,
      });
      const tools = await serve(policy);
      const invented = await tools.callTool('fetch_pages', { urls: ['http://invented-4711.carrier.test/'] });
      expect(expectFailure(invented)).toEqual({
        ok: false,
        error: 'not_found',
        message: 'Argument urls[0]: Host invented-4711.carrier.test does not exist.',
        hint: 'Check the host name for typos. Do not retry the same name.',
        retryable: false,
      });
      const failing = await tools.callTool('fetch_pages', { urls: ['http://broken.carrier.test/'] });
      expect(expectFailure(failing)).toMatchObject({
        error: 'unavailable',
        message: 'Argument urls[0]: Host broken.carrier.test could not be resolved.',
      });
      expect(JSON.stringify([invented, failing])).not.toMatch(/ENOTFOUND|ESERVFAIL|127\.0\.0\.1|queryA/);
    } finally {
      await server.close();
    }
  });
});

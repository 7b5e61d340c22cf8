// Failures that quote another program's words: a libpq client's stderr (pg_dump here; psql, psycopg and
// Go's pgx print the same line), Node's connect error for a zoned IPv6 address, a Java service's error
// body, the tail of a child's stderr. Each is real (a real process, socket or loopback HTTP exchange)
// and goes through a real `tools/call`; the model must see none of the internals it names.
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { hostname } from 'node:os';
import { promisify } from 'node:util';
import { defineTool, fail } from '@toolgate/core';
import { recordingLogger } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { closeAll, closedPort, rejection, seenEnvelope, serve } from './helpers.js';

const execFileAsync = promisify(execFile);

afterEach(closeAll);

describe('a libpq client that could not connect', () => {
  // libpq writes the host it was given in quotes, the address it resolved to, and the port:
  // `connection to server at "db-primary" (10.0.0.5), port 5432 failed`. This machine's own name
  // stands in for an internal one without dots (it resolves to this machine, so nothing leaves it).
  const HOST = hostname();
  let port: number;
  let stderr: string;
  let source: string;
  beforeAll(async () => {
    port = await closedPort();
    const run = await rejection(() =>
      execFileAsync('pg_dump', ['-w', '-h', HOST, '-p', String(port), '-U', 'backup', 'orders'], {
        env: { ...process.env, PGCONNECT_TIMEOUT: '5' },
      }),
    );
    const real = (run as { stderr?: string }).stderr ?? '';
    if (real.includes(`connection to server at "${HOST}"`)) {
      stderr = real;
      source = 'real pg_dump';
    } else {
      // No pg_dump here, or this machine's name does not resolve: the line as libpq 15 prints it.
      stderr = `pg_dump: error: connection to server at "${HOST}" (127.0.0.1), port ${port} failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?\n`;
      source = 'libpq 15 text (no pg_dump, or the host name does not resolve)';
    }
  });

  const backup = defineTool({
    name: 'backup_orders',
    description: 'Dumps the orders database.',
    input: {},
    handler: () => fail('unavailable', `backup failed: ${stderr.trim()}`),
  });

  it('pg_dump refused: the host name, its address and the port never reach the model', async () => {
    const client = await serve([backup], [createRedactErrors()], recordingLogger([]));
    const envelope = seenEnvelope(await client.callTool('backup_orders', {}));
    expect(envelope.message, source).toBe(
      'backup failed: pg_dump: error: connection to server at [host], port [host] failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?',
    );
  });

  it('the same line from psycopg, with an IPv6 address and a refused login: nothing of the server', async () => {
    const text =
      'connection to server at "pay-db" (fd00:10::5), port 6432 failed: FATAL:  password authentication failed for user "payments"';
    const quoted = defineTool({
      name: 'quoted',
      description: 'Fails with what a libpq client printed.',
      input: {},
      handler: () => fail('unavailable', text),
    });
    const client = await serve([quoted], [createRedactErrors()], recordingLogger([]));
    expect(seenEnvelope(await client.callTool('quoted', {})).message).toBe(
      'connection to server at [host], port [host] failed: FATAL:  password authentication failed for user [name]',
    );
  });
});

describe('Node’s connect error for a zoned IPv6 address', () => {
  it('connect to fe80::1%lo: neither the address, the interface nor the port reaches the model', async () => {
    const port = await closedPort();
    // Scoped to the loopback interface: the attempt cannot leave this machine.
    const error = await new Promise<Error>((resolve) => {
      connect({ host: 'fe80::1%lo', port }).on('error', resolve);
    });
    expect(error.message).toMatch(new RegExp(`^connect E[A-Z]+ fe80::1%lo:${port}\\b`));
    const cache = defineTool({
      name: 'cache_get',
      description: 'Reads a cached order.',
      input: {},
      handler: () => fail('unavailable', `cache unreachable: ${error.message}`),
    });
    const client = await serve([cache], [createRedactErrors()], recordingLogger([]));
    const { message } = seenEnvelope(await client.callTool('cache_get', {}));
    expect(message).toMatch(/^cache unreachable: connect E[A-Z]+ \[host\](?: - Local \(:::0\))?$/);
  });
});

describe('a Java service’s error body', () => {
  // What a Spring Boot service answers with a 500 when its data source or config fails: the JDBC URL
  // (DriverManager echoes it verbatim, credentials included) and `file:` URLs with one slash, as
  // Java's `File.toURI()` and class-path resources write them.
  const MESSAGES: Record<string, string> = {
    oracle:
      'Failed to obtain JDBC Connection: No suitable driver found for jdbc:oracle:thin:orders_app/Tiger-Pw-77@ora-prod-1:1521:ORDERS',
    sqlite: 'No suitable driver found for jdbc:sqlite:/opt/orders/data/orders.db',
    config: "Failed to load property source from location 'file:/opt/orders/config/application-prod.yml'",
    jar: 'Could not read class path resource [jar:file:/opt/orders/orders-api.jar!/BOOT-INF/classes!/application.yml]',
  };
  let java: Server;
  let base: string;
  beforeAll(async () => {
    java = createServer((request, response) => {
      const message = MESSAGES[(request.url ?? '').slice(1)] ?? 'not found';
      response.writeHead(500, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          timestamp: '2026-12-06T03:00:00.000+00:00',
          status: 500,
          error: 'Internal Server Error',
          message,
          path: '/orders/42',
        }),
      );
    });
    await new Promise<void>((resolve) => java.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(java.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => java.close(() => resolve()));
  });

  const orders = defineTool({
    name: 'get_order',
    description: 'Reads an order from the orders service.',
    input: { failure: z.string() },
    handler: async ({ failure }) => {
      const response = await fetch(`${base}/${failure}`);
      const body = (await response.json()) as { message: string };
      return fail('unavailable', `orders service answered ${response.status}: ${body.message}`);
    },
  });

  it.each([
    [
      'oracle',
      'orders service answered 500: Failed to obtain JDBC Connection: No suitable driver found for [connection]',
    ],
    ['sqlite', 'orders service answered 500: No suitable driver found for [connection]'],
    ['config', "orders service answered 500: Failed to load property source from location '[path]'"],
    ['jar', 'orders service answered 500: Could not read class path resource [jar:[path]'],
  ])('%s: the model reads what failed, not where', async (failure, expected) => {
    const client = await serve([orders], [createRedactErrors()], recordingLogger([]));
    const { message } = seenEnvelope(await client.callTool('get_order', { failure }));
    expect(message).toBe(expected);
    for (const leak of ['Tiger-Pw-77', 'orders_app', 'ora-prod-1', '/opt/orders']) {
      expect(message).not.toContain(leak);
    }
  });
});

describe('the tail of a child’s stderr', () => {
  // A careless handler quotes the last few hundred characters of a failed command's stderr. When the
  // command printed a private key, the tail starts inside its body: no BEGIN line for the key rule,
  // and the first line the cut left is no `MII…` line either.
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const bodyLines = privateKey.trim().split('\n').slice(1, -1);
  const render = defineTool({
    name: 'install_certificate',
    description: 'Installs the TLS bundle.',
    input: {},
    handler: async () => {
      const script =
        'process.stderr.write("rendered bundle:\\n" + process.env.BUNDLE_KEY + "error: key does not match certificate\\n"); process.exit(1);';
      const run = await rejection(() =>
        execFileAsync(process.execPath, ['-e', script], { env: { BUNDLE_KEY: privateKey } }),
      );
      const stderr = (run as { stderr: string }).stderr;
      return fail('internal', `install failed: ...${stderr.slice(-700)}`);
    },
  });

  it('a key body cut from its BEGIN line: no line of it reaches the model', async () => {
    const client = await serve([render], [createRedactErrors()], recordingLogger([]));
    const { message } = seenEnvelope(await client.callTool('install_certificate', {}));
    expect(message).toBe('install failed: ...[REDACTED]\nerror: key does not match certificate\n');
    for (const line of bodyLines) expect(message).not.toContain(line.slice(-24));
  });
});

describe('a path or host right after a colon or an `@`', () => {
  // OpenSSL prints where in its sources an error was raised right after a colon, with no space:
  // `...:No such file or directory:../crypto/bio/bss_file.c:67:calling fopen(/srv/..., r)`. The path
  // rules did not start a path after a colon (URLs were thought to need it), so the build tree's
  // paths reached the model, and so would any `key:/srv/app/...` or `host:/srv/data`.
  let stderr: string;
  let source: string;
  beforeAll(async () => {
    const missing = '/srv/orders/tls/ca-bundle.pem';
    const run = await rejection(() => execFileAsync('openssl', ['x509', '-noout', '-in', missing]));
    const real = (run as { stderr?: string }).stderr ?? '';
    if (real.includes('.c:')) {
      stderr = real;
      source = 'real openssl';
    } else {
      // No openssl here: the lines as OpenSSL 3.0 on Debian prints them.
      stderr = `Could not open file or uri for loading certificate from ${missing}\n4077C9E9E57F0000:error:16000069:STORE routines:ossl_store_get0_loader_int:unregistered scheme:../crypto/store/store_register.c:237:scheme=file\n4077C9E9E57F0000:error:80000002:system library:file_open:No such file or directory:../providers/implementations/storemgmt/file_store.c:266:calling stat(${missing})\nUnable to load certificate\n`;
      source = 'OpenSSL 3.0 text (no openssl)';
    }
  });

  it('openssl could not read a certificate: no source path of the build reaches the model', async () => {
    const tls = defineTool({
      name: 'check_certificate',
      description: 'Checks the TLS bundle.',
      input: {},
      handler: () => fail('unavailable', `certificate check failed: ${stderr.trim()}`),
    });
    const client = await serve([tls], [createRedactErrors()], recordingLogger([]));
    const { message } = seenEnvelope(await client.callTool('check_certificate', {}));
    for (const leak of ['/srv/orders', 'crypto/', 'store_register.c', 'file_store.c', 'providers/']) {
      expect(message, source).not.toContain(leak);
    }
    expect(message, source).toContain(':[path]:');
  });

  it('ssh, scp and rsync targets (`user@host`, `host:/path`) and a key:/path pair: nothing of them', async () => {
    const lines = [
      // OpenSSH's refusal after authentication (as git push and pull over ssh print it too).
      'git@gitlab.corp.internal: Permission denied (publickey).',
      // A handler quoting the command that failed.
      'scp deploy@db-primary.corp.internal:/srv/exports/orders.csv failed',
      'rsync to backup@vault.svc.cluster.local:/var/backups/orders failed',
      'cannot read config:/srv/orders/config/prod.yml',
      'replica app@pg-replica-2:5432 is down',
    ];
    const remote = defineTool({
      name: 'export_orders',
      description: 'Exports orders to the backup host.',
      input: {},
      handler: () => fail('unavailable', lines.join('\n')),
    });
    const client = await serve([remote], [createRedactErrors()], recordingLogger([]));
    const { message } = seenEnvelope(await client.callTool('export_orders', {}));
    expect(message).toBe(
      [
        'git@[host]: Permission denied (publickey).',
        'scp deploy@[host]:[path] failed',
        'rsync to backup@[host]:[path] failed',
        'cannot read config:[path]',
        'replica app@[host] is down',
      ].join('\n'),
    );
  });

  it('an e-mail address under a public domain stays; a ratio or a time with a slash stays', async () => {
    const text =
      'No account for ann@example.com (noreply@acme.com: mailbox full); window 10:00/12:00, ratio 3:2/4.5.';
    const mail = defineTool({
      name: 'notify',
      description: 'Mails a customer.',
      input: {},
      handler: () => fail('not_found', text),
    });
    const client = await serve([mail], [createRedactErrors()], recordingLogger([]));
    expect(seenEnvelope(await client.callTool('notify', {})).message).toBe(text);
  });
});

describe('libpq 13 and older (psycopg2 wheels, long-term distributions)', () => {
  it('`Is the server running on host "db-primary" (10.0.0.5) ... on port 5432?`: no host, address or port', async () => {
    const text =
      'could not connect to server: Connection refused\n\tIs the server running on host "pay-db-primary" (10.20.0.5) and accepting\n\tTCP/IP connections on port 6432?';
    const quoted = defineTool({
      name: 'payments',
      description: 'Reads payments.',
      input: {},
      handler: () => fail('unavailable', text),
    });
    const client = await serve([quoted], [createRedactErrors()], recordingLogger([]));
    expect(seenEnvelope(await client.callTool('payments', {})).message).toBe(
      'could not connect to server: Connection refused\n\tIs the server running on host [host] ([host]) and accepting\n\tTCP/IP connections on port [host]?',
    );
  });
});

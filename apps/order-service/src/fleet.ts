#!/usr/bin/env node
// A fleet on one machine: N order-service replicas (stateless Streamable HTTP) behind HAProxy, sharing
// PostgreSQL (orders and audit, one chain per replica) and Redis (every piece of policy state). For
// demos, tests and capacity measurements on loopback; production runs the same pieces on real hosts.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { openDatabase } from './db.js';

const APP_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export interface FleetOptions {
  /** How many replicas. @default 3 */
  replicas?: number;
  /** The port HAProxy listens on (127.0.0.1). @default a free port */
  port?: number;
  /** PostgreSQL for orders and audit. Required: a fleet shares one database. */
  databaseUrl: string;
  /** Redis for shared policy state. Required: a fleet shares one policy state. */
  redisUrl: string;
  /** Token configuration (JSON text, as TOOLGATE_TOKENS). */
  tokens: string;
  /** Extra environment for every replica (e.g. OTEL_EXPORTER_OTLP_ENDPOINT). @default {} */
  env?: Record<string, string>;
  /** HMAC key of two-step confirmations, the same on every replica (a confirmation minted on one is
   * accepted on another). @default 32 random bytes per fleet */
  confirmSecret?: string;
  /** Replicas release an answer only after its audit record is stored (TOOLGATE_DURABLE_AUDIT=1). @default false */
  durableAudit?: boolean;
  /** Create the schema and seed (as `db:setup`) once before the replicas start. @default true */
  setupDatabase?: boolean;
  /** Where replica and HAProxy logs go. @default 'ignore' */
  stderr?: 'inherit' | 'ignore';
  /** The haproxy binary. @default 'haproxy' */
  haproxy?: string;
}

export interface Replica {
  /** Its audit chain id and HAProxy server name (`replica-1`...). */
  readonly id: string;
  readonly port: number;
  /** Its own MCP endpoint, bypassing HAProxy. */
  readonly url: string;
  process: ChildProcess;
}

export interface Fleet {
  /** The load balancer's MCP endpoint; every answer carries `x-toolgate-replica: <id>` of the replica that served it. */
  readonly url: string;
  readonly replicas: readonly Replica[];
  /** kill -9 one replica (HAProxy's health check then routes around it). */
  kill(index: number, signal?: NodeJS.Signals): Promise<void>;
  /** SIGTERM every replica (each drains), then stops HAProxy. */
  stop(): Promise<void>;
}

/**
 * Prepares the database once (schema and seed), starts the replicas, then HAProxy in front of them, and
 * waits until the balancer answers /ready. Whatever started is stopped again when a step fails.
 */
export async function startFleet(options: FleetOptions): Promise<Fleet> {
  const count = options.replicas ?? 3;
  if (!(Number.isInteger(count) && count >= 1 && count <= 16))
    throw new RangeError('replicas must be 1 to 16');
  if (options.setupDatabase ?? true) {
    // Once, before any replica: N replicas creating one schema at the same moment would race.
    const database = await openDatabase({ url: options.databaseUrl, setup: true });
    await database.close();
  }
  const stdio: ['ignore', 'ignore', 'inherit' | 'ignore'] = ['ignore', 'ignore', options.stderr ?? 'ignore'];
  const confirmSecret = options.confirmSecret ?? randomBytes(32).toString('base64url');
  const replicas: Replica[] = [];
  let haproxy: ChildProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'toolgate-fleet-'));
  const stopAll = async (): Promise<void> => {
    await Promise.all(replicas.map((replica) => stopProcess(replica.process, 'SIGTERM')));
    if (haproxy) await stopProcess(haproxy, 'SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let index = 0; index < count; index++) {
      const port = await freePort();
      const id = `replica-${index + 1}`;
      const child = spawn(
        process.execPath,
        [join(APP_DIR, 'dist', 'main.js'), '--http', '--port', String(port)],
        {
          stdio,
          env: {
            ...process.env,
            ...options.env,
            DATABASE_URL: options.databaseUrl,
            REDIS_URL: options.redisUrl,
            AUDIT_DATABASE_URL: options.databaseUrl,
            TOOLGATE_REPLICA_ID: id,
            TOOLGATE_TOKENS: options.tokens,
            TOOLGATE_CONFIRM_SECRET: confirmSecret,
            TOOLGATE_DURABLE_AUDIT: options.durableAudit ? '1' : '',
            TOOLGATE_ALLOWED_HOSTS: '',
          },
        },
      );
      replicas.push({ id, port, url: `http://127.0.0.1:${port}/mcp`, process: child });
    }
    await Promise.all(
      replicas.map((replica) =>
        waitReady(`http://127.0.0.1:${replica.port}/ready`, 60_000, replica.process, replica.id),
      ),
    );
    const port = options.port ?? (await freePort());
    const config = join(dir, 'haproxy.cfg');
    writeFileSync(config, haproxyConfig(port, replicas));
    haproxy = spawn(options.haproxy ?? 'haproxy', ['-db', '-f', config], { stdio });
    const url = `http://127.0.0.1:${port}`;
    await waitReady(`${url}/ready`, 20_000, haproxy, 'haproxy');
    return {
      url: `${url}/mcp`,
      replicas,
      kill: (index, signal = 'SIGKILL') => stopProcess(replicas[index]!.process, signal),
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

async function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  child.kill(signal);
  await exited;
}

/** Whether `binary` runs (`haproxy -v`). */
export function haproxyAvailable(binary = 'haproxy'): boolean {
  return spawnSync(binary, ['-v'], { stdio: 'ignore' }).status === 0;
}

/**
 * HAProxy in front of the replicas: round robin, a health check on /ready every 500 ms (a replica that
 * dies or drains leaves within a second), and a retry on another replica only when the connection
 * failed (the request never reached a replica, so a write cannot run twice).
 */
export function haproxyConfig(port: number, replicas: readonly Pick<Replica, 'id' | 'port'>[]): string {
  return [
    'global',
    '  maxconn 4096',
    'defaults',
    '  mode http',
    '  timeout connect 1s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  retries 2',
    '  option redispatch',
    '  retry-on conn-failure',
    'frontend mcp',
    `  bind 127.0.0.1:${port}`,
    '  default_backend replicas',
    // Which replica answered, for tests and debugging (a server name, nothing secret).
    '  http-response set-header x-toolgate-replica %s',
    'backend replicas',
    '  balance roundrobin',
    '  option httpchk GET /ready',
    '  http-check expect status 200',
    '  default-server inter 500ms fall 2 rise 1',
    ...replicas.map((replica) => `  server ${replica.id} 127.0.0.1:${replica.port} check`),
    '',
  ].join('\n');
}

async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => done(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function waitReady(url: string, timeoutMs: number, child: ChildProcess, name: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before it was ready`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} was not ready within ${timeoutMs} ms`);
    await new Promise((done) => setTimeout(done, 200));
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      replicas: { type: 'string', default: '3' },
      port: { type: 'string', default: '8080' },
      'durable-audit': { type: 'boolean', default: false },
    },
  });
  if (!haproxyAvailable()) {
    // The one system package the fleet needs; as root (CI, containers) install it, else say how.
    if (process.getuid?.() !== 0) {
      process.stderr.write('fleet: haproxy is not installed: sudo apt-get install -y haproxy\n');
      process.exit(2);
    }
    process.stderr.write('fleet: installing haproxy (apt-get install -y haproxy)\n');
    const installed = spawnSync('apt-get', ['install', '-y', 'haproxy'], { stdio: ['ignore', 2, 2] });
    if (installed.status !== 0 || !haproxyAvailable()) {
      process.stderr.write('fleet: apt-get install -y haproxy failed\n');
      process.exit(2);
    }
  }
  const databaseUrl = process.env.DATABASE_URL;
  const redisUrl = process.env.REDIS_URL;
  const tokens = process.env.TOOLGATE_TOKENS;
  if (!databaseUrl || !redisUrl || !tokens) {
    process.stderr.write('fleet: set DATABASE_URL, REDIS_URL and TOOLGATE_TOKENS (see the README)\n');
    process.exit(2);
  }
  const fleet = await startFleet({
    replicas: Number(values.replicas),
    port: Number(values.port),
    databaseUrl,
    redisUrl,
    tokens,
    durableAudit: values['durable-audit'],
    ...(process.env.TOOLGATE_CONFIRM_SECRET ? { confirmSecret: process.env.TOOLGATE_CONFIRM_SECRET } : {}),
    stderr: 'inherit',
    env: process.env.OTEL_EXPORTER_OTLP_ENDPOINT
      ? { OTEL_EXPORTER_OTLP_ENDPOINT: process.env.OTEL_EXPORTER_OTLP_ENDPOINT }
      : {},
  });
  process.stderr.write(`fleet: ${fleet.replicas.length} replicas behind ${fleet.url}\n`);
  for (const replica of fleet.replicas) process.stderr.write(`fleet: ${replica.id} at ${replica.url}\n`);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void fleet.stop().then(() => process.exit(0)));
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`fleet failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}

/**
 * Test helpers for policies on Redis: a redis-server of the test's own (a primary, or a replica of one),
 * and a flood that runs it out of memory. `maxmemory` is server-wide, so a test of a full Redis starts its
 * own server and the shared one (and every other test using it) never runs full. Needs `redis-server` on PATH.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { createSilentLogger, type Logger } from '@toolgate/core';
import type { Redis } from 'ioredis';
import { createRedisClient, redisReady } from './redis-client.js';
import { createRedisStore } from './redis-store.js';

/** A redis-server this process started, on a free loopback port. */
export interface OwnRedisServer {
  /** `redis://127.0.0.1:<port>`. */
  url: string;
  /** The loopback port it listens on. */
  port: number;
  /** A client made with `createRedisClient` (connected and ready). */
  client: Redis;
  /**
   * Stops the server's process (SIGSTOP): it keeps its connections and answers nothing, as a stalled
   * replica does; its primary still counts it as connected.
   */
  pause(): void;
  /** Lets a paused server run again (SIGCONT); a replica resolves once it has caught up with its primary. */
  resume(): Promise<void>;
  /** Disconnects the client and kills the server (SIGKILL: nothing of it is kept). */
  close(): Promise<void>;
}

export interface OwnRedisOptions {
  /** Redis's `maxmemory` (default `'3mb'`, with `noeviction`: writes past it are refused, nothing evicted). */
  maxmemory?: string;
  /** The client's logger (default: drops every entry; the server is killed under it at close). */
  logger?: Logger;
  /** How long to wait for the server to answer, and a replica for its link (default 10,000 ms). */
  readyTimeoutMs?: number;
  /**
   * Starts it as a replica of this server (`--replicaof`), resolved once its link to the primary is up
   * and the primary counts it (`INFO replication`). Default: a primary.
   */
  replicaOf?: OwnRedisServer;
}

/** A free loopback port (the OS picks it; the probe closes before redis-server binds it). */
async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as { port: number };
  probe.close();
  await once(probe, 'close');
  return port;
}

/**
 * Starts `redis-server` on a free loopback port with no persistence and `maxmemory-policy noeviction`,
 * and resolves once a client made for it answers (a replica: once its link is up). Rejects (and kills the
 * server) if it cannot start. Replication is diskless both ways (nothing is written to the working
 * directory; any file would go to the OS's temporary directory) and starts at once.
 */
export async function startOwnRedis(options: OwnRedisOptions = {}): Promise<OwnRedisServer> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const server: ChildProcess = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--maxmemory',
      options.maxmemory ?? '3mb',
      '--maxmemory-policy',
      'noeviction',
      '--dir',
      tmpdir(),
      '--repl-diskless-sync',
      'yes',
      '--repl-diskless-sync-delay',
      '0',
      ...(options.replicaOf === undefined
        ? []
        : [
            '--replicaof',
            '127.0.0.1',
            String(options.replicaOf.port),
            '--repl-diskless-load',
            'on-empty-db',
          ]),
    ],
    { stdio: 'ignore' },
  );
  let failed: Error | undefined;
  server.once('error', (error) => {
    failed = new Error(`could not start redis-server from PATH: ${error.message}`);
  });
  const logger = options.logger ?? createSilentLogger();
  const deadline = Date.now() + (options.readyTimeoutMs ?? 10_000);
  let client = createRedisClient(url, { logger });
  for (;;) {
    try {
      if (failed !== undefined) throw failed;
      await redisReady(client, 500);
      break;
    } catch (error) {
      client.disconnect();
      if (failed !== undefined || Date.now() > deadline) {
        server.kill('SIGKILL');
        throw failed ?? error;
      }
      client = createRedisClient(url, { logger });
    }
  }
  const ready = client;
  if (options.replicaOf !== undefined) {
    try {
      await linked(options.replicaOf.client, ready, port, deadline);
    } catch (error) {
      ready.disconnect();
      server.kill('SIGKILL');
      throw error;
    }
  }
  return {
    url,
    port,
    client: ready,
    pause() {
      server.kill('SIGSTOP');
    },
    async resume() {
      server.kill('SIGCONT');
      const primary = options.replicaOf;
      if (primary !== undefined) {
        await linked(primary.client, ready, port, Date.now() + (options.readyTimeoutMs ?? 10_000));
      }
    },
    async close() {
      ready.disconnect();
      if (server.exitCode === null && server.signalCode === null) {
        const exited = once(server, 'exit');
        server.kill('SIGKILL');
        await exited;
      }
    },
  };
}

/**
 * Resolves once `replica` reports its link to the primary up, `primary` counts it (on `port`) online, and
 * a write on the primary is acknowledged by every replica online. (After a diskless full sync, a primary
 * streams nothing to the new replica until its first acknowledgement, up to a second later: a write before
 * then waits for it.)
 */
async function linked(primary: Redis, replica: Redis, port: number, deadline: number): Promise<void> {
  const online = new RegExp(`^slave\\d+:ip=[^,]*,port=${port},state=online`, 'm');
  const probe = `toolgate-own-redis:link:${port}`;
  for (;;) {
    const [mine, theirs] = await Promise.all([replica.info('replication'), primary.info('replication')]);
    if (/^master_link_status:up\r?$/m.test(mine) && online.test(theirs)) {
      const replicas = theirs.match(/^slave\d+:.*state=online/gm)?.length ?? 0;
      const replies = await primary
        .pipeline()
        .set(probe, '1', 'PX', 1000)
        .del(probe)
        .wait(replicas, 200)
        .exec();
      if (Number(replies?.[2]?.[1]) >= replicas) return;
    }
    if (Date.now() > deadline) {
      throw new Error('startOwnRedis: the replica did not link to its primary in time');
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Fills a Redis until it refuses a write, as a flood of callers would, and keeps it full: writes 16 KB
 * values under new keys (`toolgate-fill:` prefix) until one is refused, then lowers `maxmemory` to half
 * of what the server then uses, as an operator lowering the limit under a full dataset would. (Right
 * after the refusal Redis is past its limit only by the refused command's own buffer, which it frees, so
 * a small write a moment later could fit again; at half, every write is refused however its buffers
 * move.) Reads and deletes still work. Resolves to the refusal (a `StoreFullError` from the store), or
 * rejects if the server took 10,000 writes without refusing one. Only for a server of the test's own.
 */
export async function fillRedis(client: Redis): Promise<unknown> {
  const store = createRedisStore(client, { prefix: 'toolgate-fill:' });
  const value = 'x'.repeat(16_384);
  let refusal: unknown;
  for (let i = 0; refusal === undefined; i += 1) {
    if (i === 10_000) throw new Error('fillRedis: 10,000 writes of 16 KB and none refused (no maxmemory?)');
    try {
      await store.setIfAbsent(`{fill}:${process.pid}:${Date.now()}:${i}`, value, 600_000);
    } catch (error) {
      refusal = error;
    }
  }
  const used = Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1]);
  if (!Number.isFinite(used) || used <= 0) throw new Error('fillRedis: INFO memory gave no used_memory');
  await client.config('SET', 'maxmemory', String(Math.floor(used / 2)));
  return refusal;
}

/** A primary and one replica of it, each a redis-server of the test's own (see `startOwnRedis`). */
export interface OwnReplicatedRedis {
  readonly primary: OwnRedisServer;
  readonly replica: OwnRedisServer;
  /** Runs `work` while the replica is stopped (SIGSTOP), then lets it run and catch up, whatever happens. */
  whileReplicaStalls<T>(work: () => Promise<T>): Promise<T>;
  /** Kills both. */
  close(): Promise<void>;
}

/**
 * Starts a primary with no memory limit and a replica of it, resolved once the replica acknowledges
 * writes: for tests of `createRedisStore`'s `minReplicas`. Needs `redis-server` on PATH.
 */
export async function startOwnReplicatedRedis(): Promise<OwnReplicatedRedis> {
  const primary = await startOwnRedis({ maxmemory: '0' });
  let replica: OwnRedisServer;
  try {
    replica = await startOwnRedis({ maxmemory: '0', replicaOf: primary });
  } catch (error) {
    await primary.close();
    throw error;
  }
  return {
    primary,
    replica,
    async whileReplicaStalls(work) {
      replica.pause();
      try {
        return await work();
      } finally {
        await replica.resume();
      }
    },
    async close() {
      await replica.close();
      await primary.close();
    },
  };
}

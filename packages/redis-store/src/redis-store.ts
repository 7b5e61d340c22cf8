import {
  closesSilentRedisConnections,
  type KeyValueStore,
  type StoreCommand,
  StoreCommandError,
  StoreFullError,
  type StoreOperationOptions,
  withDeadline,
} from '@toolgate/core';

/** The commands the store sends; an ioredis 6 client (`createRedisClient`) has them. */
export interface RedisStoreClient {
  set(key: string, value: string, px: 'PX', ttlMs: number): Promise<unknown>;
  set(key: string, value: string, px: 'PX', ttlMs: number, nx: 'NX'): Promise<unknown>;
  get(key: string): Promise<string | null>;
  del(key: string): Promise<number>;
  /** Only with `minReplicas`: sends a write and its `WAIT` together (ioredis' `pipeline()`). */
  pipeline?(): RedisWritePipeline;
  /**
   * Runs the store's compare-and-delete script (ioredis' `eval`): `deleteIfEquals`, and with
   * `minReplicas` the withdrawal of a claim the replicas did not acknowledge. A client without it gets
   * a store without `deleteIfEquals`.
   */
  eval?(script: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  /**
   * ioredis' connection (a `net.Socket`), reset when a write's caller stops waiting before its reply.
   * A Cluster has none (its nodes' connections are not reset).
   */
  readonly stream?: ClientConnection | null;
  /** ioredis' `isCluster`: true for a `Cluster`, whose own options are checked too. */
  readonly isCluster?: boolean;
  /** ioredis' options, checked at creation when present (a Cluster's nodes' are under `redisOptions`). */
  readonly options?: {
    autoResendUnfulfilledCommands?: boolean;
    enableOfflineQueue?: boolean;
    /** A Cluster's: the delay after which it sends again a command whose connection closed (0: never). */
    retryDelayOnFailover?: number;
    commandTimeout?: number;
    socketTimeout?: number;
    redisOptions?: {
      autoResendUnfulfilledCommands?: boolean;
      commandTimeout?: number;
      socketTimeout?: number;
    };
  };
}

/** What the store needs of a client's connection: a reset (`net.Socket`'s `resetAndDestroy`), or a close. */
export interface ClientConnection {
  readonly destroyed?: boolean;
  resetAndDestroy?(): unknown;
  destroy(): unknown;
}

/** Wraps a write the store sends, so that the connection is reset if its caller stops waiting for it. */
type Sending = <R>(command: Promise<R>) => Promise<R>;

/** The pipeline `minReplicas` sends each write through: the write, then `WAIT`, in one round trip. */
export interface RedisWritePipeline {
  set(key: string, value: string, px: 'PX', ttlMs: number): RedisWritePipeline;
  set(key: string, value: string, px: 'PX', ttlMs: number, nx: 'NX'): RedisWritePipeline;
  del(key: string): RedisWritePipeline;
  eval(script: string, numkeys: number, ...args: (string | number)[]): RedisWritePipeline;
  wait(numreplicas: number, timeoutMs: number): RedisWritePipeline;
  exec(): Promise<[error: Error | null, result: unknown][] | null>;
}

/** Options of `createRedisStore`. */
export interface RedisStoreOptions {
  /**
   * Prepended to every key: the namespace of this server's state, e.g. `'orders-prod:'`. The same on
   * every replica of a server, and another on every other server or environment sharing the Redis
   * (under one prefix they share their state: one replays the other's results). No `{` or `}` (the hash
   * tag is the caller's). @default none: required
   */
  prefix: string;
  /** Longest any one operation may take before it rejects (the call's own signal also ends it), in ms. @default 200 */
  timeoutMs?: number;
  /**
   * Replicas that must acknowledge every write (Redis `WAIT`, sent with the write) before it counts; a
   * write fewer acknowledge within `replicaTimeoutMs` rejects (the policy then fails closed). 0: no `WAIT`.
   * @default 0
   */
  minReplicas?: number;
  /**
   * Longest a write waits for `minReplicas` acknowledgements, in ms: a whole number below `timeoutMs`.
   * Redis ends a `WAIT` on its timer, up to `1000 / hz` ms (100 ms by default) after this.
   * @default a quarter of timeoutMs (50)
   */
  replicaTimeoutMs?: number;
}

/** A `KeyValueStore` on Redis, with the key prefix it writes under. */
export interface RedisStore extends KeyValueStore {
  readonly prefix: string;
}

/** The `code` of the error a write rejects with when fewer than `minReplicas` acknowledged it. */
const NOT_REPLICATED = 'NOT_REPLICATED';

/**
 * Deletes KEYS[1] only while it holds ARGV[1] (1 when it did, else 0), in one atomic step: a claim is
 * released (`deleteIfEquals`) or withdrawn (`minReplicas`) only while it is the one this call wrote,
 * never one another call made since. A key of another type fails the GET (WRONGTYPE), as a GET would.
 */
const DELETE_IF_EQUALS =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/**
 * Core's `KeyValueStore` on Redis, shared by every replica: `setIfAbsent` is `SET key value PX ttl NX`
 * (one atomic command, so two replicas never both win a claim), expiry is Redis's own. Every operation
 * is bounded by `timeoutMs` and follows the caller's signal, so a partitioned Redis costs a call at most
 * the time limit. With `minReplicas`, every write waits (`WAIT`) for that many replicas to hold it and
 * rejects when they do not. The caller owns the client's lifecycle (`close()` does not quit it).
 * An ioredis client that would send a command twice, or late (an offline queue), or keep a silent
 * connection for good (no `socketTimeout`) is refused with a TypeError; `createRedisClient` makes one
 * that is not. A write unanswered at `timeoutMs` (or at the client's own `commandTimeout`, when that is
 * shorter) resets its connection, so it is never applied late.
 */
export function createRedisStore(client: RedisStoreClient, options: RedisStoreOptions): RedisStore {
  const prefix = checkPrefix(options?.prefix);
  const timeoutMs = options.timeoutMs ?? 200;
  if (/[{}]/.test(prefix)) {
    // A brace in the prefix would become the Redis Cluster hash tag of every key, putting all of them in one slot.
    throw new TypeError('createRedisStore: prefix may not contain { or } (keys carry their own hash tag)');
  }
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RangeError('createRedisStore: timeoutMs must be a positive number of milliseconds');
  }
  checkNoResend(client);
  checkNoOfflineQueue(client);
  checkSocketTimeout(client);
  const replicas = replicaOptions(client, options, timeoutMs);
  // Keys a write of this store is still settling (waiting for replicas, or withdrawing its claim).
  const settling = new Map<string, Promise<void>>();
  /**
   * Runs `work` within `timeoutMs` and the caller's signal. A write it sends goes through `sending`: when
   * `timeoutMs` passes before the write's reply, the connection it went out on is reset, so bytes still
   * on their way (a partition that heals, TCP retransmitting) are dropped instead of applied late.
   */
  const bounded = <T>(
    op: StoreOperationOptions | undefined,
    work: (sending: Sending) => Promise<T>,
  ): Promise<T> => {
    // Checked here, not inside the work: core's raceAbort would leave the work's own rejection unhandled.
    if (op?.signal?.aborted) return Promise.reject(op.signal.reason);
    return withDeadline(
      (signal) => {
        // The connection the write goes out on, taken before it is sent (a reconnect may replace it).
        const stream = client.stream;
        let unanswered = 0;
        signal.addEventListener('abort', () => {
          // Only at the store's own deadline: a caller's signal ends a write on a connection that is most
          // likely healthy (a cancelled call), where a reset would only fail the writes beside it.
          if (unanswered > 0 && op?.signal?.aborted !== true) resetConnection(stream);
        });
        return work((command) => {
          unanswered += 1;
          return command.then(
            (reply) => {
              unanswered -= 1;
              // A pipeline answers each command's error in its results instead of rejecting.
              if (hasTimedOutCommand(reply)) resetConnection(stream);
              return reply;
            },
            (error: unknown) => {
              unanswered -= 1;
              // The client's own commandTimeout ended the write before timeoutMs did (a client made with
              // a shorter one): the write is just as unanswered, and may be applied late all the same.
              if (isCommandTimeout(error)) resetConnection(stream);
              throw error;
            },
          );
        });
      },
      { signal: op?.signal, timeoutMs },
    );
  };
  /**
   * Runs a write that waits for replicas, tracked until it has settled: a caller that stops waiting for
   * it (its deadline, its signal) and reads the key at once must not see a claim about to be withdrawn.
   */
  const tracked = <T>(key: string, work: () => Promise<T>): Promise<T> => {
    const running = work();
    const before = settling.get(key);
    const done = running.then(
      () => undefined,
      () => undefined,
    );
    const settled = before === undefined ? done : Promise.all([before, done]).then(() => undefined);
    settling.set(key, settled);
    void settled.then(() => {
      if (settling.get(key) === settled) settling.delete(key);
    });
    return running;
  };
  /** The write, then `WAIT`, in one pipeline: the write's reply, or its error, and how many replicas hold it. */
  // A failure of either command rejects as the write's own (`sent`), a full Redis as StoreFullError.
  const writeAndWait = async (
    queue: (pipeline: RedisWritePipeline) => RedisWritePipeline,
    replies: { minReplicas: number; replicaTimeoutMs: number },
    sent: StoreCommand,
    sending: Sending,
  ): Promise<{ reply: unknown; acknowledged: number }> => {
    try {
      const results = await sending(
        queue(client.pipeline!()).wait(replies.minReplicas, replies.replicaTimeoutMs).exec(),
      );
      const [written, waited] = results ?? [];
      if (written === undefined || waited === undefined) throw new Error('the pipeline was discarded');
      if (written[0] !== null) throw written[0];
      if (waited[0] !== null) throw waited[0];
      return { reply: written[1], acknowledged: Number(waited[1]) };
    } catch (error) {
      throw fullOr(new StoreCommandError(error, sent));
    }
  };
  const wanted =
    replicas &&
    `${replicas.minReplicas} replicas acknowledged the write within ${replicas.replicaTimeoutMs} ms`;
  // Its words name no key and no value: they are counts, and what became of the write on the primary.
  const notReplicated = (acknowledged: number, outcome: string, sent: StoreCommand): StoreCommandError =>
    new StoreCommandError(
      {
        name: 'NotReplicatedError',
        code: NOT_REPLICATED,
        message: `RedisStore: only ${acknowledged} of ${wanted} (WAIT); ${outcome}`,
      },
      sent,
    );
  /** Takes the unacknowledged claim back off the primary; says what became of it. */
  const withdraw = async (key: string, value: string): Promise<string> => {
    try {
      await client.eval!(DELETE_IF_EQUALS, 1, key, value);
      return 'the claim was withdrawn from the primary';
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      const what = typeof code === 'string' ? code : (error as Error | null)?.name;
      return `withdrawing the claim failed (${typeof what === 'string' ? what : 'unknown'}): it stays on the primary until its ttl`;
    }
  };
  /**
   * `DEL` only while the key holds `expected`: the compare-and-delete script, bounded and reset like
   * every write, sent with `WAIT` under `minReplicas`. A delete that did not happen wrote nothing, so
   * it answers false whatever the replicas acknowledged; one that did rejects like `delete` when too
   * few replicas hold it.
   */
  const deleteIfEquals = (key: string, expected: string, op?: StoreOperationOptions): Promise<boolean> => {
    checkKey(key);
    checkValue(expected);
    const full = prefix + key;
    // The expected value is summarised as a written value is: only its length reaches a log.
    const sent: StoreCommand = { name: 'eval', key: full, value: expected };
    if (replicas === undefined) {
      return bounded(op, async (sending) => {
        try {
          return Number(await sending(client.eval!(DELETE_IF_EQUALS, 1, full, expected))) === 1;
        } catch (error) {
          throw fullOr(new StoreCommandError(error, sent));
        }
      });
    }
    return bounded(op, (sending) =>
      tracked(full, async () => {
        const written = await writeAndWait(
          (p) => p.eval(DELETE_IF_EQUALS, 1, full, expected),
          replicas,
          sent,
          sending,
        );
        const deleted = Number(written.reply) === 1;
        if (deleted && written.acknowledged < replicas.minReplicas) {
          throw notReplicated(written.acknowledged, 'the key is deleted on the primary', sent);
        }
        return deleted;
      }),
    );
  };
  return {
    prefix,
    // Only with a client that runs scripts (any ioredis client does); without it a policy falls back to `delete`.
    ...(typeof client.eval === 'function' ? { deleteIfEquals } : {}),
    setIfAbsent(key, value, ttlMs, op) {
      checkKey(key);
      checkValue(value);
      checkTtl(ttlMs);
      const full = prefix + key;
      const sent: StoreCommand = { name: 'set', key: full, value, options: ['PX', ttlMs, 'NX'] };
      if (replicas === undefined) {
        return bounded(op, async (sending) => {
          try {
            return (await sending(client.set(full, value, 'PX', ttlMs, 'NX'))) === 'OK';
          } catch (error) {
            throw fullOr(new StoreCommandError(error, sent));
          }
        });
      }
      return bounded(op, (sending) =>
        tracked(full, async () => {
          const written = await writeAndWait(
            (p) => p.set(full, value, 'PX', ttlMs, 'NX'),
            replicas,
            sent,
            sending,
          );
          const claimed = written.reply === 'OK';
          if (written.acknowledged >= replicas.minReplicas) return claimed;
          // A claim only the primary holds is taken back: the caller will not act on it, and a failover
          // to a replica that never saw it must not be the only thing that forgets it.
          const outcome = claimed ? await withdraw(full, value) : 'the key was not claimed';
          throw notReplicated(written.acknowledged, outcome, sent);
        }),
      );
    },
    set(key, value, ttlMs, op) {
      checkKey(key);
      checkValue(value);
      checkTtl(ttlMs);
      const full = prefix + key;
      const sent: StoreCommand = { name: 'set', key: full, value, options: ['PX', ttlMs] };
      if (replicas === undefined) {
        return bounded(op, async (sending) => {
          try {
            await sending(client.set(full, value, 'PX', ttlMs));
          } catch (error) {
            throw fullOr(new StoreCommandError(error, sent));
          }
        });
      }
      return bounded(op, (sending) =>
        tracked(full, async () => {
          const written = await writeAndWait((p) => p.set(full, value, 'PX', ttlMs), replicas, sent, sending);
          if (written.acknowledged < replicas.minReplicas) {
            throw notReplicated(written.acknowledged, 'the value stays on the primary', sent);
          }
        }),
      );
    },
    get(key, op) {
      checkKey(key);
      const full = prefix + key;
      return bounded(op, async () => {
        // Only writes that wait for replicas settle after they answer; without them, nothing to wait for.
        const pending = replicas === undefined ? undefined : settling.get(full);
        if (pending !== undefined) await pending;
        try {
          return (await client.get(full)) ?? undefined;
        } catch (error) {
          throw new StoreCommandError(error, { name: 'get', key: full });
        }
      });
    },
    delete(key, op) {
      checkKey(key);
      const full = prefix + key;
      const sent: StoreCommand = { name: 'del', key: full };
      if (replicas === undefined) {
        return bounded(op, async (sending) => {
          try {
            return (await sending(client.del(full))) > 0;
          } catch (error) {
            throw new StoreCommandError(error, sent);
          }
        });
      }
      return bounded(op, (sending) =>
        tracked(full, async () => {
          const written = await writeAndWait((p) => p.del(full), replicas, sent, sending);
          if (written.acknowledged < replicas.minReplicas) {
            throw notReplicated(written.acknowledged, 'the key is deleted on the primary', sent);
          }
          return Number(written.reply) > 0;
        }),
      );
    },
  };
}

/**
 * `minReplicas` and `replicaTimeoutMs`, checked; undefined when no write waits for replicas. `WAIT` must
 * answer within the operation's own limit and the client's command timeout, or no write could ever succeed
 * (and `WAIT 1 0` would block the connection for good).
 */
function replicaOptions(
  client: RedisStoreClient,
  options: RedisStoreOptions,
  timeoutMs: number,
): { minReplicas: number; replicaTimeoutMs: number } | undefined {
  const { minReplicas = 0, replicaTimeoutMs } = options;
  if (typeof minReplicas !== 'number') {
    throw new TypeError(`createRedisStore: minReplicas must be a number, got ${typeof minReplicas}`);
  }
  if (!(Number.isSafeInteger(minReplicas) && minReplicas >= 0)) {
    throw new RangeError(`createRedisStore: minReplicas must be a whole number from 0, got ${minReplicas}`);
  }
  if (replicaTimeoutMs !== undefined) checkReplicaTimeout(replicaTimeoutMs, timeoutMs);
  if (minReplicas === 0) return undefined;
  // A quarter: Redis ends a WAIT on its timer (every 100 ms at the default hz), so one of 50 ms answers
  // within 150 ms, and the withdrawal of a claim still fits in the default 200.
  const waitMs = replicaTimeoutMs ?? Math.floor(timeoutMs / 4);
  checkReplicaTimeout(waitMs, timeoutMs);
  if (typeof client.pipeline !== 'function' || typeof client.eval !== 'function') {
    throw new TypeError(
      'createRedisStore: minReplicas needs a client with pipeline() and eval() (an ioredis client, as createRedisClient makes)',
    );
  }
  const commandTimeout = client.options?.commandTimeout ?? client.options?.redisOptions?.commandTimeout;
  if (typeof commandTimeout === 'number' && commandTimeout <= waitMs) {
    throw new RangeError(
      `createRedisStore: replicaTimeoutMs (${waitMs}) must be below the client's commandTimeout (${commandTimeout}), or the client gives up on every WAIT`,
    );
  }
  return { minReplicas, replicaTimeoutMs: waitMs };
}

function checkReplicaTimeout(replicaTimeoutMs: unknown, timeoutMs: number): void {
  if (typeof replicaTimeoutMs !== 'number') {
    throw new TypeError(
      `createRedisStore: replicaTimeoutMs must be a number, got ${typeof replicaTimeoutMs}`,
    );
  }
  // 0 is no limit to Redis: a WAIT that never answers would hold the connection for good.
  if (!(Number.isSafeInteger(replicaTimeoutMs) && replicaTimeoutMs >= 1 && replicaTimeoutMs < timeoutMs)) {
    throw new RangeError(
      `createRedisStore: replicaTimeoutMs must be a whole number of milliseconds from 1 to below timeoutMs (${timeoutMs}), got ${replicaTimeoutMs}`,
    );
  }
}

/**
 * A write Redis refused for want of memory (`maxmemory` reached under `noeviction`: `-OOM command not
 * allowed when used memory > 'maxmemory'`) as core's `StoreFullError`: a full store, which policies
 * refuse `rate_limited` (fail closed) rather than treat as an outage. Any other refusal is thrown as it came.
 */
function fullOr(error: StoreCommandError): Error {
  if (/^OOM\b/.test(error.message)) {
    // The refusal (its words and a summary of the command, never the value) is the cause, for the log.
    return new StoreFullError('store', undefined, {
      message: 'RedisStore: a write was refused: Redis is at its maxmemory (policy noeviction)',
      cause: error,
    });
  }
  return error;
}

/**
 * Refuses a client that would send a command twice: ioredis (by default) sends the commands whose replies
 * a dropped connection lost again after it reconnects, though Redis may have applied them. A `DEL` that
 * released a claim, applied a second time after another replica claimed the key, deletes that claim,
 * and a third call then runs beside the second. Checked where the client shows its options (ioredis).
 */
function checkNoResend(client: RedisStoreClient): void {
  const options = client.options;
  if (options === undefined || options === null) return;
  const resend = options.autoResendUnfulfilledCommands ?? options.redisOptions?.autoResendUnfulfilledCommands;
  if (resend !== false) {
    throw new TypeError(
      'createRedisStore: create the ioredis client with autoResendUnfulfilledCommands: false (createRedisClient does): a write whose reply a dropped connection lost may have been applied, and sent again after the reconnect it can undo what other replicas did since',
    );
  }
}

/**
 * Refuses an ioredis client that would keep a silent connection for good. A connection that stops
 * answering without a reset (a partition, a NAT or firewall that forgot the flow) stays 'ready' in
 * ioredis unless `socketTimeout` closes it: every operation then waits `timeoutMs` for the rest of the
 * process's life, and every command sent on it stays queued in the client (memory grows with each
 * call). Checked where the client shows its options (ioredis); a Cluster's are under `redisOptions`.
 */
function checkSocketTimeout(client: RedisStoreClient): void {
  const options = client.options;
  if (options === undefined || options === null) return;
  if (!closesSilentRedisConnections(options)) {
    throw new TypeError(
      'createRedisStore: create the ioredis client with socketTimeout (e.g. 2000 ms, as createRedisClient does): without it a connection that goes silent without a reset is never closed, every operation waits timeoutMs for the life of the process, and every command sent stays queued in the client',
    );
  }
}

/**
 * Resets the connection a write went out on and its caller gave up on (its deadline, its signal): the
 * kernel then drops what it still holds of the write (unsent, or waiting for retransmission through a
 * partition) instead of delivering it once the partition heals, seconds later, when a claim applied would
 * be held by nobody and a release (`DEL`) would delete a claim another replica made since. ioredis then
 * fails the other commands in flight on it (never sent again) and connects anew. A TLS connection cannot
 * be reset from Node: it is closed, which stops retransmission no sooner than the kernel's own timers.
 */
/** ioredis' rejection of a command left without a reply at the client's `commandTimeout`. */
function isCommandTimeout(error: unknown): boolean {
  return error instanceof Error && error.message === 'Command timed out';
}

/** Whether a pipeline's results (`[error, reply]` pairs) hold a command the client's timeout ended. */
function hasTimedOutCommand(reply: unknown): boolean {
  if (!Array.isArray(reply)) return false;
  for (const entry of reply) {
    if (Array.isArray(entry) && isCommandTimeout(entry[0])) return true;
  }
  return false;
}

function resetConnection(stream: ClientConnection | null | undefined): void {
  if (stream === undefined || stream === null || stream.destroyed === true) return;
  if (typeof stream.resetAndDestroy === 'function') {
    try {
      stream.resetAndDestroy();
      return;
    } catch {
      // Not a TCP handle (TLS): close it instead.
    }
  }
  stream.destroy();
}

/**
 * Refuses an ioredis client that would send a command late. With an offline queue (ioredis' default) a
 * command issued while the connection is down waits in the client and is sent once it is back, seconds
 * later, long after the store's time limit made its caller give up: a claim then applied is held by
 * nobody, a release (`DEL`) deletes the claim another replica made since. A Cluster also sends again,
 * after `retryDelayOnFailover`, a command whose connection closed before its reply (Redis may have
 * applied it). Checked where the client shows its options (ioredis).
 */
function checkNoOfflineQueue(client: RedisStoreClient): void {
  const options = client.options;
  if (options === undefined || options === null) return;
  if (options.enableOfflineQueue !== false) {
    throw new TypeError(
      'createRedisStore: create the ioredis client with enableOfflineQueue: false (createRedisClient does): a command issued while the connection is down is otherwise sent once it is back, after its caller gave up, and a claim or a release applied then acts for nobody or undoes what another replica did since',
    );
  }
  const cluster = client.isCluster === true || options.redisOptions !== undefined;
  if (cluster && options.retryDelayOnFailover !== 0) {
    throw new TypeError(
      'createRedisStore: create the ioredis Cluster with retryDelayOnFailover: 0: a Cluster otherwise sends again a command whose connection closed before its reply, though Redis may have applied it',
    );
  }
}

// With the u flag a surrogate pair is one code point: this matches only a lone surrogate.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * A key must be a string Redis stores as it is: ioredis encodes strings as UTF-8, where every lone
 * surrogate becomes U+FFFD, so two different keys would name one Redis key (one caller's claim would
 * block, or be released by, another's). The message names the type, never the key (keys carry digests).
 */
function checkKey(key: unknown): void {
  if (typeof key !== 'string') {
    throw new TypeError(`RedisStore: a key must be a string, got ${typeof key}`);
  }
  if (LONE_SURROGATE.test(key)) {
    throw new TypeError(
      'RedisStore: a key may not hold a lone UTF-16 surrogate (Redis would store U+FFFD: two keys would be one)',
    );
  }
}

/** A value must come back as it was stored: a string (ioredis would stringify anything else), well-formed. */
function checkValue(value: unknown): void {
  if (typeof value !== 'string') {
    throw new TypeError(`RedisStore: a value must be a string, got ${typeof value}`);
  }
  if (LONE_SURROGATE.test(value)) {
    throw new TypeError(
      'RedisStore: a value may not hold a lone UTF-16 surrogate (Redis would store U+FFFD: it would read back changed)',
    );
  }
}

/** Whole milliseconds Redis takes for `PX`: from 1 to 2^53 - 1 (a larger number is sent as `1e+21`, refused). */
function checkTtl(ttlMs: number): void {
  if (!(Number.isSafeInteger(ttlMs) && ttlMs >= 1)) {
    throw new RangeError(
      `RedisStore: ttlMs must be a whole number of milliseconds from 1 to 2^53 - 1, got ${ttlMs}`,
    );
  }
}

/**
 * The prefix, required: with a default, two servers (production and staging, two apps) sharing one
 * Redis would share every key, and one would replay the other's results.
 */
function checkPrefix(prefix: unknown): string {
  if (typeof prefix === 'string' && prefix !== '') return prefix;
  throw new TypeError(
    prefix === undefined
      ? "createRedisStore: prefix is required: name this server's state (e.g. { prefix: 'orders-prod:' }), the same on all its replicas and another on every other server sharing the Redis; under one prefix, two servers share their state and one replays the other's results"
      : "createRedisStore: prefix must be a non-empty string (e.g. 'orders-prod:')",
  );
}

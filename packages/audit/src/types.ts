import type { ErrorCode, Logger, PolicyDecision, SecretPattern, ToolMiddleware } from '@toolgate/core';

/**
 * One audit record: exactly one per `tools/call`. Optional fields are absent (not null) when the call
 * had no such fact. On disk and in PostgreSQL a record is its canonical JSON (sorted keys) plus `hash`.
 */
export interface AuditRecord {
  /** When the call started, ISO 8601 UTC. */
  time: string;
  /** The chain this record belongs to: one per writer (see `AuditOptions.chainId`). */
  chainId: string;
  /** Position in its chain: 1, 2, 3, ... with no gaps. */
  seq: number;
  /** On a chain's first record only: the last record of another chain stored before it began. */
  after?: ChainAnchor;
  /** The JSON-RPC request id. */
  requestId: string | number;
  /** The transport session, when there is one. */
  sessionId?: string;
  /** Token subject, else client id (core's `principalOf`). */
  principal?: string;
  /** The OAuth client id of the verified token. */
  clientId?: string;
  /**
   * Core's caller identity id (`ctx.caller.id`): `sub:<issuer>|<subject>` (`sub:<issuer>%T<tenant>|<subject>` with a tenant claim), `client:<clientId>#<digest of
   * the stable claims>`, `local`, `session:<id>` or `anonymous`. Tells apart two tokens of one client
   * whose claims differ.
   */
  caller: string;
  /** Values the tool bound from the caller (`ctx.bindings`), secrets redacted; absent when none. */
  bindings?: Record<string, unknown>;
  /** The tool name the client asked for (cut to 256 characters). */
  tool: string;
  /** Present (true) when the client named a tool the server does not have. */
  unknownTool?: true;
  /** The arguments as the client sent them: secrets redacted, or only their shape; over `maxArgsChars`, `[Truncated: N characters]`. */
  args: unknown;
  /**
   * Present when `args` was cut: the same arguments with every long string, key, array and object cut
   * (marked `…[+N characters]`, `[+N more items]`, `[+N more keys]`), at most 2,048 characters of JSON,
   * so a padded argument cannot hide the others. Absent when even that does not fit.
   */
  argsPreview?: unknown;
  /** `ok`, or the error code the client got. */
  outcome: 'ok' | ErrorCode;
  /** The incident id the client saw, when there is one. */
  incidentId?: string;
  /**
   * Which key hashed this record (see `AuditOptions.key`): 16 hex digits that name the key without
   * revealing it. Absent on an unkeyed chain, whose `hash` is plain SHA-256.
   */
  keyId?: string;
  /** Present (true) when the call's signal was aborted (client cancel, deadline). */
  aborted?: true;
  /** Time spent in the chain inside audit, in milliseconds (µs precision). */
  durationMs: number;
  /** UTF-8 size of the result's content: each text part's text, other parts' JSON (0 for an unknown tool: it gets a JSON-RPC error). */
  resultBytes: number;
  /** Trace id of the active span (`ctx.state.trace`), when tracing runs outside audit. */
  traceId?: string;
  /** Span id of the active span. */
  spanId?: string;
  /** The policy decisions of the call, in order (secrets redacted). */
  decisions: PolicyDecision[];
  /** `hash` of the previous record in this chain; 64 zeros for the first. */
  prevHash: string;
  /**
   * Hex SHA-256 of this record's canonical JSON without `hash`; HMAC-SHA256 under the chain's key
   * when the record has a `keyId`.
   */
  hash: string;
}

/**
 * A secret that keys a chain: its bytes (a Buffer or Uint8Array) or a string (its UTF-8 bytes), at
 * least 32 bytes. Records are then hashed with HMAC-SHA256 under it, which nobody without it can
 * recompute.
 */
export type AuditKey = string | Uint8Array;

/**
 * One record of a chain, named by chain id, seq and hash: what `head()` returns, for the application
 * to keep elsewhere, and what a verifier's `expect` asks the chain to still contain.
 */
export interface AuditHead {
  readonly chainId: string;
  readonly seq: number;
  readonly hash: string;
}

/** The last record of a chain: where the next record links. */
export interface ChainHead {
  readonly seq: number;
  readonly hash: string;
}

/**
 * The record a new chain's first record names (`after`): the last record another chain had stored
 * when this chain began. Verification then finds a chain that was deleted whole, if a later chain
 * named it.
 */
export interface ChainAnchor {
  readonly chainId: string;
  readonly seq: number;
  readonly hash: string;
}

/** The fields a sink copies into columns of its own (PostgreSQL), known without parsing the line. */
export interface AuditRow {
  readonly chainId: string;
  readonly seq: number;
  readonly time: string;
  readonly tool: string;
  readonly outcome: string;
  readonly principal: string | undefined;
  readonly caller: string;
  readonly incidentId: string | undefined;
  readonly hash: string;
}

/** A batch handed to a sink: index for index, the exact JSON line of each record and its row. */
export interface AuditBatch {
  /** The chain every record of the batch belongs to. */
  readonly chainId: string;
  /** The records as objects (parsed from `lines` on first use). */
  readonly records: readonly AuditRecord[];
  /** Canonical JSON of each record (what the hash covers, plus `hash`); no newline. */
  readonly lines: readonly string[];
  /**
   * The same records as UTF-8 JSON lines, each ending in a newline: exactly what a JSON-lines file
   * stores. Encoded once, when the batch is sealed (the hashes are taken over these bytes), so a sink
   * that writes bytes need not join and encode `lines` again.
   */
  readonly bytes: Uint8Array;
  /**
   * The columns a table copies, one per record. Built on first read, which must come while `write`
   * runs: once the batch settled the writer lets its records go, and a later first read throws.
   */
  readonly rows: readonly AuditRow[];
}

/**
 * Where records go. Batches arrive one at a time, in order. A rejected write is retried as is
 * (same records, same hashes) when the error is transient (connection lost, timeout, ...); a
 * permanent error (see `isPermanentSinkError`) drops the batch, counted and logged. A retried batch
 * may already be stored (the acknowledgement was lost): the sink must recognise it, not fail.
 */
export interface AuditSink {
  /** The last record of chain `chainId` from an earlier run, so a restart continues it. Called once. */
  head?(chainId: string): Promise<ChainHead | undefined>;
  /**
   * For a new chain (head() found none): the last record another chain stored, which the new chain's
   * first record names in `after`. Called once, after head(). Without it, chains are not linked.
   */
  anchor?(chainId: string): Promise<ChainAnchor | undefined>;
  /** Stores a batch; resolve only once it is stored (with `alreadyStored` when a retry found it there). */
  // biome-ignore lint/suspicious/noConfusingVoidType: a sink may resolve with nothing at all
  write(batch: AuditBatch): Promise<void | { readonly alreadyStored?: boolean }>;
  /** Releases the sink's own resources after the last write. */
  close?(): Promise<void>;
}

/** How a tool's arguments appear in its records. */
export type ArgsMode = 'redacted' | 'shape';

/** Options a tool may override (`tools: { name: { ... } }`). */
export interface AuditToolOptions {
  /** `redacted`: values with secrets replaced; `shape`: keys and types only, no values. @default 'redacted' */
  args: ArgsMode;
  /** Extra key-name fragments whose values are redacted, added to core's DEFAULT_SECRET_KEYS. @default [] */
  secretKeys: readonly string[];
  /** Extra value patterns redacted inside every string, added to core's SECRET_PATTERNS. @default [] */
  secretPatterns: readonly SecretPattern[];
}

export interface AuditOptions extends Partial<AuditToolOptions> {
  /** Where records go. @default createStderrSink() */
  sink?: AuditSink;
  /** Where sink failures and dropped records are reported (rate-limited). Never stdout. @default createStderrLogger() */
  logger?: Logger;
  /**
   * This writer's chain. Every replica (every process) writing one table or file needs its own, or
   * the two would fork one chain. Give a stable id (say the pod name) to continue the same chain
   * across restarts; without one each process starts a chain of its own.
   * @default `${hostname}-${pid}-${8 random hex}` (see `defaultChainId`)
   */
  chainId?: string;
  /**
   * Release a call's answer only once its record is stored (the sink acknowledged the batch holding
   * it). Concurrent calls still share a batch. A record that cannot be stored (dropped, refused by
   * the sink, audit closed) or not stored within `durableWaitMs` turns the answer into `unavailable`:
   * no answer leaves without its record.
   * Without it, answers leave at once and a crash (kill -9) loses the records not yet written: at most
   * the batch in flight plus what waits in the buffer, normally the last `batchDelayMs` + one write.
   * @default false
   */
  durable?: boolean;
  /**
   * With `durable: true`, how long a call waits for its record to be stored, in milliseconds. Past it
   * the call answers `unavailable` (retryable, `retryAfterMs` 5000) whatever the sink does (failing
   * with a transient error and retried, or holding a write silent up to the PostgreSQL sink's
   * `timeoutMs`), and its record stays queued: it is written once when the sink takes it, a record of
   * a call whose result was withheld. `Infinity` waits until the record is stored or given up.
   * @default 10000
   */
  durableWaitMs?: number;
  /**
   * A secret (at least 32 bytes) that keys the chain: each record's `hash` is HMAC-SHA256 under it
   * instead of SHA-256, and each record names the key by `keyId`. Someone who can write the file or
   * table but has not got the key can then no longer rewrite records and recompute the hashes after
   * them, or forge a chain. Verify with the same key (`keys`). Without it, records are hashed as
   * before, with plain SHA-256.
   * @default undefined (no key: plain SHA-256)
   */
  key?: AuditKey;
  /**
   * Seal, hash and write records on a worker thread of their own (a file sink from `createFileSink`
   * only). A call then only copies its record into memory shared with that thread; the canonical
   * JSON, SHA-256 (or HMAC), the file's writes, retries and `fsync` run beside the calls instead of
   * between them. Everything else is as without it: the chain, the bounds (`maxBufferBytes` holds in
   * the thread; a 4 MiB ring sits before it), `durable`, `ready()`, `flush()`, `close()`, `stats()`
   * and `head()`. The thread keeps the process alive only while records are on their way; `close()`
   * ends it. Costs a thread (about 23 MiB resident) and a second core's time.
   * @default false
   */
  thread?: boolean;
  /** Most records per sink write (one file write, one INSERT). @default 4096 */
  batchSize?: number;
  /**
   * Most bytes (records as serialised) per sink write; a record larger than this is written alone. A
   * write must finish within the sink's own limit (the PostgreSQL sink's `timeoutMs`): bounded by count
   * alone, a buffer of large records made one write of up to `maxBufferBytes` (64 MiB), which a slow link
   * could never finish in time, so it was retried for good and nothing more was stored.
   * @default 4 MiB
   */
  maxBatchBytes?: number;
  /**
   * How long the writer waits for more records before it starts a write, in milliseconds. Durable
   * mode needs no wait: its calls wait for the write, and batches form while one is in flight.
   * @default 1 (0 with `durable: true`)
   */
  batchDelayMs?: number;
  /**
   * Most bytes of serialised records waiting for the sink (records are serialised when the call
   * ends, so this bounds the memory audit holds whatever the results were). A call that finds it
   * full waits for room up to `maxWaitMs` (back-pressure), then its record is dropped, counted in
   * `stats().dropped` and reported through the logger. A single record larger than the bound is
   * admitted when the buffer is empty.
   * @default 67108864 (64 MiB)
   */
  maxBufferBytes?: number;
  /** Most records waiting for the sink, a second bound beside `maxBufferBytes`. @default 1000000 */
  bufferSize?: number;
  /** How long a call waits for room in a full buffer before its record is dropped and counted. @default 1000 */
  maxWaitMs?: number;
  /** How long `close()` retries a failing sink (a hung write gets 1 s more) before reporting the rest lost. @default 10000 */
  closeTimeoutMs?: number;
  /**
   * Longest args (characters of canonical JSON) kept; longer ones become `[Truncated: N characters]`,
   * with an `argsPreview` beside them (each value cut short, at most 2,048 characters). @default 65536
   */
  maxArgsChars?: number;
  /** Per-tool overrides; `false` records nothing for that tool. @default {} */
  tools?: Record<string, Partial<AuditToolOptions> | false>;
}

/** Counters of an audit's writer. */
export interface AuditStats {
  /** The chain this writer writes. */
  readonly chainId: string;
  /** Records the sink has acknowledged. */
  readonly written: number;
  /** Records not stored, for any reason (buffer full past `maxWaitMs`, refused by the sink, after close, lost at close). */
  readonly dropped: number;
  /** Of `dropped`, records in batches the sink refused with a permanent error. */
  readonly rejected: number;
  /** Write attempts that failed with a transient error and were retried. */
  readonly retries: number;
  /** Batches found already stored on retry (a lost acknowledgement), counted once each. */
  readonly duplicateBatches: number;
  /** Records waiting in the buffer or in the batch being written. */
  readonly pending: number;
  /** Serialised size of the records waiting (what `maxBufferBytes` bounds). */
  readonly pendingBytes: number;
  /**
   * How long the sink has held the write now outstanding, retries included, in ms; 0 when no write is
   * outstanding. A sink that has gone silent (a partition without a reset) shows here long before its
   * `timeoutMs` fails the write: a readiness check can take the server out of its balancer when records
   * stop being stored. With `thread: true`, as the writer thread last reported it (each time it takes
   * records).
   */
  readonly writingMs: number;
}

/** The audit middleware, with the controls of its writer. */
export interface AuditMiddleware extends ToolMiddleware {
  /**
   * Resolves once the sink is set up and the chain's head read (the PostgreSQL sink creates its table
   * then). Until then records wait in the buffer, and a crash loses them: a server that must not lose
   * its first calls awaits this before it connects a transport. A failing sink is retried with backoff
   * (race it against your own start-up deadline); rejects when the sink refuses for good or after close().
   */
  ready(): Promise<void>;
  /** Resolves once every record pushed so far is stored (or given up and counted). */
  flush(): Promise<void>;
  /** Waits for the calls now inside the middleware to finish, then flushes their records. */
  drain(): Promise<void>;
  /** Stops taking records (later ones are dropped and counted), flushes within `closeTimeoutMs`, closes the sink. Idempotent. Call it after the app drained its calls. */
  close(): Promise<void>;
  stats(): AuditStats;
  /**
   * The last record of this writer's chain that the sink has stored (acknowledged, not merely
   * queued), or undefined before any. Keep it somewhere an insider cannot rewrite (another database,
   * a log shipper) and verify with `expect: head`: records cut off the end of the chain are found.
   */
  head(): AuditHead | undefined;
}

/** What the PostgreSQL sink needs of a client: `pg.Pool`, `pg.Client` and PGlite all fit. */
export interface AuditQueryable {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
}

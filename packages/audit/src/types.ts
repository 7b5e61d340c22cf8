import type { ErrorCode, Logger, PolicyDecision, SecretPattern, ToolMiddleware } from '@toolgate/core';

/**
 * One audit record: exactly one per `tools/call`. Optional fields are absent (not null) when the call
 * had no such fact. On disk and in PostgreSQL a record is its canonical JSON (sorted keys) plus `hash`.
 */
export interface AuditRecord {
  /** When the call started, ISO 8601 UTC. */
  time: string;
  /** Position in this sink's chain: 1, 2, 3, ... with no gaps. */
  seq: number;
  /** The JSON-RPC request id. */
  requestId: string | number;
  /** The transport session, when there is one. */
  sessionId?: string;
  /** Token subject, else client id (core's `principalOf`). */
  principal?: string;
  /** The OAuth client id of the verified token. */
  clientId?: string;
  /** The tool name the client asked for (cut to 256 characters). */
  tool: string;
  /** Present (true) when the client named a tool the server does not have. */
  unknownTool?: true;
  /** The arguments as the client sent them: secrets redacted, or only their shape. */
  args: unknown;
  /** `ok`, or the error code the client got. */
  outcome: 'ok' | ErrorCode;
  /** The incident id the client saw, when there is one. */
  incidentId?: string;
  /** Present (true) when the call's signal was aborted (client cancel, deadline). */
  aborted?: true;
  /** Time spent in the chain inside audit, in milliseconds (µs precision). */
  durationMs: number;
  /** UTF-8 size of the result JSON the client gets (0 for an unknown tool: it gets a JSON-RPC error). */
  resultBytes: number;
  /** Trace id of the active span (`ctx.state.trace`), when tracing runs outside audit. */
  traceId?: string;
  /** Span id of the active span. */
  spanId?: string;
  /** The policy decisions of the call, in order (secrets redacted). */
  decisions: PolicyDecision[];
  /** `hash` of the previous record in this chain; 64 zeros for the first. */
  prevHash: string;
  /** SHA-256 (hex) of this record's canonical JSON without `hash`. */
  hash: string;
}

/** The last record of a chain: where the next record links. */
export interface ChainHead {
  readonly seq: number;
  readonly hash: string;
}

/** A batch handed to a sink: the records and, index for index, the exact JSON line of each. */
export interface AuditBatch {
  readonly records: readonly AuditRecord[];
  /** Canonical JSON of each record (what the hash covers, plus `hash`); no newline. */
  readonly lines: readonly string[];
}

/** Where records go. Batches arrive one at a time, in order; a rejected write is retried as is. */
export interface AuditSink {
  /** The chain's last record from an earlier run, so a restart continues the chain. Called once. */
  head?(): Promise<ChainHead | undefined>;
  /** Stores a batch; resolve only once it is stored (a rejection retries the same batch). */
  write(batch: AuditBatch): Promise<void>;
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
  /** Where sink failures and dropped records are reported. Never stdout. @default createStderrLogger() */
  logger?: Logger;
  /** Most records per sink write. @default 256 */
  batchSize?: number;
  /** Most records waiting for the sink; beyond it a call waits for room (see `maxWaitMs`). @default 10000 */
  bufferSize?: number;
  /** How long a call waits for room in a full buffer before its record is dropped and counted. @default 1000 */
  maxWaitMs?: number;
  /** How long `close()` retries a failing sink (a hung write gets 1 s more) before reporting the rest lost. @default 10000 */
  closeTimeoutMs?: number;
  /** Flush and close on `beforeExit`, SIGTERM and SIGINT. @default true */
  flushOnExit?: boolean;
  /** Longest args (characters of canonical JSON) kept; longer ones become `[Truncated: N characters]`. @default 65536 */
  maxArgsChars?: number;
  /** Per-tool overrides; `false` records nothing for that tool. @default {} */
  tools?: Record<string, Partial<AuditToolOptions> | false>;
}

/** Counters of an audit's writer. */
export interface AuditStats {
  /** Records the sink has acknowledged. */
  readonly written: number;
  /** Records dropped (buffer full past `maxWaitMs`, written after close, or lost at close). */
  readonly dropped: number;
  /** Records waiting in the buffer or in the batch being written. */
  readonly pending: number;
}

/** The audit middleware, with the controls of its writer. */
export interface AuditMiddleware extends ToolMiddleware {
  /** Resolves once every record pushed so far is stored. */
  flush(): Promise<void>;
  /** Flushes, removes the exit hooks and closes the sink; later records are dropped and counted. */
  close(): Promise<void>;
  stats(): AuditStats;
}

/** What the PostgreSQL sink needs of a client: `pg.Pool`, `pg.Client` and PGlite all fit. */
export interface AuditQueryable {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
}

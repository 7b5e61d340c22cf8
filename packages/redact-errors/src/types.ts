import type {
  ErrorCode,
  Logger,
  PerToolOptions,
  SecretPattern,
  ToolContext,
  ToolMiddleware,
} from '@toolgate/core';

/** What a thrown error means for the model: the code, and optionally the words it reads. */
export interface ErrorClassification {
  /** The code the model sees. */
  code: ErrorCode;
  /** The short message the model sees (scrubbed like every string). @default a generic message per code */
  message?: string;
  /** What the model should do next. @default the code's hint (`ERROR_CODE_DEFAULTS`) */
  hint?: string;
  /** Whether the same call may succeed later. @default the code's default */
  retryable?: boolean;
  /** How long to wait before retrying, in milliseconds. @default undefined */
  retryAfterMs?: number;
  /** Why, for the server log and the policy decision, e.g. `pg 57014 statement timeout`. @default 'classify hook' */
  reason?: string;
}

/** Maps a thrown error (anything) to a code; `undefined` leaves it to the built-in mapping. */
export type ClassifyError = (error: unknown) => ErrorClassification | undefined;

/** The settings a tool may override (core's `resolveToolOptions` merges them field by field). */
export interface RedactErrorsRules {
  /**
   * Extra patterns scrubbed from every string of an error result, after the defaults
   * (`ERROR_SCRUB_PATTERNS`). Each `{ name, pattern, replace }`; a non-global pattern is made global.
   * @default []
   */
  patterns: readonly SecretPattern[];
  /**
   * Maps thrown errors to codes before the built-in mapping (core's `classifyFailure`). Runs inside a
   * guard: a hook that throws is logged and ignored.
   * @default undefined
   */
  classify: ClassifyError | undefined;
  /** What the model reads when an unexpected error becomes `internal`. @default 'Internal error.' */
  internalMessage: string;
  /** Where the full error is logged (stderr JSON lines by default). Never stdout. @default ctx.logger */
  logger: Logger | undefined;
  /**
   * The most characters this middleware's own pass scrubs of one failure made below it (its strings
   * and keys together, each string counting at least 16): past it, strings are replaced by
   * `[withheld: too much text]` instead of being scrubbed, never passed on unscrubbed, and the failure
   * is logged under the incident id the model sees. The `scrubText` hook needs none: core bounds a
   * failure before any hook sees it. An integer of at least 8192. @default 65536 (64 KiB)
   */
  maxScrubChars: number;
}

/** Options of `createRedactErrors()`: the rules for all tools, per-tool overrides, and log throttling. */
export interface RedactErrorsOptions extends Partial<RedactErrorsRules>, PerToolOptions<RedactErrorsRules> {
  /**
   * Log throttling: after a failure class (tool, code, error code or name and throw site) is logged
   * with its full error, repeats within this many ms are counted into one summary line per interval.
   * @default 60000
   */
  logIntervalMs?: number;
}

/**
 * @deprecated Use `Partial<RedactErrorsRules>` (what `tools: { name: ... }` takes); kept for one release.
 */
export type RedactErrorsToolOptions = Partial<RedactErrorsRules>;

/** The middleware `createRedactErrors()` returns. */
export interface RedactErrors extends ToolMiddleware {
  /**
   * Core's boundary hook: the same internal-detail patterns (and the tool's own `patterns`) over every
   * string of every failure leaving the chain, also those made outside this middleware. An opted-out
   * tool's strings pass unchanged.
   */
  scrubText: (text: string, ctx: ToolContext) => string;
  /**
   * Core's hook for the structured `data` of a log message a call sends the client (`ctx.server.log`):
   * the same walk as a failure's `_meta`, keys and non-string values included (a `port`, a pg error's
   * `table`, `detail` or `where`). An opted-out tool's data passes unchanged.
   */
  scrubValue: (value: unknown, ctx: ToolContext) => unknown;
  /** Writes pending log summaries now (call it when the server shuts down). */
  close(): void;
}

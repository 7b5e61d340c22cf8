import type { ErrorCode, Logger, SecretPattern } from '@toolgate/core';

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

/** The settings one tool may override; see `RedactErrorsOptions`. */
export interface RedactErrorsToolOptions {
  /**
   * Extra patterns scrubbed from every string of an error result, after the defaults
   * (`ERROR_SCRUB_PATTERNS`). Each `{ name, pattern, replace }`; a non-global pattern is made global.
   * @default []
   */
  patterns?: readonly SecretPattern[];
  /**
   * Maps thrown errors to codes before the built-in mapping (pg, network, abort). Runs inside a
   * guard: a hook that throws is logged and ignored.
   * @default undefined
   */
  classify?: ClassifyError;
  /** What the model reads when an unexpected error becomes `internal`. @default 'Internal error.' */
  internalMessage?: string;
  /** Where the full error is logged (stderr JSON lines by default). Never stdout. @default ctx.logger */
  logger?: Logger;
}

/** Options of `redactErrors()`. */
export interface RedactErrorsOptions extends RedactErrorsToolOptions {
  /**
   * Per-tool settings by tool name: an object overrides the global value of each field it sets;
   * `false` opts the tool out (its results pass untouched, its throws reach core's last-resort guard).
   * @default {}
   */
  tools?: Record<string, RedactErrorsToolOptions | false>;
}

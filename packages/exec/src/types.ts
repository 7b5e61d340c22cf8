import type { ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { ErrorCode, InferArgs, InputSchema, Logger, ToolMiddleware } from '@toolgate/core';
import type { ArgEntry } from './arg-spec.js';
import type { ExecSlots } from './exec-slots.js';

/** Options shared by `safeExec` and `execTool`: what may run, where, with what, for how long. */
export interface ExecOptions {
  /**
   * Absolute, normalised paths of the programs that may run. The command must be one of them, and so
   * must the file it resolves to after symlinks. @default [command]
   */
  allow?: readonly string[];
  /** The working directory: absolute, must exist, fixed for every call. @default process.cwd() */
  cwd?: string;
  /** The program's whole environment (nothing else is inherited). @default { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' } */
  env?: Readonly<Record<string, string>>;
  /** Names of variables copied from this process's environment at creation, when set. @default [] */
  inheritEnv?: readonly string[];
  /** Wall-clock limit; past it the process tree is stopped and the call answers `timeout`. @default 10000 */
  timeoutMs?: number;
  /** Bytes kept of stdout and of stderr (each); the rest is cut with a note. @default 1048576 */
  maxOutputBytes?: number;
  /** Bytes one stream may write in all before the program is stopped for flooding. @default 4 * maxOutputBytes */
  killAfterOutputBytes?: number;
  /** Time between SIGTERM and SIGKILL to the process group. @default 2000 */
  killGraceMs?: number;
  /** Bytes of the stderr tail kept for failures and the log (secret-scrubbed). @default 2048 */
  stderrTailBytes?: number;
  /** Largest total size of the argv elements, in UTF-8 bytes. @default 131072 */
  maxArgvBytes?: number;
  /**
   * The pool of program slots this runs in (`createExecSlots`). A call that finds every slot taken
   * waits at most `timeoutMs` (or until its caller aborts), first come first served, then answers
   * `rate_limited`. @default the process's shared pool: 2 × CPUs at once, 4 × that waiting
   */
  slots?: ExecSlots;
  /**
   * The user and group the program runs as (Node's spawn `uid` and `gid`), with no supplementary groups:
   * then it cannot open the server's own descriptors through `/proc/<server pid>/fd/N` (the client's
   * stdout stream, an audit log) nor read its environment. Not root's user or group, not the server's
   * own user; the server must be able to switch users (root, or CAP_SETUID and CAP_SETGID), and the user
   * must be able to run the command and search the cwd: all checked at creation.
   * @default undefined (the program runs as the server's user)
   */
  runAs?: RunAs;
}

/** A user and group to run a program as: numeric ids, as Node's spawn takes them. */
export interface RunAs {
  /** The user id: an integer from 1 (root, 0, is refused). */
  readonly uid: number;
  /** The group id: an integer from 1 (root's group, 0, is refused). The program has no other group. */
  readonly gid: number;
}

/** Options of `safeExec`: the shared options plus the call's own signal and logger. */
export interface SafeExecOptions extends ExecOptions {
  /** Aborting it stops the process tree; the call then throws a `timeout` ToolError. @default undefined */
  signal?: AbortSignal;
  /** Where spawn failures are logged. Never stdout. @default createStderrLogger() */
  logger?: Logger;
}

/** What a finished program did. */
export interface ExecOutcome {
  /** The exit code, or null when a signal ended the program. */
  exitCode: number | null;
  /** The signal that ended the program, or null when it exited. */
  signal: NodeJS.Signals | null;
  /** stdout, UTF-8, at most `maxOutputBytes` (cut at a character boundary, never inside a credential value of `env`). */
  stdout: string;
  /** stderr, UTF-8, at most `maxOutputBytes` (cut at a character boundary, never inside a credential value of `env`). */
  stderr: string;
  /** Bytes written to stdout in all, kept or not. */
  stdoutBytes: number;
  /** Bytes written to stderr in all, kept or not. */
  stderrBytes: number;
  /** True when stdout or stderr was cut. */
  truncated: boolean;
  /** True when the program was stopped because a stream passed `killAfterOutputBytes`. */
  stoppedForOutput: boolean;
  /** The last `stderrTailBytes` of stderr, secret-scrubbed. */
  stderrTail: string;
  /** Wall-clock duration in milliseconds. */
  durationMs: number;
}

/** How a non-zero exit code reaches the model: a code, or a code with its own message and hint. */
export type ExitCodeMapping = ErrorCode | { code: ErrorCode; message?: string; hint?: string };

/** The declaration of a tool that runs one program. */
export interface ExecToolOptions<S extends InputSchema> extends ExecOptions {
  /** Unique `snake_case` tool name. */
  name: string;
  /** Optional display title. @default undefined */
  title?: string;
  /** When to use the tool, and when not. */
  description: string;
  /** The arguments the model passes: a zod shape or object. */
  input: S;
  /** Absolute path of the program to run. */
  command: string;
  /**
   * The program's argv (without argv[0]) for one call. Plain strings are the declaration's own; wrap
   * every value that comes from the input in `value()` or `option()`. `false`, `null` and `undefined`
   * entries are skipped (for `input.verbose && '--verbose'`).
   */
  args: (input: InferArgs<S>) => readonly ArgEntry[];
  /** Non-zero exit codes the program documents, mapped to what the model sees. @default {} (unavailable) */
  exitCodes?: Readonly<Record<number, ExitCodeMapping>>;
  /** Tool annotations published in `tools/list`. @default undefined */
  annotations?: ToolAnnotations;
  /** This tool's own middleware, run inside the server's global middleware. @default [] */
  middleware?: ToolMiddleware[];
}

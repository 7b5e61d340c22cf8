import { type ResolvedCommand, resolveCommand, resolveWorkingDirectory } from './command.js';
import { buildEnvironment, secretValuesOf, serverStartupEnvironment } from './environment.js';
import { type SlotPool, slotPoolOf } from './exec-slots.js';
import { resolveRunAs } from './run-as.js';
import type { ExecOptions, RunAs } from './types.js';

/** Every option checked and defaulted once, at creation. */
export interface NormalisedExecOptions {
  readonly command: ResolvedCommand;
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  /** Values of `env` and of the server's environment named like credentials, scrubbed from what the model sees (`scrubOutput`). */
  readonly secretValues: readonly string[];
  /** `secretValues` as UTF-8, encoded once for the output capture. */
  readonly secretBytes: readonly Buffer[];
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  readonly killAfterOutputBytes: number;
  readonly killGraceMs: number;
  readonly stderrTailBytes: number;
  readonly maxArgvBytes: number;
  /** Where a run takes its slot: the one given, or the process's default pool. */
  readonly slots: SlotPool;
  /** The user the program runs as, checked; undefined: the server's own. */
  readonly runAs: Readonly<RunAs> | undefined;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
export const DEFAULT_KILL_GRACE_MS = 2000;
export const DEFAULT_STDERR_TAIL_BYTES = 2048;
export const DEFAULT_MAX_ARGV_BYTES = 128 * 1024;

/** Checks the command, cwd and environment and fills in the defaults; throws a TypeError on a bad option. */
export function normaliseExecOptions(command: string, options: ExecOptions): NormalisedExecOptions {
  const maxOutputBytes = positive(options.maxOutputBytes, DEFAULT_MAX_OUTPUT_BYTES, 'maxOutputBytes');
  const killAfterOutputBytes = positive(
    options.killAfterOutputBytes,
    4 * maxOutputBytes,
    'killAfterOutputBytes',
  );
  if (killAfterOutputBytes < maxOutputBytes) {
    throw new TypeError('exec: killAfterOutputBytes must be at least maxOutputBytes');
  }
  const env = buildEnvironment(options.env, options.inheritEnv);
  // The server's own credentials too: the program can read them in /proc/<server pid>/environ.
  const secretValues = secretValuesOf(env, process.env, serverStartupEnvironment());
  const resolvedCommand = resolveCommand(command, options.allow);
  const cwd = resolveWorkingDirectory(options.cwd);
  return Object.freeze({
    command: resolvedCommand,
    cwd,
    env,
    secretValues,
    secretBytes: Object.freeze(secretValues.map((secret) => Buffer.from(secret))),
    timeoutMs: positive(options.timeoutMs, DEFAULT_TIMEOUT_MS, 'timeoutMs'),
    maxOutputBytes,
    killAfterOutputBytes,
    killGraceMs: positive(options.killGraceMs, DEFAULT_KILL_GRACE_MS, 'killGraceMs'),
    stderrTailBytes: positive(options.stderrTailBytes, DEFAULT_STDERR_TAIL_BYTES, 'stderrTailBytes'),
    maxArgvBytes: positive(options.maxArgvBytes, DEFAULT_MAX_ARGV_BYTES, 'maxArgvBytes'),
    slots: slotPoolOf(options.slots),
    runAs: resolveRunAs(options.runAs, resolvedCommand.real, cwd),
  });
}

function positive(candidate: number | undefined, fallback: number, name: string): number {
  if (candidate === undefined) return fallback;
  if (!Number.isSafeInteger(candidate) || candidate <= 0) {
    throw new TypeError(`exec: ${name} must be a positive integer, got ${String(candidate)}`);
  }
  return candidate;
}

import { createStderrLogger } from '@toolgate/core';
import type { ArgSpec } from './arg-spec.js';
import { buildArgv } from './argv.js';
import { normaliseExecOptions } from './options.js';
import { runProcess } from './run-process.js';
import type { ExecOutcome, SafeExecOptions } from './types.js';

/**
 * Runs one program without a shell and waits for it. `command` must be absolute and on `allow`
 * (default: itself); `argv` follows the same rules as `execTool`'s `args` (wrap values that are not
 * yours in `value()` / `option()`). Resolves with the outcome whatever the exit code.
 *
 * Throws a TypeError for a bad command or option, and a ToolError for the rest: `invalid_argument`
 * for a refused argv element (or arguments the system refuses as too long, E2BIG), `timeout` when
 * the deadline or `signal` stopped the program (its whole process group), `unavailable` when it
 * could not start. In a handler, a ToolError becomes the matching `fail()` result.
 *
 * The command, cwd and environment are checked on every call; a tool should use `execTool`, which
 * checks them once at definition.
 */
export async function safeExec(
  command: string,
  argv: readonly ArgSpec[],
  options: SafeExecOptions = {},
): Promise<ExecOutcome> {
  const normalised = normaliseExecOptions(command, options);
  const checked = buildArgv(argv, undefined, normalised.maxArgvBytes);
  return runProcess(normalised, checked, options.signal, options.logger ?? createStderrLogger());
}

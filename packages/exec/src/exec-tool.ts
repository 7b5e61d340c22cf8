import {
  defineTool,
  fail,
  type InferArgs,
  type InputSchema,
  isErrorCode,
  isToolError,
  ok,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
} from '@toolgate/core';
import * as z from 'zod';
import type { ArgEntry } from './arg-spec.js';
import { ArgumentRefusal } from './argument-refusal.js';
import { buildArgv, probeDeclaration } from './argv.js';
import { scrubOutput } from './environment.js';
import { type NormalisedExecOptions, normaliseExecOptions } from './options.js';
import { runProcess } from './run-process.js';
import type { ExecOutcome, ExecToolOptions, ExitCodeMapping } from './types.js';

const EXEC_OUTPUT = {
  exitCode: z.number().int().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  truncated: z.boolean(),
};

const FAILED_HINT =
  'The program reported an error (see the message). Do not repeat the same call; change the arguments or tell the user.';

/**
 * A tool that runs one allowlisted program, without a shell, with the argv its declaration builds
 * from the validated input. The command, cwd and environment are checked now (a TypeError names any
 * problem); each call checks its argv, runs the program under the limits and answers
 * `ok({ exitCode, stdout, stderr, truncated })`, or a failure the model can act on.
 */
export function execTool<const S extends InputSchema>(
  options: ExecToolOptions<S>,
): ToolDefinition<InferArgs<S>> {
  if (typeof options.args !== 'function') {
    throw new TypeError(`execTool(${options.name}): args must be a function of the input`);
  }
  const normalised = normaliseExecOptions(options.command, options);
  const exitCodes = checkExitCodes(options.name, options.exitCodes ?? {});
  const buildArgs = options.args;
  // Read once: a literal of the declaration is its own flag (`modelLedDash`).
  const source = Function.prototype.toString.call(buildArgs);
  const tool: ToolDefinition<InferArgs<S>> = defineTool({
    name: options.name,
    title: options.title,
    description: options.description,
    input: options.input,
    output: EXEC_OUTPUT,
    annotations: options.annotations,
    middleware: options.middleware,
    handler: async (args, ctx) => {
      let argv: string[];
      try {
        argv = buildArgv(
          buildArgs(args),
          args,
          normalised.maxArgvBytes,
          // The schema fixes which fields are probed alone, whatever the model sends.
          probeDeclaration(args, (probe) => probeArgs(buildArgs, probe), tool.inputSchema, source),
        );
      } catch (error) {
        if (!(error instanceof ArgumentRefusal)) throw error;
        return refuse(error, ctx);
      }
      let outcome: ExecOutcome;
      try {
        outcome = await runProcess(normalised, argv, ctx.signal, ctx.logger);
      } catch (error) {
        // The system refused the arguments at spawn (E2BIG): refused like an argv rule.
        if (error instanceof ArgumentRefusal) return refuse(error, ctx);
        if (isToolError(error) && error.code === 'timeout') {
          ctx.decisions.push({ by: 'exec', action: 'kill', reason: error.message });
        }
        throw error;
      }
      return resultOf(outcome, normalised, exitCodes, ctx);
    },
  });
  return tool;
}

/** A refused argument as the model sees it, recorded as a policy decision for audit and tracing. */
function refuse(error: ArgumentRefusal, ctx: Pick<ToolContext, 'decisions'>): ToolResult {
  ctx.decisions.push({
    by: 'exec',
    action: 'refuse',
    reason: error.message,
    detail: { fields: error.fields },
  });
  return fail('invalid_argument', error.message, { hint: error.hint, fields: error.fields });
}

/** The declaration's entries for a probe input; undefined when it throws on it (it may parse values). */
function probeArgs<A>(
  buildArgs: (input: A) => readonly unknown[],
  probe: unknown,
): readonly ArgEntry[] | undefined {
  try {
    const entries = buildArgs(probe as A);
    return Array.isArray(entries) ? (entries as readonly ArgEntry[]) : undefined;
  } catch {
    return undefined;
  }
}

function resultOf(
  outcome: ExecOutcome,
  options: NormalisedExecOptions,
  exitCodes: ReadonlyMap<number, ExitCodeMapping>,
  ctx: Pick<ToolContext, 'toolName' | 'request' | 'decisions' | 'logger'>,
): ToolResult {
  // Program output reaches the model on success too: scrub it with the one rule the rest of toolgate uses.
  // A stream past the cap was cut at its end: a secret written with controls inside may straddle it.
  const data = {
    exitCode: outcome.exitCode,
    stdout: scrubOutput(
      outcome.stdout,
      options.secretValues,
      false,
      outcome.stdoutBytes > options.maxOutputBytes,
    ),
    stderr: scrubOutput(
      outcome.stderr,
      options.secretValues,
      false,
      outcome.stderrBytes > options.maxOutputBytes,
    ),
    truncated: outcome.truncated,
  };
  if (outcome.stoppedForOutput) {
    ctx.decisions.push({ by: 'exec', action: 'kill', reason: 'output flood' });
    return ok(data, { note: outputNote(outcome, options) });
  }
  if (outcome.exitCode === 0) {
    return outcome.truncated ? ok(data, { note: outputNote(outcome, options) }) : ok(data);
  }
  const ended =
    outcome.exitCode === null ? `was stopped by ${outcome.signal}` : `exited with code ${outcome.exitCode}`;
  ctx.logger.warn(
    {
      tool: ctx.toolName,
      requestId: ctx.request.id,
      command: options.command.declared,
      exitCode: outcome.exitCode,
      signal: outcome.signal,
      stderrTail: outcome.stderrTail,
      durationMs: Math.round(outcome.durationMs),
    },
    `exec: the program ${ended}`,
  );
  // runProcess scrubs the tail already; scrubbing again here keeps the model-facing rule in one file.
  const tail = scrubOutput(outcome.stderrTail, options.secretValues).trim();
  const detail = tail === '' ? '' : ` stderr (last ${options.stderrTailBytes} bytes): ${tail}`;
  const mapped = outcome.exitCode === null ? undefined : exitCodes.get(outcome.exitCode);
  if (mapped !== undefined) {
    const { code, message, hint } = typeof mapped === 'string' ? { code: mapped } : mapped;
    return fail(code, `${message ?? `The program ${ended}.`}${detail}`, hint === undefined ? {} : { hint });
  }
  return fail('unavailable', `The program ${ended}.${detail}`, { hint: FAILED_HINT, retryable: false });
}

function outputNote(outcome: ExecOutcome, options: NormalisedExecOptions): string {
  const cut = [
    outcome.stdoutBytes > options.maxOutputBytes ? `stdout (${outcome.stdoutBytes} bytes)` : undefined,
    outcome.stderrBytes > options.maxOutputBytes ? `stderr (${outcome.stderrBytes} bytes)` : undefined,
  ].filter((part) => part !== undefined);
  const stopped = outcome.stoppedForOutput
    ? ` The program kept writing past ${options.killAfterOutputBytes} bytes and was stopped before it finished.`
    : '';
  return `Output cut to the first ${options.maxOutputBytes} bytes: ${cut.join(' and ')}.${stopped} Narrow the request for a complete answer.`;
}

function checkExitCodes(
  name: string,
  exitCodes: Readonly<Record<number, ExitCodeMapping>>,
): ReadonlyMap<number, ExitCodeMapping> {
  const map = new Map<number, ExitCodeMapping>();
  for (const [key, mapping] of Object.entries(exitCodes)) {
    const exitCode = Number(key);
    if (!Number.isInteger(exitCode) || exitCode < 1 || exitCode > 255) {
      throw new TypeError(`execTool(${name}): exitCodes key ${key} is not an exit code from 1 to 255`);
    }
    const code: unknown = typeof mapping === 'string' ? mapping : mapping?.code;
    if (!isErrorCode(code)) {
      throw new TypeError(`execTool(${name}): exitCodes[${key}] is not an error code`);
    }
    if (code === 'internal') {
      throw new TypeError(
        `execTool(${name}): map exit code ${key} to a code the model can act on, not internal`,
      );
    }
    map.set(exitCode, mapping);
  }
  return map;
}

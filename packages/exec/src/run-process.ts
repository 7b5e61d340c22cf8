import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process';
import { createDeadline, type Logger, ToolError } from '@toolgate/core';
import { ArgumentRefusal } from './argument-refusal.js';
import { scrubOutput } from './environment.js';
import { releaseGroup, watchGroup } from './group-reaper.js';
import type { NormalisedExecOptions } from './options.js';
import { OutputCapture } from './output-capture.js';
import { GROUP_EMPTY, signalProcessTree, whenGroupGone } from './process-tree.js';
import type { ExecOutcome } from './types.js';

// After the child exits, how long pipes still held open by an escaped descendant may delay the result.
const PIPE_DRAIN_MS = 250;

type StopReason = 'timeout' | 'aborted' | 'output';

/**
 * Takes a slot of the options' pool (waiting, if need be, at most `timeoutMs` or until `signal`
 * aborts), spawns the checked command with an already checked argv and waits for it and its process
 * group. Resolves with the outcome (any exit code); throws a `timeout` ToolError when the deadline or
 * the signal stopped it, `rate_limited` when no slot came free, `unavailable` when it could not start.
 * The slot is given back on every path, once the program's process group is gone.
 */
export function runProcess(
  options: NormalisedExecOptions,
  argv: readonly string[],
  signal: AbortSignal | undefined,
  logger: Logger,
): Promise<ExecOutcome> {
  if (signal?.aborted) {
    return Promise.reject(cancelledBeforeStart());
  }
  const slot = options.slots.take(signal, options.timeoutMs);
  if (slot === true) return spawnInSlot(options, argv, signal, logger);
  return slot.then(() => spawnInSlot(options, argv, signal, logger));
}

function cancelledBeforeStart(): ToolError {
  return new ToolError('timeout', 'The call was cancelled before the program started.');
}

/** runProcess once a slot is held: every way out gives it back, exactly once. */
function spawnInSlot(
  options: NormalisedExecOptions,
  argv: readonly string[],
  signal: AbortSignal | undefined,
  logger: Logger,
): Promise<ExecOutcome> {
  if (signal?.aborted) {
    options.slots.release();
    return Promise.reject(cancelledBeforeStart());
  }
  const spawnOptions: SpawnOptions = {
    shell: false,
    cwd: options.cwd,
    // A copy: Node's spawn adds NODE_V8_COVERAGE (set under c8 and the like) to the env it is given,
    // which throws on the frozen one. Named undefined, it stays out of the program's environment.
    env: { NODE_V8_COVERAGE: undefined, ...options.env },
    argv0: options.command.declared,
    stdio: ['ignore', 'pipe', 'pipe'],
    // A group of its own, so the whole tree can be signalled at once (see process-tree.ts).
    detached: true,
    windowsHide: true,
    // Another user (setgroups(0), setgid, setuid in the child): it cannot open the server's /proc files.
    ...(options.runAs === undefined ? {} : { uid: options.runAs.uid, gid: options.runAs.gid }),
  };
  // Guard against a future edit: nothing here may ever go through a shell.
  if (spawnOptions.shell !== false) {
    options.slots.release();
    throw new Error('exec: refusing to spawn through a shell');
  }
  const started = performance.now();
  const stdout = new OutputCapture(options.maxOutputBytes, 0, options.secretBytes);
  const stderr = new OutputCapture(options.maxOutputBytes, options.stderrTailBytes, options.secretBytes);

  return new Promise<ExecOutcome>((resolveRun, rejectRun) => {
    // The slot goes back before the caller hears the answer: when a tool answers, its slot is free.
    const resolve = (outcome: ExecOutcome): void => {
      options.slots.release();
      resolveRun(outcome);
    };
    const reject = (error: unknown): void => {
      options.slots.release();
      rejectRun(error);
    };
    let child: ChildProcess;
    try {
      child = spawn(options.command.real, [...argv], spawnOptions);
    } catch (error) {
      reject(spawnFailure(options, error, logger));
      return;
    }
    // Spawned: stopped by the reaper if this server dies before the program ends (see group-reaper.ts).
    if (child.pid !== undefined) watchGroup(child.pid, options.killGraceMs, logger);
    let stopReason: StopReason | undefined;
    let settled = false;
    // Set at exit: the group's last members gone (or given up on). The answer waits for it.
    let groupGone: Promise<boolean> | true = true;
    const timers: NodeJS.Timeout[] = [];

    // A group that cannot be signalled is logged, never thrown: this runs in timers and events.
    // True when the group held no process any more.
    const signalTree = (signalName: NodeJS.Signals): boolean => {
      const error = signalProcessTree(child, signalName);
      if (error === GROUP_EMPTY) return true;
      if (error === undefined) return false;
      logger.warn(
        { err: error, command: options.command.declared, pid: child.pid, signal: signalName },
        'exec: could not signal the program’s process group; signalled the program itself',
      );
      return false;
    };
    const stop = (reason: StopReason): void => {
      if (stopReason !== undefined) return;
      stopReason = reason;
      signalTree('SIGTERM');
      timers.push(setTimeout(() => signalTree('SIGKILL'), options.killGraceMs).unref());
    };
    // Core's deadline: one signal for the caller's abort and the time limit; which fired decides the message.
    // Released once the program is done: its timer and its listener on the call's signal go with it.
    const limit = createDeadline(signal, options.timeoutMs);
    const deadline = limit.signal;
    const onDeadline = (): void => stop(signal?.aborted ? 'aborted' : 'timeout');
    const cleanUp = (): void => {
      for (const timer of timers) clearTimeout(timer);
      deadline.removeEventListener('abort', onDeadline);
      limit.release();
    };
    const watch = (stream: NodeJS.ReadableStream | null, capture: OutputCapture): void => {
      stream?.on('data', (chunk: Buffer) => {
        capture.push(chunk);
        if (capture.total > options.killAfterOutputBytes) stop('output');
      });
    };

    watch(child.stdout, stdout);
    watch(child.stderr, stderr);
    deadline.addEventListener('abort', onDeadline, { once: true });

    child.on('error', (error) => {
      // Only a failed spawn has no pid; signalling errors are handled where they happen.
      if (settled || child.pid !== undefined) return;
      settled = true;
      cleanUp();
      reject(spawnFailure(options, error, logger));
    });
    child.on('exit', () => {
      // The program finished: a deadline noticed later (while the pipes drain) did not stop it, and
      // answering timeout would have the model retry a run that completed.
      deadline.removeEventListener('abort', onDeadline);
      // Descendants left behind in the group are stopped with it: a tool call leaves no processes.
      const empty = signalTree('SIGKILL');
      if (child.pid !== undefined) {
        releaseGroup(child.pid);
        // Usually empty already (the program started nothing): no wait, no further check.
        if (!empty) groupGone = whenGroupGone(child.pid, options.killGraceMs);
      }
      // A descendant that left the group may still hold the pipes open; do not wait for it forever.
      timers.push(
        setTimeout(() => {
          child.stdout?.destroy();
          child.stderr?.destroy();
        }, PIPE_DRAIN_MS).unref(),
      );
    });
    child.on('close', (exitCode: number | null, exitSignal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      cleanUp();
      const answer = (): void => {
        if (stopReason === 'timeout') {
          reject(
            new ToolError(
              'timeout',
              `The program ran past its ${options.timeoutMs} ms limit and was stopped.`,
            ),
          );
          return;
        }
        if (stopReason === 'aborted') {
          reject(new ToolError('timeout', 'The call was cancelled and the program was stopped.'));
          return;
        }
        resolve({
          exitCode,
          signal: exitSignal,
          stdout: stdout.text(),
          stderr: stderr.text(),
          stdoutBytes: stdout.total,
          stderrBytes: stderr.total,
          truncated: stdout.truncated || stderr.truncated,
          stoppedForOutput: stopReason === 'output',
          // Past stderrTailBytes the tail starts at a cut (see scrubOutput).
          stderrTail: scrubOutput(
            stderr.tailText(),
            options.secretValues,
            stderr.total > options.stderrTailBytes,
          ),
          durationMs: performance.now() - started,
        });
      };
      // The slot is held until the group is gone, not just the program: its children hold memory and pids too.
      if (groupGone === true) {
        answer();
        return;
      }
      void groupGone.then((gone) => {
        if (!gone) {
          logger.warn(
            { command: options.command.declared, pid: child.pid, waitedMs: options.killGraceMs },
            'exec: processes of the program’s group outlived SIGKILL; its slot is given back all the same',
          );
        }
        answer();
      });
    });
  });
}

function spawnFailure(options: NormalisedExecOptions, error: unknown, logger: Logger): ToolError {
  if ((error as NodeJS.ErrnoException | undefined)?.code === 'E2BIG') {
    // The model's arguments and the environment together passed the system's limit (ARG_MAX): the
    // model's to fix, not a failing dependency (unavailable would open a breaker for every caller).
    logger.warn(
      { command: options.command.declared, err: error },
      'exec: the arguments and environment are too long for the system',
    );
    return new ArgumentRefusal('The arguments are too long for the system.', 'Pass shorter values.', {
      path: '(arguments)',
      expected: 'shorter arguments',
    });
  }
  logger.error(
    {
      command: options.command.declared,
      real: options.command.real,
      cwd: options.cwd,
      ...(options.runAs === undefined ? {} : { runAs: options.runAs }),
      err: error,
    },
    'exec: the program could not be started',
  );
  // Logged here in full (with the command and cwd); no `cause`, so core does not log it twice.
  return new ToolError('unavailable', 'The program could not be started.');
}

import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import { ArgumentRefusal } from '../src/argument-refusal.js';
import { option, safeExec, value } from '../src/index.js';
import { BEHAVE, ECHO, expectGone, NODE, readPids, scratchDir } from './harness.js';

const sandbox = scratchDir();

describe('safeExec', () => {
  it('runs the program without a shell and resolves with the exact outcome', async () => {
    const outcome = await safeExec(NODE, [ECHO, value('$(id); `id` | cat /etc/passwd'), option('--x', '*')], {
      cwd: sandbox,
      env: { ONLY: 'this' },
    });
    expect(outcome).toEqual({
      exitCode: 0,
      signal: null,
      stdout: JSON.stringify({
        argv: ['$(id); `id` | cat /etc/passwd', '--x', '*'],
        env: { ONLY: 'this' },
        cwd: sandbox,
      }),
      stderr: '',
      stdoutBytes: outcome.stdout.length,
      stderrBytes: 0,
      truncated: false,
      stoppedForOutput: false,
      stderrTail: '',
      durationMs: outcome.durationMs,
    });
    expect(outcome.durationMs).toBeGreaterThan(0);
  });

  it('resolves with a non-zero exit code and the scrubbed stderr tail', async () => {
    const outcome = await safeExec(NODE, [BEHAVE, 'exit', '4', 'token=abc123 oops'], { cwd: sandbox });
    expect(outcome.exitCode).toBe(4);
    expect(outcome.stderr).toBe('token=abc123 oops');
    expect(outcome.stderrTail).toBe('token=[REDACTED] oops');
  });

  it('throws an invalid_argument ArgumentRefusal for a tagged value that starts with "-"', async () => {
    const call = safeExec(NODE, [ECHO, value('--inspect=0.0.0.0:9229')]);
    await expect(call).rejects.toThrow(ArgumentRefusal);
    await expect(call).rejects.toMatchObject({
      code: 'invalid_argument',
      message: 'Argument argv[1] may not start with "-".',
      fields: [{ path: 'argv[1]', expected: 'a value that does not start with "-"' }],
    });
  });

  it('throws for NUL and line breaks in any element, fixed or tagged', async () => {
    await expect(safeExec(NODE, [ECHO, 'a\0b'])).rejects.toThrow(
      'Argument argv[1] contains a NUL byte or a line break.',
    );
    await expect(safeExec(NODE, [ECHO, value('a\nb')])).rejects.toThrow(
      'contains a NUL byte or a line break',
    );
    await expect(safeExec(NODE, [ECHO, option('--q', 'a\rb')])).rejects.toThrow(
      'contains a NUL byte or a line break',
    );
  });

  it('throws when the arguments are too long in all', async () => {
    await expect(safeExec(NODE, [ECHO, value('x'.repeat(200))], { maxArgvBytes: 100 })).rejects.toThrow(
      /^The arguments are too long \(\d+ bytes; at most 100\)\.$/,
    );
  });

  it('throws a TypeError for a command off the allowlist, checked on every call', async () => {
    await expect(safeExec('/bin/sh', ['-c', 'true'], { allow: [NODE] })).rejects.toThrow(
      'exec: command /bin/sh is not on the allowlist',
    );
    await expect(safeExec('sh', [])).rejects.toThrow(TypeError);
  });

  it('stops the whole process tree and throws timeout when the signal aborts', async () => {
    const pidFile = path.join(sandbox, 'safe-abort.pids');
    const controller = new AbortController();
    const call = safeExec(NODE, [BEHAVE, 'tree', pidFile], { signal: controller.signal, killGraceMs: 200 });
    const pids = await readPids(pidFile);
    controller.abort();
    await expect(call).rejects.toMatchObject({
      code: 'timeout',
      message: 'The call was cancelled and the program was stopped.',
    });
    await expectGone(pids.child);
    await expectGone(pids.grandchild);
  });

  it('does not start the program when the signal is already aborted', async () => {
    const pidFile = path.join(sandbox, 'never.pids');
    await expect(safeExec(NODE, [BEHAVE, 'tree', pidFile], { signal: AbortSignal.abort() })).rejects.toThrow(
      'The call was cancelled before the program started.',
    );
  });

  it('logs a spawn failure and throws unavailable', async () => {
    // Passes every check (an executable regular file), but execve fails: its interpreter does not exist.
    const script = path.join(sandbox, 'bad-interpreter');
    writeFileSync(script, '#!/nonexistent/interpreter\n');
    chmodSync(script, 0o755);
    const logs: LogEntry[] = [];
    await expect(safeExec(script, [], { logger: recordingLogger(logs) })).rejects.toMatchObject({
      code: 'unavailable',
      message: 'The program could not be started.',
    });
    expect(logs).toHaveLength(1);
    expect(logs[0]?.message).toBe('exec: the program could not be started');
    expect(logs[0]?.fields).toMatchObject({ command: script, real: script, cwd: process.cwd() });
    expect((logs[0]!.fields.err as NodeJS.ErrnoException).code).toBe('ENOENT');
  });
});

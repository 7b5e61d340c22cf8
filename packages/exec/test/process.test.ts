import { chmodSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { PolicyDecision, ToolMiddleware } from '@toolgate/core';
import { expectFailure, type LogEntry, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { execTool, value } from '../src/index.js';
import { BEHAVE, ECHO, expectGone, NODE, readPids, scratchDir, serve } from './harness.js';

const sandbox = scratchDir();

process.env.TOOLGATE_EXEC_SECRET = 'sk_live_abcdefghijklmnop';
process.env.TOOLGATE_EXEC_SHARED = 'shared-value';

const echoEnv = execTool({
  name: 'echo_env',
  description: 'Echoes env and cwd (test).',
  input: {},
  command: NODE,
  cwd: sandbox,
  env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
  inheritEnv: ['TOOLGATE_EXEC_SHARED', 'TOOLGATE_EXEC_UNSET'],
  args: () => [ECHO],
});

const echoDefaults = execTool({
  name: 'echo_defaults',
  description: 'Echoes env and cwd with the default options (test).',
  input: {},
  command: NODE,
  args: () => [ECHO],
});

const behave = execTool({
  name: 'behave',
  description: 'Runs the misbehaving fixture (test).',
  input: { mode: z.string(), args: z.array(z.string()).default([]) },
  command: NODE,
  cwd: sandbox,
  timeoutMs: 4000,
  killGraceMs: 300,
  maxOutputBytes: 1000,
  killAfterOutputBytes: 200_000,
  exitCodes: {
    2: 'not_found',
    3: { code: 'permission_denied', message: 'That report is private.', hint: 'Ask the report owner.' },
  },
  args: (input) => [BEHAVE, value(input.mode), ...input.args.map((text) => value(text))],
});

let client: TestClient | undefined;
let logs: LogEntry[] = [];
afterEach(async () => {
  await client?.close();
  client = undefined;
  logs = [];
});

async function connect(): Promise<TestClient> {
  client = await serve([echoEnv, echoDefaults, behave], recordingLogger(logs));
  return client;
}

describe('environment and working directory', () => {
  it('gives the program only the named variables; a secret of the server never reaches it', async () => {
    const { callToolJson } = await connect();
    const body = (await callToolJson('echo_env', {})) as { stdout: string };
    const seen = JSON.parse(body.stdout) as { env: Record<string, string>; cwd: string };
    expect(seen.env).toEqual({
      PATH: '/usr/bin:/bin',
      LANG: 'C.UTF-8',
      TOOLGATE_EXEC_SHARED: 'shared-value',
    });
    expect(seen.cwd).toBe(sandbox);
  });

  it("defaults to PATH and LANG only, in the server's working directory", async () => {
    const { callToolJson } = await connect();
    const body = (await callToolJson('echo_defaults', {})) as { stdout: string };
    const seen = JSON.parse(body.stdout) as { env: Record<string, string>; cwd: string };
    expect(seen.env).toEqual({ PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' });
    expect(seen.cwd).toBe(process.cwd());
  });

  it('runs under a coverage tool (NODE_V8_COVERAGE set in the server), and the variable stays out of the program', async () => {
    // Node's spawn adds NODE_V8_COVERAGE to the env it is given; a frozen env made every call fail.
    const before = process.env.NODE_V8_COVERAGE;
    process.env.NODE_V8_COVERAGE = path.join(sandbox, 'coverage');
    try {
      const { callToolJson } = await connect();
      const body = (await callToolJson('echo_defaults', {})) as { stdout: string };
      expect((JSON.parse(body.stdout) as { env: Record<string, string> }).env).toEqual({
        PATH: '/usr/bin:/bin',
        LANG: 'C.UTF-8',
      });
    } finally {
      if (before === undefined) delete process.env.NODE_V8_COVERAGE;
      else process.env.NODE_V8_COVERAGE = before;
    }
  });
});

describe('process tree', () => {
  it('stops the program and its grandchild at the timeout, answers timeout and records the kill', async () => {
    const decisions: PolicyDecision[] = [];
    const record: ToolMiddleware = async (ctx, next) => {
      const result = await next();
      decisions.push(...ctx.decisions);
      return result;
    };
    client = await serve([behave], recordingLogger(logs), [record]);
    const { callTool } = client;
    const pidFile = path.join(sandbox, 'timeout.pids');
    const call = callTool('behave', { mode: 'tree', args: [pidFile] });
    const pids = await readPids(pidFile);
    expect(expectFailure(await call)).toEqual({
      ok: false,
      error: 'timeout',
      message: 'The program ran past its 4000 ms limit and was stopped.',
      hint: 'The call took too long. Retry once, with narrower arguments if possible.',
      retryable: true,
    });
    expect(decisions).toEqual([
      { by: 'exec', action: 'kill', reason: 'The program ran past its 4000 ms limit and was stopped.' },
    ]);
    await expectGone(pids.child);
    await expectGone(pids.grandchild);
  });

  it('survives a process group it may not signal (EPERM): stops the program itself, logs, answers timeout', async () => {
    // As root no kill fails, so the kernel's answer for a group of only setuid processes is played
    // by process.kill for group signals (negative pids); everything else goes to the real one.
    const realKill = process.kill.bind(process);
    const kill = vi.spyOn(process, 'kill').mockImplementation((pid: number, signal?: string | number) => {
      if (pid < 0) throw Object.assign(new Error('kill EPERM'), { code: 'EPERM', syscall: 'kill' });
      return realKill(pid, signal);
    });
    const pidFile = path.join(sandbox, 'eperm.pids');
    let pids: { child: number; grandchild: number } | undefined;
    try {
      const { callTool } = await connect();
      const call = callTool('behave', { mode: 'tree', args: [pidFile] });
      pids = await readPids(pidFile);
      expect(expectFailure(await call).error).toBe('timeout');
      await expectGone(pids.child);
      const warnings = logs.filter((entry) => entry.level === 'warn');
      expect(warnings.length).toBeGreaterThan(0);
      expect(warnings[0]!.message).toMatch(/could not signal the program’s process group/);
      expect(warnings[0]!.fields).toMatchObject({ pid: pids.child, signal: 'SIGTERM' });
    } finally {
      kill.mockRestore();
      // The grandchild stayed in the group nobody could signal: the test cleans it up itself.
      if (pids !== undefined) {
        try {
          process.kill(pids.grandchild, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
  });

  it('follows SIGTERM with SIGKILL when the tree ignores SIGTERM', async () => {
    const { callTool } = await connect();
    const pidFile = path.join(sandbox, 'stubborn.pids');
    const call = callTool('behave', { mode: 'tree', args: [pidFile, 'ignore-term'] });
    const pids = await readPids(pidFile);
    expect(expectFailure(await call).error).toBe('timeout');
    await expectGone(pids.child);
    await expectGone(pids.grandchild);
  });

  it('stops the program and its grandchild when the client cancels the call', async () => {
    const { callTool } = await connect();
    const pidFile = path.join(sandbox, 'abort.pids');
    const controller = new AbortController();
    const call = callTool('behave', { mode: 'tree', args: [pidFile] }, { signal: controller.signal });
    const pids = await readPids(pidFile);
    controller.abort(new Error('user cancelled'));
    await expect(call).rejects.toThrow('user cancelled');
    await expectGone(pids.child);
    await expectGone(pids.grandchild);
  });

  it('stops a grandchild left behind by a program that exited normally', async () => {
    const { callTool } = await connect();
    const pidFile = path.join(sandbox, 'leave.pids');
    const result = await callTool('behave', { mode: 'leave-behind', args: [pidFile] });
    expect(result.structuredContent).toEqual({
      ok: true,
      exitCode: 0,
      stdout: 'done',
      stderr: '',
      truncated: false,
    });
    const pids = await readPids(pidFile);
    await expectGone(pids.grandchild);
  });
});

describe('a deadline that fires after the program exited', () => {
  it('answers with what the program did, not timeout (a retry would run a finished side effect again)', async () => {
    // The program exits long before its limit; a busy server notices the deadline only in the moment
    // between the exit and the end of the pipes (a descendant still holds them, here until the group
    // kill that follows the exit). The server is held up exactly there: the group kill first waits
    // past the deadline, as a loaded event loop would.
    const quick = execTool({
      name: 'quick',
      description: 'Runs the misbehaving fixture with a short limit (test).',
      input: { pidFile: z.string() },
      command: NODE,
      cwd: sandbox,
      // Room for the fixture's own start on a loaded machine (at 500 ms it ran out under load, and the
      // call was a genuine timeout); the hold below then runs a second past this limit.
      timeoutMs: 3000,
      args: (input) => [BEHAVE, 'leave-behind', value(input.pidFile)],
    });
    const realKill = process.kill.bind(process);
    let held = false;
    let calledAt = 0;
    const kill = vi.spyOn(process, 'kill').mockImplementation((pid: number, signal?: string | number) => {
      if (pid < 0 && signal === 'SIGKILL' && !held) {
        held = true;
        const pastDeadline = calledAt + 3000 + 1000 - performance.now();
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Math.max(100, pastDeadline));
      }
      return realKill(pid, signal);
    });
    try {
      client = await serve([quick], recordingLogger(logs));
      calledAt = performance.now();
      const result = await client.callTool('quick', { pidFile: path.join(sandbox, 'late-deadline.pids') });
      expect(held).toBe(true);
      expect(result.structuredContent).toEqual({
        ok: true,
        exitCode: 0,
        stdout: 'done',
        stderr: '',
        truncated: false,
      });
    } finally {
      kill.mockRestore();
    }
  });
});

describe('output cap', () => {
  it('keeps the first maxOutputBytes and says so in a note', async () => {
    const { callTool } = await connect();
    const result = await callTool('behave', { mode: 'write', args: ['3000', 'a'] });
    expect(result.structuredContent).toEqual({
      ok: true,
      exitCode: 0,
      stdout: 'a'.repeat(1000),
      stderr: '',
      truncated: true,
      note: 'Output cut to the first 1000 bytes: stdout (3000 bytes). Narrow the request for a complete answer.',
    });
  });

  it('never splits a multi-byte character at the cut', async () => {
    const { callToolJson } = await connect();
    // The cap is 1000 bytes. 'ééééa' is 9 bytes: 111 copies end at byte 999 and the next 'é' straddles the cut.
    const twoByte = (await callToolJson('behave', { mode: 'write', args: ['200', 'ééééa'] })) as {
      stdout: string;
    };
    expect(twoByte.stdout).toBe('ééééa'.repeat(111));
    // 3-byte characters: 333 × 3 = 999 bytes, the 334th straddles the cut.
    const threeByte = (await callToolJson('behave', { mode: 'write', args: ['400', '日'] })) as {
      stdout: string;
    };
    expect(threeByte.stdout).toBe('日'.repeat(333));
    // 'xxx🙂' is 7 bytes: 142 copies end at byte 994, three x follow, and the cut falls after 3 of the emoji's 4 bytes.
    const fourByte = (await callToolJson('behave', { mode: 'write', args: ['200', 'xxx🙂'] })) as {
      stdout: string;
    };
    expect(fourByte.stdout).toBe(`${'xxx🙂'.repeat(142)}xxx`);
    expect(`${twoByte.stdout}${threeByte.stdout}${fourByte.stdout}`).not.toContain('\uFFFD');
  });

  it('stops a program that keeps writing far past the cap, and returns what was kept', async () => {
    const { callTool } = await connect();
    const result = await callTool('behave', { mode: 'flood' });
    const body = result.structuredContent as Record<string, unknown>;
    expect(body).toMatchObject({
      ok: true,
      exitCode: null,
      stdout: 'x'.repeat(1000),
      stderr: '',
      truncated: true,
    });
    expect(body.note).toMatch(
      /^Output cut to the first 1000 bytes: stdout \(\d+ bytes\)\. The program kept writing past 200000 bytes and was stopped before it finished\. Narrow the request for a complete answer\.$/,
    );
  });
});

describe('failures', () => {
  it('answers a non-zero exit with the exit code and the secret-scrubbed stderr tail, and logs it', async () => {
    const { callTool } = await connect();
    const stderr = 'failed: password=hunter2 Authorization: Bearer abc.def key sk_live_abcdefghijklmnop';
    expect(expectFailure(await callTool('behave', { mode: 'exit', args: ['7', stderr] }))).toEqual({
      ok: false,
      error: 'unavailable',
      message:
        'The program exited with code 7. stderr (last 2048 bytes): failed: password=[REDACTED] Authorization: Bearer [REDACTED] key [REDACTED]',
      hint: 'The program reported an error (see the message). Do not repeat the same call; change the arguments or tell the user.',
      retryable: false,
    });
    const warning = logs.find((entry) => entry.level === 'warn');
    expect(warning?.message).toBe('exec: the program exited with code 7');
    expect(warning?.fields).toMatchObject({
      tool: 'behave',
      command: NODE,
      exitCode: 7,
      signal: null,
      stderrTail: 'failed: password=[REDACTED] Authorization: Bearer [REDACTED] key [REDACTED]',
    });
  });

  it('keeps only the last 2 KiB of a long stderr', async () => {
    const { callTool } = await connect();
    const envelope = expectFailure(await callTool('behave', { mode: 'stderr-lines', args: ['1000', '1'] }));
    let all = '';
    for (let line = 1; line <= 1000; line += 1) all += `line ${String(line).padStart(5, '0')}\n`;
    expect(envelope.message).toBe(
      `The program exited with code 1. stderr (last 2048 bytes): ${all.slice(-2048).trim()}`,
    );
  });

  it('answers a program ended by a signal', async () => {
    const { callTool } = await connect();
    const envelope = expectFailure(await callTool('behave', { mode: 'signal', args: ['SIGSEGV'] }));
    expect(envelope.message).toBe('The program was stopped by SIGSEGV.');
    expect(envelope.error).toBe('unavailable');
  });

  it('maps the exit codes the declaration names', async () => {
    const { callTool } = await connect();
    expect(expectFailure(await callTool('behave', { mode: 'exit', args: ['2', 'no such order'] }))).toEqual({
      ok: false,
      error: 'not_found',
      message: 'The program exited with code 2. stderr (last 2048 bytes): no such order',
      hint: 'Nothing matches. Check the identifier or try other criteria; do not repeat the same call.',
      retryable: false,
    });
    expect(expectFailure(await callTool('behave', { mode: 'exit', args: ['3', ''] }))).toEqual({
      ok: false,
      error: 'permission_denied',
      message: 'That report is private.',
      hint: 'Ask the report owner.',
      retryable: false,
    });
  });

  it('answers unavailable and logs the cause when the program cannot be started', async () => {
    const script = path.join(sandbox, 'tool.sh');
    writeFileSync(script, '#!/bin/sh\necho hi\n');
    chmodSync(script, 0o755);
    const tool = execTool({
      name: 'script',
      description: 'A script (test).',
      input: {},
      command: script,
      args: () => [],
    });
    chmodSync(script, 0o644);
    client = await serve([tool], recordingLogger(logs));
    expect(expectFailure(await client.callTool('script', {}))).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'The program could not be started.',
      hint: 'A service this tool depends on is unavailable. Do not retry now; tell the user and try once later.',
      retryable: true,
    });
    expect(logs).toHaveLength(1);
    expect(logs[0]?.level).toBe('error');
    expect(logs[0]?.message).toBe('exec: the program could not be started');
    expect((logs[0]!.fields.err as NodeJS.ErrnoException).code).toBe('EACCES');
    rmSync(script);
  });
});

import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { type Logger, registerTools, type ToolDefinition, type ToolMiddleware } from '@toolgate/core';
import { connectTestClient, type TestClient } from '@toolgate/core/testing';
import { afterAll, inject, it } from 'vitest';

/** The node binary itself (symlinks resolved), the one program every test runs. */
export const NODE = realpathSync(process.execPath);
const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
/** Prints JSON of its argv, env and cwd. */
export const ECHO = path.join(fixtures, 'echo.mjs');
/** Exits, floods, spawns grandchildren... as its first argument says. */
export const BEHAVE = path.join(fixtures, 'behave.mjs');

/**
 * The JavaScript of a TypeScript fixture (`define-run-as.ts`, a `*-server.ts`), transpiled once per run
 * by test/global-setup.ts: `node <this path>` runs it, src/ included, with no loader.
 */
export function compiledFixture(name: string): string {
  return path.join(inject('compiledFixtures'), name.replace(/\.ts$/, '.js'));
}

const scratchDirs: string[] = [];
// Each test file imports its own copy of this module: its scratch directories go when the file ends.
afterAll(() => {
  for (const dir of scratchDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory under the system temp dir, symlinks resolved; removed when the test file ends. */
export function scratchDir(): string {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'toolgate-exec-')));
  scratchDirs.push(dir);
  return dir;
}

/** A real McpServer with the tools registered, and a real SDK client connected to it. */
export async function serve(
  tools: ToolDefinition[],
  logger: Logger,
  middleware: ToolMiddleware[] = [],
): Promise<TestClient> {
  const server = new McpServer({ name: 'exec-test', version: '1.0.0' });
  registerTools(server, tools, { logger, middleware });
  return connectTestClient(server);
}

/** Polls `done` every 20 ms until it holds; throws after `timeoutMs` (a wait, never an assertion on time). */
export async function until(done: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The pids a `behave.mjs tree` program wrote, once it has written them. */
export async function readPids(pidFile: string): Promise<{ child: number; grandchild: number }> {
  await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('}'), pidFile);
  return JSON.parse(readFileSync(pidFile, 'utf8')) as { child: number; grandchild: number };
}

/** The state letter of `/proc/<pid>/stat` (R, S, Z...), or undefined once the pid has no entry. */
function stateOf(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  // `pid (comm) state ...`: comm may hold spaces and parentheses, so the state follows its last `)`.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
}

function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return true;
    throw error;
  }
  // Still signalable: gone all the same once it has exited and only its exit status waits for a
  // parent (a zombie, Z; X while the kernel frees it). A killed orphan's parent is init, and some
  // container inits reap only every second or two: waiting for the reap timed init, not the kill.
  const state = stateOf(pid);
  return state === undefined || state === 'Z' || state === 'X';
}

/**
 * Resolves once the process has ended: `process.kill(pid, 0)` throws ESRCH, or it is a zombie that
 * only waits to be reaped. Polls.
 */
export async function expectGone(pid: number): Promise<void> {
  await until(() => isGone(pid), `pid ${pid} to be gone`);
}

/** Whether `pid` ignores or catches `signal` (from SigIgn and SigCgt in /proc/<pid>/status). */
export function handles(pid: number, signal: NodeJS.Signals): boolean {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const bit = 1n << BigInt(constants.signals[signal] - 1);
  return ['SigIgn', 'SigCgt'].some((field) => {
    const mask = new RegExp(`^${field}:\\s*([0-9a-f]+)$`, 'm').exec(status)?.[1] ?? '0';
    return (BigInt(`0x${mask}`) & bit) !== 0n;
  });
}

/** The user the `runAs` tests start programs as: `nobody`, which owns nothing of the server's. */
export const NOBODY = Object.freeze({ uid: 65534, gid: 65534 });

/** Why this process cannot start programs as another user (undefined when it can: it runs as root). */
export const CANNOT_SWITCH_USERS: string | undefined =
  process.getuid?.() === 0
    ? undefined
    : `needs root to start programs as another user (the tests run as uid ${process.getuid?.()})`;

/**
 * Registers one test named for what did not run and why. In CI (`CI=true`, which runs as root) it
 * fails; elsewhere it is reported as skipped with the reason: counted and visible, never a silent pass.
 */
export function reportCannotRun(what: string, reason: string): void {
  const name = `${what} did not run: ${reason}`;
  it(name, (context) => {
    if (process.env.CI === 'true') throw new Error(`${name}; CI=true requires it`);
    context.skip(name);
  });
}

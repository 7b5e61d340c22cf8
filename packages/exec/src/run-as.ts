import { spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  lstatSync,
  openSync,
  readFileSync,
  readlinkSync,
  readSync,
  type Stats,
  statSync,
} from 'node:fs';
import path from 'node:path';
import type { RunAs } from './types.js';

// Node's spawn takes an int32 uid and gid.
const MAX_ID = 2 ** 31 - 1;
const EXECUTE = 0o1;
const WRITE = 0o2;
const READ = 0o4;
const SET_ID = 0o6000;
const STICKY = 0o1000;
// Linux capability bits (linux/capability.h).
const CAP_SETGID = 6n;
const CAP_SETUID = 7n;

/**
 * Checks `runAs` once: integer ids, neither root's user or group nor the server's own user, a server that
 * may switch users and drop its supplementary groups, and a command and cwd that user can run and search.
 * Throws a TypeError naming the problem (a configuration error, never the model's). `command` and `cwd`
 * are the resolved real paths.
 */
export function resolveRunAs(
  runAs: RunAs | undefined,
  command: string,
  cwd: string,
): Readonly<RunAs> | undefined {
  if (runAs === undefined) return undefined;
  if (typeof runAs !== 'object' || runAs === null || Array.isArray(runAs)) {
    throw new TypeError('exec: runAs must be { uid, gid }');
  }
  const extra = Object.keys(runAs).filter((key) => key !== 'uid' && key !== 'gid');
  if (extra.length > 0) {
    throw new TypeError(
      `exec: runAs takes uid and gid only, got ${extra.join(', ')} (the program gets no supplementary groups)`,
    );
  }
  const uid = checkId(runAs.uid, 'runAs.uid');
  const gid = checkId(runAs.gid, 'runAs.gid');
  // Root reads and writes every descriptor of the server through /proc: the hole runAs closes, at its worst.
  if (uid === 0) throw new TypeError('exec: runAs.uid 0 is root; name an unprivileged user of its own');
  if (gid === 0)
    throw new TypeError("exec: runAs.gid 0 is root's group; name an unprivileged group of its own");
  if (gid === process.getegid?.()) {
    throw new TypeError(
      `exec: runAs.gid ${gid} is the server's own group, which reads what the server's files let that group read; name a group of its own`,
    );
  }
  if (process.platform === 'win32') throw new TypeError('exec: runAs is not supported on Windows');
  if (uid === process.geteuid?.()) {
    throw new TypeError(
      `exec: runAs.uid ${uid} is the server's own user, which can open /proc/<server pid>/fd/N; name a user of its own`,
    );
  }
  const refusal = switchRefusal();
  if (refusal !== undefined) {
    throw new TypeError(
      `exec: runAs needs a server that may switch users (root, or CAP_SETUID and CAP_SETGID): ${refusal}, so no call could start the program`,
    );
  }
  const checked = Object.freeze({ uid, gid });
  const who = `runAs (uid ${uid}, gid ${gid})`;
  const commandProblem = unusable(command, checked, true) ?? unsafe(command, checked, 'it');
  if (commandProblem !== undefined) {
    throw new TypeError(`exec: command ${command} cannot be run by ${who}: ${commandProblem}`);
  }
  const cwdProblem = unusable(cwd, checked, false);
  if (cwdProblem !== undefined) {
    throw new TypeError(`exec: cwd ${cwd} cannot be used by ${who}: ${cwdProblem}`);
  }
  return checked;
}

function checkId(candidate: unknown, name: string): number {
  if (typeof candidate !== 'number' || !Number.isInteger(candidate) || candidate < 0 || candidate > MAX_ID) {
    throw new TypeError(`exec: ${name} must be an integer from 0 to ${MAX_ID}, got ${String(candidate)}`);
  }
  return candidate;
}

/**
 * Why this process cannot start a program as another user with no supplementary groups, or undefined.
 * libuv's spawn calls setgroups(0, NULL) and ignores its failure, then setgid and setuid: without
 * CAP_SETGID (or where a user namespace denies setgroups) the program would keep the server's groups.
 */
function switchRefusal(): string | undefined {
  const self = `this process (uid ${process.geteuid?.()})`;
  if (process.platform !== 'linux') return process.geteuid?.() === 0 ? undefined : `${self} is not root`;
  const effective = /^CapEff:\s*([0-9a-f]+)$/m.exec(readOr('/proc/self/status'))?.[1];
  if (effective === undefined) return process.geteuid?.() === 0 ? undefined : `${self} is not root`;
  const capabilities = BigInt(`0x${effective}`);
  const missing = [
    [CAP_SETUID, 'CAP_SETUID'],
    [CAP_SETGID, 'CAP_SETGID'],
  ] as const;
  const lacking = missing.filter(([bit]) => ((capabilities >> bit) & 1n) === 0n).map(([, name]) => name);
  if (lacking.length > 0) return `${self} lacks ${lacking.join(' and ')}`;
  if (readOr('/proc/self/setgroups').trim() === 'deny') {
    return `${self} may not drop its supplementary groups (setgroups is denied in its user namespace)`;
  }
  return undefined;
}

function readOr(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/**
 * Why `target` (a real path) is not usable by the user: a directory on the way it may not search, a
 * command it may not execute (or a `#!` script it may not read, which its interpreter opens), a cwd it
 * may not search. Judged from the mode bits as the kernel does for a process of that uid and gid with no
 * supplementary groups and no capabilities (POSIX ACLs are not read).
 */
function unusable(target: string, runAs: Readonly<RunAs>, command: boolean): string | undefined {
  const ancestors: string[] = [];
  for (let dir = path.dirname(target); ; dir = path.dirname(dir)) {
    ancestors.unshift(dir);
    if (path.dirname(dir) === dir) break;
  }
  for (const dir of ancestors) {
    if (!permits(statSync(dir), runAs, EXECUTE)) return `it may not search ${dir}`;
  }
  const stats = statSync(target);
  if (!command) return permits(stats, runAs, EXECUTE) ? undefined : 'it may not search it';
  if (!permits(stats, runAs, EXECUTE)) return 'it may not execute it';
  if (isScript(target) && !permits(stats, runAs, READ))
    return 'it may not read it (a #! script, which its interpreter opens)';
  return undefined;
}

/**
 * Why running `command` as the user would not confine the program to that user's rights, or undefined:
 * a set-user-ID or set-group-ID file or one with file capabilities (the kernel gives the program its
 * owner's rights or those capabilities: a setuid-root `cat` reads `/proc/<server pid>/environ` again),
 * or a file the user could change (it owns it, may write it, or may replace it in a directory on its
 * way), so that a tool writing where the model says could rewrite the pinned program. A `#!` script's
 * interpreter is held to the same (an interpreter named through `/usr/bin/env` is looked up in PATH at
 * each run and is not checked).
 */
function unsafe(command: string, runAs: Readonly<RunAs>, what: string, depth = 0): string | undefined {
  const walked = walkPath(command, runAs);
  if (walked.problem !== undefined) return walked.problem;
  const real = walked.real;
  const stats = statSync(real);
  if ((stats.mode & SET_ID) !== 0) {
    return `${what} is set-user-ID or set-group-ID (${command}), so it would run with its owner's rights, not the user's`;
  }
  const capabilities = fileCapabilities(real, stats);
  if (capabilities !== undefined) {
    return `${what} has file capabilities (${command}: ${capabilities}), so it would run with them, not as the user alone`;
  }
  if (changeableBy(stats, runAs))
    return `${what} can be changed by that user (${command}): a call could rewrite it`;
  // The kernel runs a #! script's interpreter, itself possibly a #! script, up to 4 levels deep.
  if (depth < MAX_INTERPRETER_DEPTH) {
    const interpreter = interpreterOf(real);
    if (interpreter !== undefined) {
      return unsafe(
        interpreter,
        runAs,
        depth === 0 ? 'its #! interpreter' : `its #! interpreter (${depth + 1} levels down)`,
        depth + 1,
      );
    }
  }
  return undefined;
}

/** How deep the kernel follows `#!` interpreters that are themselves scripts (Linux: 4, then ELOOP). */
const MAX_INTERPRETER_DEPTH = 4;
/** How many symbolic links a path may pass through (Linux: 40, then ELOOP). */
const MAX_SYMLINK_HOPS = 40;

/**
 * Walks `literal` as the kernel does at each exec: every directory on the way, and each symbolic
 * link's own directory, then its target (`venv/bin/python` -> `/usr/bin/python3`). A problem when the
 * user could change what the path names: it may replace entries of a directory on the way (a sticky
 * one, such as /tmp, only its own entries), or owns a symbolic link there. Else the path it reaches.
 */
function walkPath(literal: string, runAs: Readonly<RunAs>): { problem?: string; real: string } {
  let pending = literal.split('/').filter(Boolean);
  let current = '/';
  let hops = 0;
  const rootStats = statSync('/');
  if (changeableBy(rootStats, runAs))
    return { problem: `that user can replace files in /, on the way to ${literal}`, real: '/' };
  while (pending.length > 0) {
    const name = pending.shift()!;
    if (name === '.') continue;
    if (name === '..') {
      current = path.dirname(current);
      continue;
    }
    const next = path.join(current, name);
    const dirStats = statSync(current);
    const entry = lstatSync(next);
    // A sticky directory (/tmp) lets a user replace only its own entries.
    if (changeableBy(dirStats, runAs) && ((dirStats.mode & STICKY) === 0 || entry.uid === runAs.uid)) {
      return { problem: `that user can replace files in ${current}, on the way to ${literal}`, real: next };
    }
    if (entry.isSymbolicLink()) {
      hops += 1;
      if (hops > MAX_SYMLINK_HOPS)
        return { problem: `${literal} passes through too many symbolic links`, real: next };
      if (entry.uid === runAs.uid) {
        return { problem: `that user owns the symbolic link ${next}, on the way to ${literal}`, real: next };
      }
      const target = readlinkSync(next);
      if (target.startsWith('/')) current = '/';
      pending = [...target.split('/').filter(Boolean), ...pending];
      continue;
    }
    current = next;
  }
  return { real: current };
}

/** Owned by the user (who may chmod it), or writable by it as the kernel judges the mode bits. */
function changeableBy(stats: Stats, runAs: Readonly<RunAs>): boolean {
  return stats.uid === runAs.uid || permits(stats, runAs, WRITE);
}

/** A script's `#!` interpreter as written (the kernel resolves it at each exec), or undefined (no `#!` script, not absolute, or not there). */
function interpreterOf(script: string): string | undefined {
  const head = headOf(script, 256);
  if (head === undefined || !head.startsWith('#!')) return undefined;
  const named =
    head
      .slice(2)
      .split('\n', 1)[0]!
      .trim()
      .split(/[ \t]+/, 1)[0] ?? '';
  if (!named.startsWith('/') || !existsSync(named)) return undefined;
  return named;
}

/** The first `bytes` bytes of a file as Latin-1 text, or undefined when it cannot be read. */
function headOf(file: string, bytes: number): string | undefined {
  const head = Buffer.alloc(bytes);
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    return head.toString('latin1', 0, readSync(fd, head, 0, bytes, 0));
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

// getcap's answers by file (device, inode and change time: setting capabilities changes the ctime), so
// safeExec, which checks at every call, runs it once per file.
const capabilitiesSeen = new Map<string, string | undefined>();
const GETCAP = ['/usr/sbin/getcap', '/sbin/getcap', '/usr/bin/getcap', '/bin/getcap'];

/**
 * The file's capabilities as getcap (libcap) prints them, or undefined when it has none. Node cannot
 * read the `security.capability` attribute itself: without getcap installed, none are found (README).
 */
function fileCapabilities(file: string, stats: Stats): string | undefined {
  if (process.platform !== 'linux') return undefined;
  const key = `${stats.dev}:${stats.ino}:${stats.ctimeMs}`;
  if (capabilitiesSeen.has(key)) return capabilitiesSeen.get(key);
  const getcap = GETCAP.find((candidate) => existsSync(candidate));
  let found: string | undefined;
  if (getcap !== undefined) {
    const run = spawnSync(getcap, [file], { encoding: 'utf8', timeout: 5_000, env: {} });
    const out = (run.stdout ?? '').trim();
    // `<file> cap_x=ep` (libcap 2.4x), `<file> = cap_x+ep` (older).
    if (out.startsWith(file)) found = out.slice(file.length).replace(/^\s*=?\s*/, '') || undefined;
  }
  if (capabilitiesSeen.size >= 1024) capabilitiesSeen.clear();
  capabilitiesSeen.set(key, found);
  return found;
}

function permits(stats: Stats, runAs: Readonly<RunAs>, bit: number): boolean {
  const shift = stats.uid === runAs.uid ? 6 : stats.gid === runAs.gid ? 3 : 0;
  return ((stats.mode >> shift) & bit) !== 0;
}

function isScript(file: string): boolean {
  return headOf(file, 2) === '#!';
}

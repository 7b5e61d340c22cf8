// runAs: the program runs as another user, with that user's group alone. Programs really start as
// `nobody` here, so these tests need root (CI runs as root); elsewhere they say why they did not run.
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expectFailure, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { type ExecToolOptions, execTool, type RunAs, safeExec, value } from '../src/index.js';
import {
  BEHAVE,
  CANNOT_SWITCH_USERS,
  compiledFixture,
  ECHO,
  expectGone,
  NOBODY,
  NODE,
  readPids,
  reportCannotRun,
  scratchDir,
  serve,
} from './harness.js';

const ID = '/usr/bin/id';
const DEFINE_AS_NOBODY = compiledFixture('define-run-as.ts');

function define(runAs: unknown, overrides: Partial<ExecToolOptions<{ q: z.ZodString }>> = {}) {
  return execTool({
    name: 'tool',
    description: 'A tool (test).',
    input: { q: z.string() },
    command: ID,
    cwd: '/',
    args: () => ['-u'],
    runAs: runAs as RunAs,
    ...overrides,
  });
}

describe('runAs values are checked at definition time', () => {
  const refused: [string, unknown, string][] = [
    [
      'a negative uid',
      { uid: -1, gid: 65534 },
      'exec: runAs.uid must be an integer from 0 to 2147483647, got -1',
    ],
    [
      'a fractional uid',
      { uid: 1.5, gid: 65534 },
      'exec: runAs.uid must be an integer from 0 to 2147483647, got 1.5',
    ],
    [
      'a uid as a string',
      { uid: '65534', gid: 65534 },
      'exec: runAs.uid must be an integer from 0 to 2147483647, got 65534',
    ],
    [
      'a uid past int32',
      { uid: 2 ** 31, gid: 65534 },
      'exec: runAs.uid must be an integer from 0 to 2147483647, got 2147483648',
    ],
    [
      'a missing gid',
      { uid: 65534 },
      'exec: runAs.gid must be an integer from 0 to 2147483647, got undefined',
    ],
    ['root', { uid: 0, gid: 65534 }, 'exec: runAs.uid 0 is root; name an unprivileged user of its own'],
    [
      "root's group",
      { uid: 65534, gid: 0 },
      "exec: runAs.gid 0 is root's group; name an unprivileged group of its own",
    ],
    [
      'supplementary groups',
      { uid: 65534, gid: 65534, groups: [27] },
      'exec: runAs takes uid and gid only, got groups (the program gets no supplementary groups)',
    ],
    ['null', null, 'exec: runAs must be { uid, gid }'],
    ['a number', 65534, 'exec: runAs must be { uid, gid }'],
  ];

  it.each(refused)('execTool refuses %s', (_what, runAs, message) => {
    expect(() => define(runAs)).toThrow(new TypeError(message));
  });

  it.each(refused)('safeExec refuses %s before anything runs', async (_what, runAs, message) => {
    await expect(safeExec(ID, ['-u'], { cwd: '/', runAs: runAs as RunAs })).rejects.toThrow(
      new TypeError(message),
    );
  });
});

describe('a server that may not switch users', () => {
  it('is refused at definition with a configuration error, not an EPERM at every call', () => {
    if (CANNOT_SWITCH_USERS !== undefined) {
      // This very process is such a server.
      expect(() => define({ uid: 65533, gid: 65533 })).toThrow(
        /^exec: runAs needs a server that may switch users \(root, or CAP_SETUID and CAP_SETGID\): this process \(uid \d+\) /,
      );
      return;
    }
    // As root, a server started as nobody (no capabilities) defines the tool.
    const defined = spawnSync(process.execPath, [DEFINE_AS_NOBODY], {
      uid: NOBODY.uid,
      gid: NOBODY.gid,
      env: { PATH: '/usr/bin:/bin' },
      encoding: 'utf8',
    });
    expect(defined.stderr).toBe('');
    expect(defined.stdout).toBe(
      'TypeError: exec: runAs needs a server that may switch users (root, or CAP_SETUID and CAP_SETGID): this process (uid 65534) lacks CAP_SETUID and CAP_SETGID, so no call could start the program',
    );
  });
});

const cannotSwitch = CANNOT_SWITCH_USERS;
if (cannotSwitch !== undefined) {
  describe('programs run as another user', () => {
    reportCannotRun(
      'runAs: the program as nobody, its environment, cwd, tree kill and access checks',
      cannotSwitch,
    );
  });
} else {
  // Usable by nobody: searchable, and one directory it may write to (the pid files).
  const sandbox = scratchDir();
  chmodSync(sandbox, 0o755);
  const writable = path.join(sandbox, 'writable');
  mkdirSync(writable);
  chmodSync(writable, 0o777);

  const idTool = (name: string, flag: string) =>
    execTool({
      name,
      description: 'Prints an id of the user it runs as (test).',
      input: {},
      command: ID,
      cwd: '/',
      runAs: NOBODY,
      args: () => [flag],
    });
  const echoAsNobody = execTool({
    name: 'echo_as_nobody',
    description: 'Echoes env and cwd (test).',
    input: {},
    command: NODE,
    cwd: sandbox,
    env: { PATH: '/usr/bin:/bin', ONLY: 'this' },
    runAs: NOBODY,
    args: () => [ECHO],
  });
  const treeAsNobody = execTool({
    name: 'tree_as_nobody',
    description: 'Starts a grandchild and sleeps (test).',
    input: { pidFile: z.string() },
    command: NODE,
    cwd: sandbox,
    runAs: NOBODY,
    timeoutMs: 4000,
    killGraceMs: 300,
    args: (input) => [BEHAVE, 'tree', value(input.pidFile)],
  });

  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });
  const connect = async (): Promise<TestClient> => {
    client = await serve(
      [idTool('id_u', '-u'), idTool('id_g_all', '-G'), echoAsNobody, treeAsNobody],
      recordingLogger([]),
    );
    return client;
  };

  describe('programs run as another user', () => {
    it('answers with the output of a program that runs as the user, with its group alone', async () => {
      const { callToolJson } = await connect();
      expect(await callToolJson('id_u', {})).toEqual({
        ok: true,
        exitCode: 0,
        stdout: '65534\n',
        stderr: '',
        truncated: false,
      });
      // The server holds a supplementary group: libuv's setgroups(0) keeps it from the program.
      const groups = process.getgroups?.() ?? [];
      process.setgroups?.([4242]);
      try {
        expect(await callToolJson('id_g_all', {})).toEqual({
          ok: true,
          exitCode: 0,
          stdout: '65534\n',
          stderr: '',
          truncated: false,
        });
      } finally {
        process.setgroups?.(groups.filter((group) => group !== process.getgid?.()));
      }
    });

    it('still gives the program only the declared environment, in the declared cwd', async () => {
      const { callToolJson } = await connect();
      const body = (await callToolJson('echo_as_nobody', {})) as { stdout: string };
      expect(JSON.parse(body.stdout)).toEqual({
        argv: [],
        env: { PATH: '/usr/bin:/bin', ONLY: 'this' },
        cwd: sandbox,
      });
    });

    it('safeExec runs the program as the user', async () => {
      const outcome = await safeExec(ID, ['-u'], { cwd: '/', runAs: NOBODY });
      expect(outcome).toMatchObject({ exitCode: 0, stdout: '65534\n', stderr: '' });
    });

    it('stops the whole tree of a program running as the user at the timeout', async () => {
      const { callTool } = await connect();
      const pidFile = path.join(writable, 'tree.pids');
      const call = callTool('tree_as_nobody', { pidFile });
      const pids = await readPids(pidFile);
      for (const pid of [pids.child, pids.grandchild]) {
        expect(readFileSync(`/proc/${pid}/status`, 'utf8')).toMatch(/^Uid:\t65534\t65534\t65534\t65534$/m);
      }
      expect(expectFailure(await call).error).toBe('timeout');
      await expectGone(pids.child);
      await expectGone(pids.grandchild);
    });
  });

  describe('the command and cwd must be usable by the user, checked at definition time', () => {
    const closed = path.join(sandbox, 'closed');
    mkdirSync(closed);
    chmodSync(closed, 0o700);
    const hidden = path.join(closed, 'tool.sh');
    writeFileSync(hidden, '#!/bin/sh\necho hi\n');
    chmodSync(hidden, 0o755);
    const ownerOnly = path.join(sandbox, 'owner-only');
    writeFileSync(ownerOnly, '#!/bin/sh\necho hi\n');
    chmodSync(ownerOnly, 0o700);
    const unreadable = path.join(sandbox, 'unreadable-script');
    writeFileSync(unreadable, '#!/bin/sh\necho hi\n');
    chmodSync(unreadable, 0o711);

    it('refuses a cwd the user may not search', () => {
      expect(() => define(NOBODY, { cwd: closed })).toThrow(
        new TypeError(
          `exec: cwd ${closed} cannot be used by runAs (uid 65534, gid 65534): it may not search it`,
        ),
      );
    });

    it('refuses a command in a directory the user may not search', () => {
      expect(() => define(NOBODY, { command: hidden })).toThrow(
        new TypeError(
          `exec: command ${hidden} cannot be run by runAs (uid 65534, gid 65534): it may not search ${closed}`,
        ),
      );
    });

    it('refuses a command the user may not execute, and a script it may not read', () => {
      expect(() => define(NOBODY, { command: ownerOnly })).toThrow(
        new TypeError(
          `exec: command ${ownerOnly} cannot be run by runAs (uid 65534, gid 65534): it may not execute it`,
        ),
      );
      expect(() => define(NOBODY, { command: unreadable })).toThrow(
        new TypeError(
          `exec: command ${unreadable} cannot be run by runAs (uid 65534, gid 65534): it may not read it (a #! script, which its interpreter opens)`,
        ),
      );
    });

    it('accepts a cwd the user owns, with a command it cannot change', () => {
      const own = path.join(sandbox, 'own');
      mkdirSync(own);
      chmodSync(own, 0o700);
      chownSync(own, NOBODY.uid, NOBODY.gid);
      const script = path.join(sandbox, 'root-tool.sh');
      writeFileSync(script, '#!/bin/sh\nid -u\n');
      chmodSync(script, 0o755);
      expect(() => define(NOBODY, { command: script, cwd: own })).not.toThrow();
    });

    // Red team R (session 38): a command the user could change was accepted, so a second tool that
    // writes where the model says (tee, cp) running as the same user rewrote the "pinned" program.
    it('refuses a command the user owns, may write, or may replace in a directory on its way', () => {
      const who = 'runAs (uid 65534, gid 65534)';
      const owned = path.join(sandbox, 'owned.sh');
      writeFileSync(owned, '#!/bin/sh\nid -u\n');
      chmodSync(owned, 0o500);
      chownSync(owned, NOBODY.uid, NOBODY.gid);
      expect(() => define(NOBODY, { command: owned })).toThrow(
        new TypeError(
          `exec: command ${owned} cannot be run by ${who}: it can be changed by that user (${owned}): a call could rewrite it`,
        ),
      );
      const groupWritable = path.join(sandbox, 'group-writable.sh');
      writeFileSync(groupWritable, '#!/bin/sh\nid -u\n');
      chownSync(groupWritable, 0, NOBODY.gid);
      chmodSync(groupWritable, 0o775);
      expect(() => define(NOBODY, { command: groupWritable })).toThrow(/it can be changed by that user/);
      const theirs = path.join(sandbox, 'theirs');
      mkdirSync(theirs);
      chmodSync(theirs, 0o755);
      chownSync(theirs, NOBODY.uid, NOBODY.gid);
      const inside = path.join(theirs, 'tool.sh');
      writeFileSync(inside, '#!/bin/sh\nid -u\n');
      chmodSync(inside, 0o755);
      expect(() => define(NOBODY, { command: inside })).toThrow(
        new TypeError(
          `exec: command ${inside} cannot be run by ${who}: that user can replace files in ${theirs}, on the way to ${inside}`,
        ),
      );
    });

    it('refuses a script whose #! interpreter the user may change', () => {
      const interpreter = path.join(sandbox, 'their-sh');
      writeFileSync(interpreter, readFileSync('/bin/sh'));
      chmodSync(interpreter, 0o755);
      chownSync(interpreter, NOBODY.uid, NOBODY.gid);
      const script = path.join(sandbox, 'via-their-sh.sh');
      writeFileSync(script, `#!${interpreter} -e\nid -u\n`);
      chmodSync(script, 0o755);
      expect(() => define(NOBODY, { command: script })).toThrow(
        new TypeError(
          `exec: command ${script} cannot be run by runAs (uid 65534, gid 65534): its #! interpreter can be changed by that user (${interpreter}): a call could rewrite it`,
        ),
      );
    });

    // Red team R (session 38): a setuid-root (or capability-holding) program run as the user reads
    // /proc/<server pid>/environ again: the kernel gives it its owner's rights.
    it('refuses a set-user-ID or set-group-ID command', () => {
      for (const mode of [0o4755, 0o2755]) {
        const copy = path.join(sandbox, `cat-${mode.toString(8)}`);
        writeFileSync(copy, readFileSync('/usr/bin/cat'));
        chmodSync(copy, mode);
        expect(() => define(NOBODY, { command: copy })).toThrow(
          new TypeError(
            `exec: command ${copy} cannot be run by runAs (uid 65534, gid 65534): it is set-user-ID or set-group-ID (${copy}), so it would run with its owner's rights, not the user's`,
          ),
        );
      }
    });

    const SETCAP = ['/usr/sbin/setcap', '/sbin/setcap'].find((file) => existsSync(file));
    const GETCAP = ['/usr/sbin/getcap', '/sbin/getcap'].find((file) => existsSync(file));
    it.runIf(SETCAP !== undefined && GETCAP !== undefined)(
      'refuses a command with file capabilities (needs libcap setcap and getcap)',
      () => {
        const copy = path.join(sandbox, 'cat-with-capabilities');
        writeFileSync(copy, readFileSync('/usr/bin/cat'));
        chmodSync(copy, 0o755);
        expect(() => define(NOBODY, { command: copy })).not.toThrow();
        const set = spawnSync(SETCAP!, ['cap_dac_read_search+ep', copy], { encoding: 'utf8' });
        expect(set.status, set.stderr).toBe(0);
        expect(() => define(NOBODY, { command: copy })).toThrow(
          /^exec: command .*cat-with-capabilities cannot be run by runAs \(uid 65534, gid 65534\): it has file capabilities \(.*cat-with-capabilities: cap_dac_read_search[=+]ep\), so it would run with them, not as the user alone$/,
        );
      },
    );
    if (SETCAP === undefined || GETCAP === undefined) {
      reportCannotRun(
        'refuses a command with file capabilities',
        'setcap or getcap (libcap2-bin) is not installed',
      );
    }

    it("refuses the server's own group", () => {
      const egid = vi.spyOn(process, 'getegid').mockReturnValue(4242);
      try {
        expect(() => define({ uid: NOBODY.uid, gid: 4242 })).toThrow(
          new TypeError(
            "exec: runAs.gid 4242 is the server's own group, which reads what the server's files let that group read; name a group of its own",
          ),
        );
      } finally {
        egid.mockRestore();
      }
    });
  });
}

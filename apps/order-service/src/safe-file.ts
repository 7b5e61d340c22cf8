import { constants, type Stats } from 'node:fs';
import { access, type FileHandle, lstat, open, readlink, realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';

/**
 * The reference way for a file tool to open a file the model named, under one root, against a
 * concurrent attacker who can create, swap and link files inside that root.
 *
 * Node has no openat(); on Linux, opening `/proc/self/fd/N/name` is the same lookup of `name` in the
 * folder N holds. So: pick a candidate by name, open it one folder at a time from the root's
 * descriptor, then prove what was opened.
 * 1. The name is checked lexically (relative, no NUL, no `..` out of the root) and resolved with
 *    realpath; the result must lie under the root's real path. This only picks a candidate: a link
 *    swapped in after it would otherwise win (check-then-open race).
 * 2. The candidate is lstat-ed (a FIFO or device is refused before it is ever opened: opening a
 *    device can have side effects). On Linux each folder on its path is then opened
 *    O_PATH | O_DIRECTORY | O_NOFOLLOW through its parent's descriptor, so a folder swapped for a
 *    link or a file fails there (ENOTDIR: O_DIRECTORY refuses the link O_NOFOLLOW did not follow)
 *    and nothing outside the root is ever opened, not even a device to be refused afterwards.
 *    O_PATH needs only search (x) permission on a folder, as a lookup by whole path does, so a
 *    folder of mode 0711 on the way works; listing a folder still needs read permission.
 *    The file itself is opened O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
 *    O_NOCTTY: swapped to a symlink it fails with ELOOP, a FIFO swapped in cannot block, a socket
 *    swapped in fails with ENXIO; each is a refusal.
 * 3. The descriptor is judged, not the name: fstat must say regular file, one link (a hard link
 *    shares the inode of a file outside the root and cannot be told apart by path), and on Linux
 *    the kernel's own path of the open file (`/proc/self/fd/N`, the dentry actually opened, which
 *    no later swap of a name changes) must lie under the root. Without /proc (macOS) the whole
 *    path is opened at once, so a folder swapped for a link can make it open a file outside the
 *    root; the fallback then compares the descriptor's dev+ino with an lstat of the candidate and
 *    re-runs realpath; this narrows the window but, being by-name, cannot close it: run file
 *    tools on Linux when the root is writable by anyone untrusted.
 * A file the process may not open or read (EACCES, EPERM) is refused as `unreadable`, so a tool can
 * skip it like any other refusal.
 */

export type SafeFileRefusalReason =
  | 'invalid_path'
  | 'outside_root'
  | 'not_found'
  | 'not_regular'
  | 'hard_link'
  | 'too_large'
  | 'changed'
  | 'unreadable';

/** Why a path was refused; `reason` is for the tool to choose its answer, the message for the log. */
export class SafeFileRefusal extends Error {
  override readonly name = 'SafeFileRefusal';
  constructor(
    readonly reason: SafeFileRefusalReason,
    message: string,
  ) {
    super(message);
  }
}

export interface OpenUnderRootOptions {
  /** Accept a file with more than one hard link (it may be the same inode as a file outside the root). @default false */
  allowHardLinks?: boolean;
  /** Largest file accepted, in bytes; larger files are refused with `too_large`. @default Infinity */
  maxBytes?: number;
}

export interface OpenedFile {
  /** The open descriptor: read from it, never from the name again. The caller closes it. */
  readonly handle: FileHandle;
  /** The path under the root, with `/` separators. */
  readonly relativePath: string;
  /** fstat of the descriptor. */
  readonly stats: Stats;
}

const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
/**
 * Linux's O_PATH: a descriptor that only names the folder, which needs search (x) permission and not
 * read. Node 20 does not export it; its value is the same on every Linux architecture Node runs on.
 */
const O_PATH: number | undefined =
  (constants as { O_PATH?: number }).O_PATH ?? (process.platform === 'linux' ? 0o10000000 : undefined);
/** O_DIRECTORY fails on anything but a folder (a symlink O_NOFOLLOW left unfollowed too). */
const FOLDER_FLAGS = (O_PATH ?? constants.O_RDONLY) | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * Opens `relativePath` under `root` for reading, or throws a `SafeFileRefusal`. `root` is trusted
 * (server configuration); `relativePath` is not.
 */
export async function openUnderRoot(
  root: string,
  relativePath: string,
  options: OpenUnderRootOptions = {},
): Promise<OpenedFile> {
  const realRoot = await realpathOr(resolve(root), () => {
    throw new SafeFileRefusal('not_found', 'the root does not exist');
  });
  const candidate = await candidateUnder(realRoot, relativePath);
  const before = await lstat(candidate).catch(() => {
    throw new SafeFileRefusal('not_found', 'no such file');
  });
  if (!before.isFile()) throw notRegular(before);
  let handle: FileHandle;
  try {
    handle = await openFolderByFolder(realRoot, candidate);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') {
      throw new SafeFileRefusal('changed', 'the file became a symlink while opening');
    }
    if (code === 'ENOENT') throw new SafeFileRefusal('not_found', 'the file vanished while opening');
    if (code === 'ENOTDIR') {
      throw new SafeFileRefusal('changed', 'a folder on the path became a file or a symlink while opening');
    }
    if (code === 'EACCES' || code === 'EPERM') {
      throw new SafeFileRefusal('unreadable', `the process may not open the file (${code})`);
    }
    // What open() says of a socket (ENXIO) or a device without a driver (ENXIO, ENODEV) swapped in.
    if (code === 'ENXIO' || code === 'ENODEV') {
      throw new SafeFileRefusal('not_regular', 'a socket or device was swapped in while opening');
    }
    throw error;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw notRegular(stats);
    if (stats.nlink > 1 && options.allowHardLinks !== true) {
      throw new SafeFileRefusal('hard_link', `the file has ${stats.nlink} hard links`);
    }
    if (options.maxBytes !== undefined && stats.size > options.maxBytes) {
      throw new SafeFileRefusal('too_large', `the file has ${stats.size} bytes`);
    }
    await verifyOpened(realRoot, candidate, handle, stats);
    return { handle, relativePath: relative(realRoot, candidate).split(sep).join('/'), stats };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/**
 * Reads a whole file through `openUnderRoot` as UTF-8, at most `maxBytes` (the descriptor is read,
 * so a file that grows after the check is still cut at the limit).
 */
export async function readFileUnderRoot(
  root: string,
  relativePath: string,
  options: OpenUnderRootOptions & { maxBytes: number },
): Promise<{ relativePath: string; text: string }> {
  const opened = await openUnderRoot(root, relativePath, options);
  try {
    const buffer = Buffer.alloc(Math.min(opened.stats.size, options.maxBytes));
    let filled = 0;
    try {
      while (filled < buffer.length) {
        const { bytesRead } = await opened.handle.read(buffer, filled, buffer.length - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
    } catch (error) {
      // A security module or a network file system may refuse the read itself.
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM') {
        throw new SafeFileRefusal('unreadable', `the process may not read the file (${code})`);
      }
      throw error;
    }
    return { relativePath: opened.relativePath, text: buffer.subarray(0, filled).toString('utf8') };
  } finally {
    await opened.handle.close();
  }
}

/** Whether `candidate` is `realRoot` or lies under it (both absolute and free of `..`). */
export function isUnderRoot(realRoot: string, candidate: string): boolean {
  return candidate === realRoot || candidate.startsWith(realRoot === sep ? sep : realRoot + sep);
}

async function candidateUnder(realRoot: string, relativePath: string): Promise<string> {
  if (typeof relativePath !== 'string' || relativePath === '' || relativePath.includes('\0')) {
    throw new SafeFileRefusal('invalid_path', 'not a non-empty path without NUL bytes');
  }
  if (isAbsolute(relativePath) || relativePath.startsWith('\\')) {
    throw new SafeFileRefusal('invalid_path', 'an absolute path');
  }
  const lexical = resolve(realRoot, relativePath);
  if (!isUnderRoot(realRoot, lexical) || lexical === realRoot) {
    throw new SafeFileRefusal('outside_root', 'the path leaves the root');
  }
  const real = await realpathOr(lexical, () => {
    throw new SafeFileRefusal('not_found', 'no such file');
  });
  if (!isUnderRoot(realRoot, real))
    throw new SafeFileRefusal('outside_root', 'the path resolves outside the root');
  return real;
}

/**
 * Opens `candidate` (a real path under `realRoot`) through the descriptor of each folder on its way
 * (step 2 above); without /proc, by its whole path.
 */
async function openFolderByFolder(realRoot: string, candidate: string): Promise<FileHandle> {
  if (!(await hasProcFd())) return open(candidate, OPEN_FLAGS);
  const names = relative(realRoot, candidate).split(sep);
  const file = names.pop() ?? '';
  let folder = await open(realRoot, FOLDER_FLAGS);
  try {
    for (const name of names) {
      const next = await open(`/proc/self/fd/${folder.fd}/${name}`, FOLDER_FLAGS);
      await folder.close();
      folder = next;
    }
    return await open(`/proc/self/fd/${folder.fd}/${file}`, OPEN_FLAGS);
  } finally {
    await folder.close();
  }
}

let procFd: Promise<boolean> | undefined;

function hasProcFd(): Promise<boolean> {
  procFd ??= access('/proc/self/fd').then(
    () => true,
    () => false,
  );
  return procFd;
}

async function verifyOpened(
  realRoot: string,
  candidate: string,
  handle: FileHandle,
  stats: Stats,
): Promise<void> {
  const kernelPath = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
  if (kernelPath !== undefined) {
    // The dentry the descriptor holds; a path "… (deleted)" outside the root fails the prefix test too.
    if (!isUnderRoot(realRoot, kernelPath)) {
      throw new SafeFileRefusal('changed', 'the file opened lies outside the root');
    }
    return;
  }
  const after = await lstat(candidate).catch(() => undefined);
  const realAfter = await realpath(candidate).catch(() => undefined);
  if (after === undefined || after.dev !== stats.dev || after.ino !== stats.ino || realAfter !== candidate) {
    throw new SafeFileRefusal('changed', 'the file changed while opening');
  }
}

function notRegular(stats: Stats): SafeFileRefusal {
  const kind = stats.isDirectory()
    ? 'a directory'
    : stats.isFIFO()
      ? 'a FIFO'
      : stats.isSymbolicLink()
        ? 'a symlink'
        : stats.isSocket()
          ? 'a socket'
          : 'a device';
  return new SafeFileRefusal('not_regular', `not a regular file but ${kind}`);
}

async function realpathOr(path: string, onMissing: () => never): Promise<string> {
  try {
    return await realpath(path);
  } catch {
    return onMissing();
  }
}

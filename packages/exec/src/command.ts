import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import path from 'node:path';

/** A command checked against its allowlist: the path declared and the file it resolves to. */
export interface ResolvedCommand {
  /** The command as declared (passed as argv[0]). */
  readonly declared: string;
  /** The real file, after symlinks, that is spawned: pinned at creation, so a swapped link cannot redirect it. */
  readonly real: string;
}

/**
 * Checks a command once, synchronously: absolute and normalised, on the allowlist, an existing
 * executable regular file whose real path (symlinks resolved) is on the allowlist too.
 * Throws a TypeError naming what is wrong: a declaration error, never the model's.
 */
export function resolveCommand(command: string, allow: readonly string[] | undefined): ResolvedCommand {
  const declared = checkAbsolute(command, 'command');
  const allowed = new Set(
    (allow ?? [declared]).map((entry, index) => checkAbsolute(entry, `allow[${index}]`)),
  );
  if (!allowed.has(declared)) {
    throw new TypeError(`exec: command ${declared} is not on the allowlist`);
  }
  let real: string;
  try {
    real = realpathSync(declared);
  } catch (error) {
    throw new TypeError(`exec: command ${declared} does not exist`, { cause: error });
  }
  if (!allowed.has(real)) {
    throw new TypeError(
      `exec: command ${declared} resolves to ${real}, which is not on the allowlist; add it to allow if that is intended`,
    );
  }
  if (!statSync(real).isFile()) throw new TypeError(`exec: command ${declared} is not a regular file`);
  try {
    accessSync(real, constants.X_OK);
  } catch (error) {
    throw new TypeError(`exec: command ${declared} is not executable`, { cause: error });
  }
  return Object.freeze({ declared, real });
}

/** The checked working directory: absolute, normalised, an existing directory, symlinks resolved. */
export function resolveWorkingDirectory(cwd: string | undefined): string {
  const declared = checkAbsolute(cwd ?? process.cwd(), 'cwd');
  let real: string;
  try {
    real = realpathSync(declared);
  } catch (error) {
    throw new TypeError(`exec: cwd ${declared} does not exist`, { cause: error });
  }
  if (!statSync(real).isDirectory()) throw new TypeError(`exec: cwd ${declared} is not a directory`);
  return real;
}

function checkAbsolute(candidate: unknown, what: string): string {
  if (typeof candidate !== 'string' || candidate.includes('\0') || !path.isAbsolute(candidate)) {
    throw new TypeError(`exec: ${what} must be an absolute path, got ${JSON.stringify(candidate)}`);
  }
  // Refused rather than silently normalised: `/usr/bin/../../tmp/x` should not read as `/usr/bin`.
  if (path.normalize(candidate) !== candidate || (candidate.length > 1 && candidate.endsWith(path.sep))) {
    throw new TypeError(`exec: ${what} ${candidate} is not normalised; write ${path.normalize(candidate)}`);
  }
  return candidate;
}

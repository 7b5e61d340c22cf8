import { REDACTED } from '@toolgate/core';

// The key-value rules of the text patterns (`"host":"db-prod-1"`, a Node error's `"path"` after its
// `"syscall"`), for the same fields when they arrive as an object in `_meta` or a content part rather
// than as text: a value alone (`db-prod-1`, `secrets.json`) has no shape a text pattern could know.
// Each replacement is a marker no rule replaces again, so a second pass reads the same.

const HOST_KEYS = new Set([
  'host',
  'hostname',
  'hostaddr',
  'address',
  'servername',
  'remoteAddress',
  'localAddress',
]);
const PORT_KEYS = new Set(['port', 'localPort', 'remotePort']);
const DATABASE_KEYS = new Set(['database', 'dbname']);
// A value without spaces that is not already a marker: a street address or a sentence is not a host.
const WORD = /^[^\s[]\S*$/;
const PORT = /^\d{1,5}$/;

/** What replaces a field's value, and the name it is counted under; undefined leaves it to the walk. */
export interface FieldReplacement {
  name: string;
  replace: string;
}

const HOST_FIELD: FieldReplacement = { name: 'hostname', replace: '[host]' };
const DATABASE_FIELD: FieldReplacement = { name: 'db-name', replace: '[name]' };
const SYSCALL_PATH_FIELD: FieldReplacement = { name: 'syscall-path', replace: '[path]' };
const SPAWN_ARGS_FIELD: FieldReplacement = { name: 'spawn-args', replace: REDACTED };
const SPAWN_FIELD: FieldReplacement = { name: 'syscall-path', replace: 'spawn [path]' };
const SPAWN_SYNC_FIELD: FieldReplacement = { name: 'syscall-path', replace: 'spawnSync [path]' };
// child_process's syscall names the command (`spawn bin/tool`), as the JSON text rule reads it.
const SPAWN_COMMAND = /^(spawn(?:Sync)?) (?!\[path\]$)/;

/**
 * The replacement for `parent[key]`, by the key's name and, for a Node system error's fields, the
 * object it sits in:
 * - `host`, `hostname`, `hostaddr`, `address`, `servername`, `remoteAddress`, `localAddress`: a value
 *   without spaces becomes `[host]`; `port`, `localPort`, `remotePort` (a number or digits) too;
 * - `database`, `dbname`: `[name]`;
 * - in an object with a string `syscall` (a Node error copied field by field, `{ ...error }`): `path`
 *   and `dest` become `[path]` whatever they look like, the command in `syscall` (`spawn bin/tool`)
 *   becomes `spawn [path]`, and a non-empty `spawnargs` becomes `[REDACTED]`.
 */
export function fieldReplacement(key: string, value: unknown, parent: object): FieldReplacement | undefined {
  if (HOST_KEYS.has(key)) return typeof value === 'string' && WORD.test(value) ? HOST_FIELD : undefined;
  if (PORT_KEYS.has(key)) {
    const port =
      (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 65_535) ||
      (typeof value === 'string' && PORT.test(value));
    return port ? HOST_FIELD : undefined;
  }
  if (DATABASE_KEYS.has(key))
    return typeof value === 'string' && WORD.test(value) ? DATABASE_FIELD : undefined;
  if (typeof (parent as { syscall?: unknown }).syscall !== 'string') return undefined;
  if ((key === 'path' || key === 'dest') && typeof value === 'string' && value !== '[path]') {
    return SYSCALL_PATH_FIELD;
  }
  if (key === 'spawnargs' && Array.isArray(value) && value.length > 0) return SPAWN_ARGS_FIELD;
  if (key === 'syscall') {
    const command = SPAWN_COMMAND.exec(value as string);
    if (command !== null) return command[1] === 'spawn' ? SPAWN_FIELD : SPAWN_SYNC_FIELD;
  }
  return undefined;
}

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
// The schema's names a pg error carries (`schema`, `table`, `column`, `dataType`, `constraint`).
const SCHEMA_NAME_KEYS = new Set(['schema', 'table', 'column', 'dataType', 'constraint']);
// The fields of a pg error that hold a row's values, a statement or the function it ran in.
const PG_TEXT_KEYS = new Set(['detail', 'hint', 'where', 'internalQuery']);
const SQLSTATE = /^[0-9A-Z]{5}$/;
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
const SCHEMA_NAME_FIELD: FieldReplacement = { name: 'pg-fields', replace: '[name]' };
const PG_TEXT_FIELD: FieldReplacement = { name: 'pg-fields', replace: REDACTED };
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
 * - `database`, `dbname`: `[name]`; `schema`, `table`, `column`, `dataType`, `constraint` (a pg error's
 *   names of the schema) too;
 * - in an object with a string `severity` and a SQLSTATE `code` (a pg error copied field by field):
 *   `detail`, `hint`, `where` and `internalQuery` become `[REDACTED]` (a row's values, a statement);
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
  if (SCHEMA_NAME_KEYS.has(key))
    return typeof value === 'string' && WORD.test(value) ? SCHEMA_NAME_FIELD : undefined;
  if (PG_TEXT_KEYS.has(key) && typeof value === 'string' && value !== REDACTED && isPgError(parent)) {
    return PG_TEXT_FIELD;
  }
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

/** A pg error or a copy of its fields: a string `severity` and a SQLSTATE `code`. */
function isPgError(parent: object): boolean {
  const { severity, code } = parent as { severity?: unknown; code?: unknown };
  return typeof severity === 'string' && typeof code === 'string' && SQLSTATE.test(code);
}

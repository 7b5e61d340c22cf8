import { type CallerIdentity, ToolError, type ToolRequest } from '@toolgate/core';
import type { CompiledBinding, CompiledQuery, Condition } from './compile.js';
import type { BindValue, ClaimProbe } from './types.js';

/**
 * The tool's `bind` for core: resolves every declared binding from the caller before the chain runs,
 * so the values ride on `ctx.bindings` (and in every key: repeat cache, rate limit, idempotency) and
 * the handler never reads claims itself. A required value that is missing refuses the call with
 * `permission_denied` (core answers it inside the chain, so it is audited): a tool scoped to the
 * caller never runs unscoped. An optional one that is missing is left out (its filter is dropped).
 */
export function bindValues(
  compiled: CompiledQuery,
  request: ToolRequest,
  caller: CallerIdentity,
): Readonly<Record<string, BindValue>> {
  const source = { request, caller };
  const bound: Record<string, BindValue> = {};
  for (const binding of compiled.bindings) {
    const value = binding.resolve(source);
    if (boundCondition(binding, value) !== undefined) bound[binding.name] = value;
  }
  return bound;
}

/**
 * The condition a bound value adds: `=` for one value, `= ANY` for a list where the binding is
 * declared `list: true`, none for an optional binding left out. Anything else refuses the call:
 * the value comes from a token the tenant may shape, and a list where one id was meant (or an
 * object, NaN, a NUL, an integer JSON could not hold exactly) would widen the scope, point it at
 * another id or fail inside the database.
 */
export function boundCondition(binding: CompiledBinding, value: unknown): Condition | undefined {
  const absent = value === undefined || value === null;
  if (absent && binding.optional) return undefined;
  // Fail closed: a tool scoped to the caller never runs unscoped because a claim is missing. An empty
  // list or a blank string is a caller scoped to nothing, even where the binding is optional: dropped,
  // it would see every row; compared, the rows no tenant owns (identity providers send "" for unset).
  if (absent || isEmpty(value)) {
    throw new ToolError('permission_denied', 'This tool needs an authenticated caller.', {
      hint: 'The caller is not signed in or has no access to this data. Do not retry; tell the user.',
    });
  }
  if (Array.isArray(value) ? binding.acceptsList && value.every(isListItem) : isScalar(value)) {
    return Array.isArray(value) ? binding.list : binding.scalar;
  }
  throw credentialsRefused();
}

function credentialsRefused(): ToolError {
  return new ToolError('permission_denied', "This tool cannot use the caller's credentials.", {
    hint: 'The credentials do not have the form this tool expects. Do not retry; tell the user.',
  });
}

/**
 * The probe a bound string needs before the statement runs, or undefined (nearly always: nothing to
 * check). A claim that spells a number or a uuid another way than the database prints it (`+42`,
 * `042`, `-0`, `4_2`, `0x2A` from PostgreSQL 16, an uppercase or braced uuid) is another string to
 * every check before SQL (an identity provider's uniqueness, an allowlist, a cache key), yet the same
 * value to an integer or uuid column: customer 42's rows. In a text column it is just its text (`007`,
 * `+44...`), so the column's own type decides: the probe reads the claim as the column reads it.
 */
export function claimProbe(
  binding: CompiledBinding,
  condition: Condition,
  value: unknown,
): ClaimProbe | undefined {
  // `match: 'column'`: the author lets the column type's own equality decide.
  if (!binding.matchesText) return undefined;
  if (typeof value === 'string') {
    return mayReadAsAnother(value) ? { text: binding.probe.scalar, value } : undefined;
  }
  if (condition !== binding.list) return undefined;
  for (const item of value as readonly unknown[]) {
    if (typeof item === 'string' && mayReadAsAnother(item)) {
      return { text: binding.probe.list, value: value as readonly (string | number)[] };
    }
  }
  return undefined;
}

/** Refuses the call unless the column read every checked claim as the very text the token spelled. */
export function checkProbe(probe: ClaimProbe, read: unknown): void {
  const value = probe.value;
  const same =
    typeof value === 'string'
      ? read === value
      : Array.isArray(read) &&
        value.every(
          (item, index) => typeof item !== 'string' || !mayReadAsAnother(item) || read[index] === item,
        );
  if (!same) throw credentialsRefused();
}

// PostgreSQL's integer input (16+ adds 0x/0o/0b and _ between digits), and its one output spelling.
const INTEGER_INPUT = /^[+-]?(?:\d+(?:_\d+)*|0[xX](?:_?[\da-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+)$/;
const CANONICAL_INTEGER = /^(?:0|-?[1-9]\d*)$/;
// uuid input takes any case, braces and a hyphen after any group of four digits; output is one form.
const UUID_INPUT = /^\{?[\da-fA-F]{4}(?:-?[\da-fA-F]{4}){7}\}?$/;
const CANONICAL_UUID = /^[\da-f]{8}-[\da-f]{4}-[\da-f]{4}-[\da-f]{4}-[\da-f]{12}$/;

/** Whether a column's type may read `value` as a value it prints another way. Cheap for most claims. */
function mayReadAsAnother(value: string): boolean {
  const length = value.length;
  if (length >= 32 && length <= 41) {
    if (length === 36 && value.charCodeAt(8) === 45 && value.charCodeAt(23) === 45) {
      if (CANONICAL_UUID.test(value)) return false;
    }
    if (UUID_INPUT.test(value)) return true;
  }
  const first = value.charCodeAt(0);
  const lead = first === 43 || first === 45 ? value.charCodeAt(1) : first;
  if (lead < 48 || lead > 57) return false;
  // A plain decimal (no +, no leading zero, no _) is already the one spelling: no pattern to run.
  if (first !== 43 && lead !== 48 && !value.includes('_')) return false;
  return INTEGER_INPUT.test(value) && !CANONICAL_INTEGER.test(value);
}

function isEmpty(value: unknown): boolean {
  return Array.isArray(value) ? value.length === 0 : isBlank(value);
}

function isBlank(value: unknown): boolean {
  return typeof value === 'string' && value.trim() === '';
}

function isScalar(value: unknown): boolean {
  return isListItem(value) || typeof value === 'boolean' || typeof value === 'bigint';
}

// PostgreSQL text cannot hold NUL, and NaN or Infinity compare with nothing a claim meant. A lone
// surrogate (JSON's "\ud800") is no character: the driver sends U+FFFD in its place, an id the token
// never spelled. Nor is a string padded with whitespace: integer, numeric and boolean input skip it
// and char(n) ignores trailing blanks, so " 42" would be customer 42 to the database while every
// check before it (the identity provider's uniqueness, an allowlist, a cache key) saw another string.
// An integer past 2^53 is not the id the token's JSON spelled either (JSON.parse rounded
// 1234567890123456789 to ...768, which several ids share), so it would scope the call to whichever of
// them the double equals: such ids must come as strings (or bigints).
function isListItem(value: unknown): boolean {
  if (typeof value === 'string') {
    return !value.includes('\u0000') && value.isWellFormed() && value.trim() === value && value !== '';
  }
  return (
    typeof value === 'number' &&
    Number.isFinite(value) &&
    (Number.isSafeInteger(value) || !Number.isInteger(value))
  );
}

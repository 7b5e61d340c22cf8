import type * as z from 'zod';
import { type ArgumentIssue, fail, type ToolResult } from './result.js';
import type { ArgumentVerdict } from './types.js';

export interface ValidatedArguments {
  readonly verdict: ArgumentVerdict;
  /** The parsed arguments when the verdict is ok, the raw ones otherwise. */
  readonly args: Record<string, unknown>;
}

/** The verdict of arguments the schema accepted (one frozen object for every call). */
export const ARGUMENTS_OK: ArgumentVerdict = Object.freeze({ ok: true });

/** The verdict and arguments of a finished parse of `input` (core's dispatch parses inline). */
export function argumentVerdict(
  schema: z.ZodObject,
  input: unknown,
  parsed: ReturnType<z.ZodObject['safeParse']>,
): ValidatedArguments {
  if (parsed.success) return { verdict: ARGUMENTS_OK, args: parsed.data as Record<string, unknown> };
  const allowed = Object.keys(schema.shape);
  return {
    verdict: {
      ok: false,
      issues: parsed.error.issues.flatMap((issue) => describeIssue(issue, allowed, input)),
    },
    args: isRecord(input) ? input : {},
  };
}

/** The `invalid_argument` result for refused arguments, naming each field and what it expects. */
export function invalidArgumentsResult(toolName: string, issues: readonly ArgumentIssue[]): ToolResult {
  const names = [...new Set(issues.map((issue) => issue.path))];
  return fail('invalid_argument', `Invalid arguments for ${toolName}: ${names.join(', ')}.`, {
    hint: `Fix and call again: ${issues.map((issue) => `${issue.path}: ${issue.expected}`).join('; ')}.`,
    fields: [...issues],
  });
}

function describeIssue(issue: z.core.$ZodIssue, allowed: readonly string[], input: unknown): ArgumentIssue[] {
  const path = issue.path.length > 0 ? issue.path.map(String).join('.') : '(arguments)';
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((key) => ({
        path: issue.path.length > 0 ? `${path}.${key}` : key,
        expected: `not an accepted argument; remove it${allowed.length > 0 && issue.path.length === 0 ? ` (accepted: ${allowed.join(', ')})` : ''}`,
      }));
    case 'invalid_type': {
      const received = valueAt(input, issue.path);
      if (received === undefined) return [{ path, expected: `required, ${article(issue.expected)}` }];
      return [{ path, expected: `${article(issue.expected)}, not ${typeName(received)}` }];
    }
    case 'invalid_value':
      return [{ path, expected: `one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}` }];
    case 'too_big':
      return [{ path, expected: bound('at most', issue.maximum, issue.inclusive !== false, issue.origin) }];
    case 'too_small':
      return [{ path, expected: bound('at least', issue.minimum, issue.inclusive !== false, issue.origin) }];
    case 'invalid_format':
      if (issue.format === 'regex') return [{ path, expected: `a string matching ${issue.pattern}` }];
      return [{ path, expected: `a valid ${issue.format}` }];
    default:
      return [{ path, expected: issue.message }];
  }
}

function bound(word: string, limit: number | bigint, inclusive: boolean, origin: string): string {
  const value = String(limit);
  switch (origin) {
    case 'string':
      return `${word} ${value} characters`;
    case 'array':
    case 'set':
      return `${word} ${value} items`;
    default:
      return inclusive
        ? `a number ${word} ${value}`
        : `a number ${word === 'at most' ? 'below' : 'above'} ${value}`;
  }
}

function article(type: string): string {
  if (type === 'int') return 'an integer';
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return article(typeof value);
}

// zod 4 leaves `input` off issues unless asked; read the refused value from the arguments instead.
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

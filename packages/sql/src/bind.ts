import { type CallerIdentity, ToolError, type ToolRequest } from '@toolgate/core';
import type { CompiledQuery } from './compile.js';
import type { BindValue } from './types.js';

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
    if (isMissing(value)) {
      if (binding.optional) continue;
      throw new ToolError('permission_denied', 'This tool needs an authenticated caller.', {
        hint: 'The caller is not signed in or has no access to this data. Do not retry; tell the user.',
      });
    }
    bound[binding.name] = value;
  }
  return bound;
}

export function isMissing(value: BindValue): boolean {
  return value === undefined || value === null || (Array.isArray(value) && value.length === 0);
}

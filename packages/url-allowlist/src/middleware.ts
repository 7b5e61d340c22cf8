import { fail, isToolError, type ToolContext, type ToolMiddleware, type ToolResult } from '@toolgate/core';
import { findArguments, parseArgumentPath } from './argument-paths.js';
import { isUrlRefusedError } from './refusal.js';
import type { CheckedUrl, UrlPolicy } from './types.js';

declare module '@toolgate/core' {
  interface ToolCallState {
    /** URLs `urlArgument` checked, by argument path (`url`, `links[0].href`); pass one to `policy.fetch`. */
    checkedUrls?: Record<string, CheckedUrl>;
  }
}

/** A tool's own paths or policy, replacing the middleware's. */
export interface UrlArgumentOverride {
  /** Argument paths holding URLs for this tool. */
  paths?: string | readonly string[];
  /** The policy for this tool. */
  policy?: UrlPolicy;
}

/** Options of `urlArgument`. */
export interface UrlArgumentOptions {
  /** Most URLs one call may carry, over all paths; a call with more is refused before any resolution. @default 16 */
  maxUrls?: number;
  /** Per-tool paths/policy, or `false` to skip a tool. @default {} */
  tools?: Record<string, UrlArgumentOverride | false>;
}

interface Guard {
  readonly paths: readonly {
    readonly source: string;
    readonly segments: ReturnType<typeof parseArgumentPath>;
  }[];
  readonly policy: UrlPolicy;
}

const BY = 'url-allowlist';

/**
 * Refuses a call whose URL argument(s) fail the policy, before the handler runs: `invalid_argument`
 * for what is not a usable URL, `permission_denied` for what the policy forbids, each with a hint.
 * Paths: `url`, `target.url`, `urls[]`, `links[].href`. A missing argument is left to the input
 * schema. Records `{ by: 'url-allowlist', action: 'deny' | 'allow' }` in `ctx.decisions` and leaves
 * the checked URLs in `ctx.state.checkedUrls`.
 */
export function urlArgument(
  paths: string | readonly string[],
  policy: UrlPolicy,
  options: UrlArgumentOptions = {},
): ToolMiddleware {
  const guardOf = (override: UrlArgumentOverride): Guard => {
    const list = override.paths ?? paths;
    return {
      paths: (typeof list === 'string' ? [list] : [...list]).map((source) => ({
        source,
        segments: parseArgumentPath(source),
      })),
      policy: override.policy ?? policy,
    };
  };
  if (typeof policy?.check !== 'function')
    throw new TypeError('urlArgument: give a policy from createUrlPolicy()');
  const fallback = guardOf({});
  if (fallback.paths.length === 0) throw new TypeError('urlArgument: give at least one argument path');
  const perTool = new Map<string, Guard | false>(
    Object.entries(options.tools ?? {}).map(([name, override]) => [
      name,
      override === false ? false : guardOf(override),
    ]),
  );
  const maxUrls = options.maxUrls ?? 16;
  if (!Number.isInteger(maxUrls) || maxUrls < 1)
    throw new TypeError('urlArgument: maxUrls must be an integer >= 1');

  return async (ctx, next) => {
    // Unknown tools and refused arguments are answered by core's innermost step.
    if (!ctx.tool || !ctx.validation.ok) return next();
    const guard = perTool.get(ctx.toolName) ?? fallback;
    if (guard === false) return next();
    const found = guard.paths.flatMap((path) => findArguments(ctx.args, path.segments));
    if (found.length > maxUrls) {
      return deny(
        ctx,
        'too-many',
        undefined,
        fail('invalid_argument', `At most ${maxUrls} URLs per call.`, {
          hint: `Split the request into calls of at most ${maxUrls} URLs.`,
        }),
      );
    }
    const notAString = found.find(({ value }) => typeof value !== 'string');
    if (notAString) {
      const { path } = notAString;
      return deny(
        ctx,
        'malformed',
        path,
        fail('invalid_argument', `Argument ${path} must be a URL string.`, {
          fields: [{ path, expected: 'an absolute URL string' }],
        }),
      );
    }
    const settled = await Promise.allSettled(
      found.map(({ value }) => guard.policy.check(value as string, { signal: ctx.signal })),
    );
    const checkedUrls: Record<string, CheckedUrl> = {};
    for (const [index, outcome] of settled.entries()) {
      const { path } = found[index]!;
      if (outcome.status === 'fulfilled') {
        checkedUrls[path] = outcome.value;
        continue;
      }
      const error: unknown = outcome.reason;
      if (!isToolError(error)) throw error;
      const reason = isUrlRefusedError(error) ? error.reason : error.code;
      ctx.logger.warn(
        {
          tool: ctx.toolName,
          path,
          reason,
          ...(isUrlRefusedError(error) && { host: error.host, ...error.detail }),
        },
        'url-allowlist: refused a URL argument',
      );
      const host = isUrlRefusedError(error) ? error.host : undefined;
      return deny(
        ctx,
        reason,
        path,
        fail(error.code, `Argument ${path}: ${error.message}`, {
          hint: error.hint,
          retryable: error.retryable,
          ...(error.code === 'invalid_argument' && {
            fields: [{ path, expected: 'an absolute http(s) URL without user name or password' }],
          }),
        }),
        host,
      );
    }
    if (found.length > 0) {
      ctx.state.checkedUrls = { ...ctx.state.checkedUrls, ...checkedUrls };
      ctx.decisions.push({
        by: BY,
        action: 'allow',
        detail: {
          paths: Object.keys(checkedUrls),
          hosts: Object.values(checkedUrls).map((url) => url.hostname),
        },
      });
    }
    return next();
  };
}

function deny(
  ctx: ToolContext,
  reason: string,
  path: string | undefined,
  result: ToolResult,
  host?: string,
): ToolResult {
  ctx.decisions.push({
    by: BY,
    action: 'deny',
    reason,
    detail: {
      ...(path !== undefined && { path }),
      ...(host !== undefined && { host }),
    },
  });
  return result;
}

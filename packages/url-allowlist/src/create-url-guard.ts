import {
  fail,
  isPassThrough,
  isToolError,
  type PerToolOptions,
  resolveToolOptions,
  type ToolContext,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { findArguments, parseArgumentPath } from './argument-paths.js';
import { isUrlRefusedError } from './refusal.js';
import type { CheckedUrl, UrlPolicy } from './types.js';

declare module '@toolgate/core' {
  interface ToolCallState {
    /** URLs `createUrlGuard` checked, by argument path (`url`, `links[0].href`); pass one to `policy.fetch`. */
    checkedUrls?: Record<string, CheckedUrl>;
  }
}

/** What a tool may override (`tools: { name: { ... } }`), or `false` to leave the tool alone. */
export interface UrlGuardRules {
  /** Argument paths holding URLs: `url`, `target.url`, `urls[]`, `links[].href`. @default required (no default) */
  paths: string | readonly string[];
  /** The policy every URL is checked against, from `createUrlPolicy`. @default required (no default) */
  policy: UrlPolicy;
  /** Most URLs one call may carry, over all paths; a call with more is refused before any resolution. @default 16 */
  maxUrls: number;
}

/** Options of `createUrlGuard`: the rules for all tools (paths and policy required) and per-tool overrides. */
export interface UrlGuardOptions extends Partial<UrlGuardRules>, PerToolOptions<UrlGuardRules> {
  /** Argument paths holding URLs, for every tool the guard is on. @default required (no default) */
  paths: string | readonly string[];
  /** The policy every URL is checked against. @default required (no default) */
  policy: UrlPolicy;
}

/** @deprecated Use `Partial<UrlGuardRules>`; kept for one release. */
export type UrlArgumentOverride = Partial<UrlGuardRules>;
/** @deprecated Use `UrlGuardOptions`; kept for one release. */
export type UrlArgumentOptions = Pick<UrlGuardOptions, 'maxUrls' | 'tools'>;

interface Guard {
  readonly paths: readonly {
    readonly source: string;
    readonly segments: ReturnType<typeof parseArgumentPath>;
  }[];
  readonly policy: UrlPolicy;
  readonly maxUrls: number;
}

const BY = 'url-allowlist';
const DEFAULT_MAX_URLS = 16;

/**
 * Refuses a call whose URL argument(s) fail the policy, before the handler runs: `invalid_argument`
 * for what is not a usable URL, `permission_denied` for what the policy forbids, each with a hint.
 * Paths: `url`, `target.url`, `urls[]`, `links[].href`. A missing argument is left to the input
 * schema. Records `{ by: 'url-allowlist', action: 'deny' | 'allow' }` in `ctx.decisions` and leaves
 * the checked URLs in `ctx.state.checkedUrls`.
 */
export function createUrlGuard(options: UrlGuardOptions): ToolMiddleware {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError('createUrlGuard: give options with paths and a policy');
  }
  // Each resolved rule set (global, each tool) parsed once, keyed by the frozen object core hands back.
  const guards = new WeakMap<Readonly<UrlGuardRules>, Guard>();
  const rules = resolveToolOptions(
    'createUrlGuard',
    { paths: options.paths, policy: options.policy, maxUrls: DEFAULT_MAX_URLS },
    options,
    (resolved, where) => guards.set(resolved, guardOf(resolved, where)),
  );

  return async (ctx, next) => {
    // Unknown tools and refused arguments are answered by core's innermost step.
    const own = isPassThrough(ctx) ? undefined : rules.forTool(ctx.toolName);
    if (own === undefined) return next();
    const guard = guards.get(own)!;
    const { maxUrls } = guard;
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

/** @deprecated Use `createUrlGuard({ paths, policy, ...options })`; kept for one release. */
export function urlArgument(
  paths: string | readonly string[],
  policy: UrlPolicy,
  options: UrlArgumentOptions = {},
): ToolMiddleware {
  return createUrlGuard({ ...options, paths, policy });
}

function guardOf(rules: Readonly<UrlGuardRules>, where: string): Guard {
  if (typeof rules.policy?.check !== 'function') {
    throw new TypeError(`${where}: give a policy from createUrlPolicy()`);
  }
  if (!Number.isInteger(rules.maxUrls) || rules.maxUrls < 1) {
    throw new TypeError(`${where}: maxUrls must be an integer >= 1`);
  }
  const list = typeof rules.paths === 'string' ? [rules.paths] : [...(rules.paths ?? [])];
  if (list.length === 0) throw new TypeError(`${where}: give at least one argument path`);
  const paths = list.map((source) => {
    try {
      return { source, segments: parseArgumentPath(source) };
    } catch (error) {
      throw new TypeError(`${where}: ${(error as Error).message}`);
    }
  });
  return { paths, policy: rules.policy, maxUrls: rules.maxUrls };
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

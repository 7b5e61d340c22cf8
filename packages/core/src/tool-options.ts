import type { ToolContext } from './types.js';

/** Options for all tools, with per-tool overrides or `false` to opt a tool out. */
export interface PerToolOptions<T> {
  /** Per tool: fields that replace the global ones, or `false` (this middleware leaves the tool alone). */
  tools?: Readonly<Record<string, Partial<T> | false>> | undefined;
}

/** The resolved options of every tool, computed once when the middleware is created. */
export interface ToolOptionsResolver<T> {
  /** The global options (defaults overlaid with what the server gave). */
  readonly global: Readonly<T>;
  /** A tool's options, or `undefined` when the tool opted out. Unlisted tools get `global`. */
  forTool(name: string): Readonly<T> | undefined;
}

/**
 * Core's one merge rule for per-tool options: field by field, a tool's value wins over the global one,
 * which wins over the default; `undefined` means "not set". Only the fields of `defaults` are options, so
 * a tool override naming anything else is refused at once (a typo would otherwise be silently ignored).
 * `check` validates every resolved set (global and each tool) at creation time and should throw a
 * RangeError/TypeError naming `where`.
 */
export function resolveToolOptions<T extends object>(
  where: string,
  defaults: Readonly<T>,
  options: Partial<NoInfer<T>> & PerToolOptions<NoInfer<T>>,
  check?: (resolved: Readonly<NoInfer<T>>, where: string) => void,
): ToolOptionsResolver<T> {
  const fields = Object.keys(defaults) as (keyof T)[];
  const overlay = (base: Readonly<T>, over: Partial<T>): Readonly<T> => {
    const out: T = { ...base };
    for (const field of fields) if (over[field] !== undefined) out[field] = over[field] as T[keyof T];
    return Object.freeze(out);
  };
  const global = overlay(defaults, options);
  check?.(global, where);
  const tools = new Map<string, Readonly<T> | undefined>();
  for (const [name, override] of Object.entries(options.tools ?? {})) {
    if (override === false) {
      tools.set(name, undefined);
      continue;
    }
    if (typeof override !== 'object' || override === null) {
      throw new TypeError(`${where}: tools.${name} must be an object of options or false`);
    }
    const unknown = Object.keys(override).filter((key) => !fields.includes(key as keyof T));
    if (unknown.length > 0) {
      throw new TypeError(
        `${where}: tools.${name} has unknown option(s) ${unknown.join(', ')}; a tool may set ${fields.join(', ')}`,
      );
    }
    const resolved = overlay(global, override);
    check?.(resolved, `${where}: tools.${name}`);
    tools.set(name, resolved);
  }
  return {
    global,
    forTool: (name) => (tools.has(name) ? tools.get(name) : global),
  };
}

/**
 * For policies a tool opts into (confirmation, idempotency: `enabled` defaults to false globally): a tool
 * listed with an object is enabled unless it says `enabled: false` itself. Pass the result as `tools` to
 * `resolveToolOptions`.
 */
export function optInTools<T extends { enabled: boolean }>(
  tools: PerToolOptions<T>['tools'],
): Record<string, Partial<T> | false> | undefined {
  if (tools === undefined) return undefined;
  const out: Record<string, Partial<T> | false> = {};
  for (const [name, override] of Object.entries(tools)) {
    out[name] =
      typeof override === 'object' && override !== null && override.enabled === undefined
        ? { ...override, enabled: true }
        : override;
  }
  return out;
}

/**
 * True when a middleware should pass the call straight through: the tool is unknown (core answers it)
 * or its arguments were refused (the innermost step answers `invalid_argument`). Policies that key on
 * validated arguments or a tool's options skip such calls; audit and tracing still record them.
 */
export function isPassThrough(ctx: Pick<ToolContext, 'tool' | 'validation'>): boolean {
  return ctx.tool === undefined || !ctx.validation.ok;
}

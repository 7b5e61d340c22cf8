import {
  callNext,
  cancelledResult,
  classifyFailure,
  createSecretRedactor,
  type ErrorCode,
  errorOf,
  fail,
  isCallerCancel,
  isPassThrough,
  isToolError,
  type Logger,
  mapSettled,
  type NextFn,
  newIncidentId,
  type ToolContext,
  type ToolResult,
  toolErrorResult,
} from '@toolgate/core';
import {
  type BoundaryScrubs,
  endBoundaryScrubs,
  noteBoundaryScrub,
  startBoundaryScrubs,
  withOriginals,
} from './boundary-scrubs.js';
import { classificationOf } from './classify.js';
import { describeError } from './describe-error.js';
import { createFailureLog, type FailureLog, failureClass } from './failure-log.js';
import { resolveRules } from './options.js';
import { createScrubber, type RemovedCounts, removedAny, type Scrubber } from './scrub.js';
import { ERROR_SCRUB_PATTERNS } from './scrub-patterns.js';
import { envelopeOf, scrubErrorResult, withinScrubBudget } from './scrub-result.js';
import type {
  ClassifyError,
  ErrorClassification,
  RedactErrors,
  RedactErrorsOptions,
  RedactErrorsRules,
} from './types.js';

const BY = 'redact-errors';
// How much of a failure past its scrub budget the log line shows, in budgets.
const LOGGED_BUDGETS = 4;
// Made once: the debug log keeps what the tool meant to show, minus secrets.
const redactOriginal = createSecretRedactor();

/** What a tool's resolved rules become once, outside the per-call closure. */
interface Settings {
  readonly scrubber: Scrubber;
  readonly classify: ClassifyError | undefined;
  readonly internalMessage: string;
  readonly logger: Logger | undefined;
  readonly log: FailureLog;
  readonly maxScrubChars: number;
}

/**
 * Keeps internals out of what the model sees. Anything thrown below becomes the result contract:
 * a ToolError keeps its code and hint, a known failure (core's `classifyFailure`) its mapped code,
 * anything else `internal`; each with an incident id under which the full error is logged (repeats of
 * one failure class throttled into a summary line per interval). Every string of every error result
 * (thrown or returned) is scrubbed of stack frames, paths, SQL, connection strings, hosts, IP addresses,
 * secrets and environment dumps; `scrubText` gives core's boundary the same patterns for failures made
 * outside it (core's boundary bounds a failure before its hooks see it). Its own pass over a failure
 * scrubs at most `maxScrubChars` characters; strings past it are withheld (`[withheld: too much text]`),
 * never passed on unscrubbed, and logged under the incident id.
 * Success results pass untouched. Unknown tools and refused arguments pass through.
 *
 * Place it after audit: `otel → audit → redact-errors → authz → … → circuit-breaker → handler`.
 */
export function createRedactErrors(options: RedactErrorsOptions = {}): RedactErrors {
  const rules = resolveRules(options);
  const intervalMs = options.logIntervalMs ?? 60_000;
  if (!(Number.isFinite(intervalMs) && intervalMs >= 1)) {
    throw new RangeError('createRedactErrors: logIntervalMs must be a finite number of at least 1');
  }
  const log = createFailureLog(intervalMs);
  // One Settings per distinct resolved rule set (global, or a tool's own), built on first use.
  const built = new WeakMap<Readonly<RedactErrorsRules>, Settings>();
  const settingsFor = (toolName: string): Settings | undefined => {
    const own = rules.forTool(toolName);
    if (own === undefined) return undefined;
    let settings = built.get(own);
    if (settings === undefined) {
      settings = settingsOf(own, log);
      built.set(own, settings);
    }
    return settings;
  };

  // Not async itself: a call that passes through gets next()'s promise back untouched.
  const middleware = function redactErrorsMiddleware(ctx: ToolContext, next: NextFn): Promise<ToolResult> {
    // Unknown tools (core answers -32602) and refused arguments (core's own invalid_argument) pass on;
    // a transform or bind that threw is a throw like any other, so it is still mapped and logged here.
    if (isPassThrough(ctx) && !validationThrew(ctx)) return next();
    const settings = settingsFor(ctx.toolName);
    if (settings === undefined) return next();
    return guarded(ctx, next, settings);
  };
  // An after-call step on next()'s promise rather than an async function: a success (nearly every
  // call) costs one promise and no suspended frame, and no microtask hop of its own when the
  // middleware around it map the outcome the same way (core's mapSettled).
  const guarded = (ctx: ToolContext, next: NextFn, settings: Settings): Promise<ToolResult> => {
    startBoundaryScrubs(ctx);
    const pending = callNext(next);
    return mapSettled(
      pending,
      (result) => {
        const boundary = endBoundaryScrubs(ctx);
        if (result.isError !== true) return result;
        // A confirmation request shows the person the arguments as the model sent them, each line's
        // secrets already redacted by @toolgate/confirm: as at core's boundary, no internal-detail
        // scrubber runs over it (a reason `UPDATE the address` shown `[sql]` in two steps and whole by
        // form would have the person approve words that are not the ones that run).
        if (errorOf(result)?.error === 'confirmation_required') return result;
        return scrubbedFailure(ctx, result, settings, 'returned', boundary);
      },
      (error: unknown) => {
        const answer = thrownResult(ctx, error, settings);
        endBoundaryScrubs(ctx);
        return answer;
      },
    );
  };
  const scrubText = (text: string, ctx: ToolContext): string => {
    const settings = settingsFor(ctx.toolName);
    if (settings === undefined) return text;
    const removed: RemovedCounts = {};
    const out = settings.scrubber.text(text, removed);
    if (out === text || noteBoundaryScrub(ctx, removed, text, out)) return out;
    // Made outside this middleware's run (a middleware before it, or core's exit pass): log it here.
    (settings.logger ?? ctx.logger).debug(
      { ...callFields(ctx), incidentId: ctx.incidentId, origin: 'boundary', removed, original: text },
      'redact-errors: scrubbed a failure string at the boundary',
    );
    return out;
  };
  const scrubValue = (value: unknown, ctx: ToolContext): unknown => {
    const settings = settingsFor(ctx.toolName);
    if (settings === undefined) return value;
    const removed: RemovedCounts = {};
    const out = settings.scrubber.value(value, removed);
    if (removedAny(removed)) {
      (settings.logger ?? ctx.logger).debug(
        { ...callFields(ctx), incidentId: ctx.incidentId, origin: 'log message', removed },
        'redact-errors: scrubbed a log message sent to the client',
      );
    }
    return out;
  };
  return Object.assign(middleware, { scrubText, scrubValue, close: () => log.flush() });
}

/**
 * @deprecated Renamed `createRedactErrors` (core's `createX` convention); this alias goes in the next
 * release.
 */
export const redactErrors: (options?: RedactErrorsOptions) => RedactErrors = createRedactErrors;

function validationThrew(ctx: ToolContext): boolean {
  return !ctx.validation.ok && ctx.validation.error !== undefined;
}

function settingsOf(rules: Readonly<RedactErrorsRules>, log: FailureLog): Settings {
  const extra = rules.patterns;
  return {
    scrubber: createScrubber(extra.length === 0 ? ERROR_SCRUB_PATTERNS : [...ERROR_SCRUB_PATTERNS, ...extra]),
    classify: rules.classify,
    internalMessage: rules.internalMessage,
    logger: rules.logger,
    log,
    maxScrubChars: rules.maxScrubChars,
  };
}

function thrownResult(ctx: ToolContext, error: unknown, settings: Settings): ToolResult {
  const logger = settings.logger ?? ctx.logger;
  if (isToolError(error)) {
    // Thrown on purpose (by a middleware below: core turns a handler's own into a result first).
    // Its cause, if any, is for the log, so it gets an incident id; so does `internal`.
    let incidentId = ctx.incidentId;
    if (error.cause !== undefined || error.code === 'internal') {
      incidentId = incidentOf(ctx);
      const common = { tool: ctx.toolName, outcome: error.code };
      settings.log({
        key: `${ctx.toolName}:${error.code}:${failureClass(error.cause ?? error)}`,
        logger,
        level: 'warn',
        message: 'tool error',
        fields: () => ({ ...callFields(ctx), incidentId, outcome: error.code, error: describeError(error) }),
        common,
        incidentId,
      });
    }
    return scrubbedFailure(ctx, toolErrorResult(error, incidentId), settings, 'thrown');
  }
  if (isCallerCancel(ctx, error)) {
    // The caller's own cancel, not an incident: no incident id, and the client's reason text (it
    // chose it) stays out of the log.
    settings.log({
      key: `${ctx.toolName}:cancelled`,
      logger,
      level: 'info',
      message: 'tool call cancelled by the client',
      fields: () => callFields(ctx),
      common: { tool: ctx.toolName, outcome: 'timeout' },
      incidentId: undefined,
    });
    ctx.decisions.push({ by: BY, action: 'cancelled', reason: 'the caller cancelled the call' });
    return cancelledResult(ctx.toolName);
  }
  const incidentId = incidentOf(ctx);
  const known = classifyGuarded(error, settings, logger, ctx);
  const code: ErrorCode = known?.code ?? 'internal';
  // Built only for a line that is written: describing the error reads its stack, the costly part.
  const fields = () => ({ ...callFields(ctx), incidentId, outcome: code, error: describeError(error) });
  const key = `${ctx.toolName}:${code}:${failureClass(error)}`;
  if (known) {
    const common = { tool: ctx.toolName, outcome: code, reason: known.reason };
    settings.log({
      key,
      logger,
      level: 'warn',
      message: 'tool call failed: known failure',
      fields: () => ({ ...fields(), reason: known.reason }),
      common,
      incidentId,
    });
    ctx.decisions.push({ by: BY, action: 'map', reason: known.reason ?? 'classify hook', detail: { code } });
  } else {
    const common = { tool: ctx.toolName, outcome: code };
    settings.log({ key, logger, level: 'error', message: 'tool call failed', fields, common, incidentId });
    ctx.decisions.push({ by: BY, action: 'internal', detail: { code } });
  }
  const failure = known
    ? fail(known.code, known.message ?? GENERIC_MESSAGES[known.code], {
        ...(known.hint !== undefined && { hint: known.hint }),
        ...(known.retryable !== undefined && { retryable: known.retryable }),
        ...(known.retryAfterMs !== undefined && { retryAfterMs: known.retryAfterMs }),
        incidentId,
      })
    : fail('internal', settings.internalMessage, { incidentId });
  return scrubbedFailure(ctx, failure, settings, 'thrown');
}

function classifyGuarded(
  error: unknown,
  settings: Settings,
  logger: Logger,
  ctx: ToolContext,
): ErrorClassification | undefined {
  if (settings.classify) {
    try {
      const custom = settings.classify(error);
      if (custom !== undefined) return { reason: 'classify hook', ...custom };
    } catch (hookError) {
      // A broken hook must not break the call: log it (once per interval) and use the built-in mapping.
      settings.log({
        key: `${ctx.toolName}:classify-hook:${failureClass(hookError)}`,
        logger,
        level: 'warn',
        message: 'redact-errors: classify hook threw',
        fields: () => ({ ...callFields(ctx), error: describeError(hookError) }),
        common: { tool: ctx.toolName },
        incidentId: undefined,
      });
    }
  }
  const known = classifyFailure(error);
  return known === undefined ? undefined : classificationOf(known);
}

function scrubbedFailure(
  ctx: ToolContext,
  result: ToolResult,
  settings: Settings,
  origin: 'thrown' | 'returned',
  boundary?: BoundaryScrubs,
): ToolResult {
  const envelope = envelopeOf(result);
  // What core's boundary already removed below counts as removed here: one log line, one decision.
  const removed: RemovedCounts = { ...boundary?.removed };
  // Strings past the budget are withheld before any pattern runs: the scrub's cost stays bounded.
  const bounded = withinScrubBudget(result, settings.maxScrubChars);
  if (bounded.withheld > 0) removed.withheld = (removed.withheld ?? 0) + bounded.withheld;
  const withheld = bounded.withheld > 0;
  // `internal` always carries an incident id, so the model can quote one the log can find; so does a
  // failure whose text was withheld (the log has it).
  const needsIncident =
    envelope !== undefined &&
    envelope.incidentId === undefined &&
    (envelope.error === 'internal' || withheld);
  const incidentId = needsIncident || withheld ? incidentOf(ctx) : undefined;
  const scrubbed = scrubErrorResult(
    bounded.result,
    settings.scrubber,
    removed,
    needsIncident ? incidentId : undefined,
  );
  const changed = removedAny(removed);
  if (!changed && !needsIncident) return result;
  const logger = settings.logger ?? ctx.logger;
  const fields = () => ({
    ...callFields(ctx),
    incidentId: ctx.incidentId,
    origin,
    removed,
    // What the handler meant to show, minus secrets: enough to debug the tool, safe to keep.
    original: redactOriginal(withOriginals(envelope ?? result.content, boundary)),
  });
  if (withheld) {
    logWithheld(ctx, settings, origin, incidentId, () => ({
      ...fields(),
      // The whole failure as it came, secrets redacted; that redaction's cost bounded too (at four
      // budgets).
      original: redactOriginal(
        withOriginals(withinScrubBudget(result, LOGGED_BUDGETS * settings.maxScrubChars).result, boundary),
      ),
    }));
  } else if (needsIncident) {
    settings.log({
      key: `${ctx.toolName}:internal:returned`,
      logger,
      level: 'warn',
      message: 'tool returned an internal failure',
      fields,
      common: { tool: ctx.toolName, outcome: 'internal', origin },
      incidentId,
    });
  } else logger.debug(fields(), 'redact-errors: scrubbed an error result');
  if (changed) ctx.decisions.push({ by: BY, action: 'scrub', detail: { removed } });
  return scrubbed;
}

/**
 * One `warn` line (throttled per tool) for a pass of this middleware that withheld text past
 * `maxScrubChars`, with the failure as it came (secrets redacted, up to four budgets of it).
 */
function logWithheld(
  ctx: ToolContext,
  settings: Settings,
  origin: 'thrown' | 'returned',
  incidentId: string | undefined,
  more?: () => Record<string, unknown>,
): void {
  settings.log({
    key: `${ctx.toolName}:withheld`,
    logger: settings.logger ?? ctx.logger,
    level: 'warn',
    message: 'redact-errors: withheld failure text past maxScrubChars',
    fields: () => ({
      ...callFields(ctx),
      incidentId,
      origin,
      ...more?.(),
      maxScrubChars: settings.maxScrubChars,
    }),
    common: { tool: ctx.toolName, origin },
    incidentId,
  });
}

/** The call's incident id, set on the context when this is the first to need one (audit reads it). */
function incidentOf(ctx: ToolContext): string {
  if (ctx.incidentId === undefined) ctx.incidentId = newIncidentId();
  return ctx.incidentId;
}

function callFields(ctx: ToolContext): Record<string, unknown> {
  return { tool: ctx.toolName, requestId: ctx.request.id, sessionId: ctx.request.sessionId };
}

const GENERIC_MESSAGES: Readonly<Record<ErrorCode, string>> = {
  invalid_argument: 'An argument is not valid.',
  permission_denied: 'This operation is not permitted.',
  not_found: 'Nothing matches.',
  unavailable: 'A service this tool depends on is unavailable.',
  timeout: 'The call took too long.',
  rate_limited: 'Too many calls.',
  repeated_call: 'This exact call was already answered.',
  confirmation_required: 'A person must confirm this call first.',
  internal: 'Internal error.',
};

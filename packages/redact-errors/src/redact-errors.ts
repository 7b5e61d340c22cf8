import {
  classifyFailure,
  createSecretRedactor,
  type ErrorCode,
  fail,
  isToolError,
  type Logger,
  newIncidentId,
  type ToolContext,
  type ToolMiddleware,
  type ToolResult,
  toolErrorResult,
} from '@toolgate/core';
import { classificationOf } from './classify.js';
import { describeError } from './describe-error.js';
import { createScrubber, type RemovedCounts, removedAny, type Scrubber } from './scrub.js';
import { ERROR_SCRUB_PATTERNS } from './scrub-patterns.js';
import { envelopeOf, scrubErrorResult } from './scrub-result.js';
import type {
  ClassifyError,
  ErrorClassification,
  RedactErrorsOptions,
  RedactErrorsToolOptions,
} from './types.js';

const BY = 'redact-errors';
// Made once: the debug log keeps what the tool meant to show, minus secrets.
const redactOriginal = createSecretRedactor();

interface Settings {
  readonly scrubber: Scrubber;
  readonly classify: ClassifyError | undefined;
  readonly internalMessage: string;
  readonly logger: Logger | undefined;
}

/**
 * Keeps internals out of what the model sees. Anything thrown below becomes the result contract:
 * a ToolError keeps its code and hint, a known failure (pg, network, abort) its mapped code, anything
 * else `internal`; each with an incident id under which the full error is logged. Every string of
 * every error result (thrown or returned) is scrubbed of stack frames, paths, SQL, connection
 * strings, hosts, IP addresses, secrets and environment dumps. Success results pass untouched.
 */
export function redactErrors(options: RedactErrorsOptions = {}): ToolMiddleware {
  const global = settingsOf(options);
  const perTool = new Map<string, Settings | false>();
  for (const [name, entry] of Object.entries(options.tools ?? {})) {
    perTool.set(name, entry === false ? false : settingsOf({ ...options, ...entry }));
  }
  const middleware: ToolMiddleware = async function redactErrorsMiddleware(ctx, next) {
    const settings = perTool.size === 0 ? global : (perTool.get(ctx.toolName) ?? global);
    if (settings === false) return next();
    let result: ToolResult;
    try {
      result = await next();
    } catch (error) {
      return thrownResult(ctx, error, settings);
    }
    if (result.isError !== true) return result;
    return scrubbedFailure(ctx, result, settings, 'returned');
  };
  return middleware;
}

function settingsOf(options: RedactErrorsToolOptions): Settings {
  const extra = options.patterns ?? [];
  return {
    scrubber: createScrubber(extra.length === 0 ? ERROR_SCRUB_PATTERNS : [...ERROR_SCRUB_PATTERNS, ...extra]),
    classify: options.classify,
    internalMessage: options.internalMessage ?? 'Internal error.',
    logger: options.logger,
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
      logger.warn(
        { ...callFields(ctx), incidentId, outcome: error.code, error: describeError(error) },
        'tool error',
      );
    }
    return scrubbedFailure(ctx, toolErrorResult(error, incidentId), settings, 'thrown');
  }
  const incidentId = incidentOf(ctx);
  const known = classifyGuarded(error, settings, logger, ctx);
  const code: ErrorCode = known?.code ?? 'internal';
  const fields = { ...callFields(ctx), incidentId, outcome: code, error: describeError(error) };
  if (known) {
    logger.warn({ ...fields, reason: known.reason }, 'tool call failed: known failure');
    ctx.decisions.push({ by: BY, action: 'map', reason: known.reason ?? 'classify hook', detail: { code } });
  } else {
    logger.error(fields, 'tool call failed');
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
      // A broken hook must not break the call: log it and use the built-in mapping.
      logger.warn(
        { ...callFields(ctx), error: describeError(hookError) },
        'redact-errors: classify hook threw',
      );
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
): ToolResult {
  const envelope = envelopeOf(result);
  // `internal` always carries an incident id, so the model can quote one the log can find.
  const needsIncident = envelope?.error === 'internal' && envelope.incidentId === undefined;
  const incidentId = needsIncident ? incidentOf(ctx) : undefined;
  const removed: RemovedCounts = {};
  const scrubbed = scrubErrorResult(result, settings.scrubber, removed, incidentId);
  const changed = removedAny(removed);
  if (!changed && !needsIncident) return result;
  const logger = settings.logger ?? ctx.logger;
  const fields = {
    ...callFields(ctx),
    incidentId: ctx.incidentId,
    origin,
    removed,
    // What the handler meant to show, minus secrets: enough to debug the tool, safe to keep.
    original: redactOriginal(envelope ?? result.content),
  };
  if (needsIncident) logger.warn(fields, 'tool returned an internal failure');
  else logger.debug(fields, 'redact-errors: scrubbed an error result');
  if (changed) ctx.decisions.push({ by: BY, action: 'scrub', detail: { removed } });
  return scrubbed;
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
  internal: 'Internal error.',
};

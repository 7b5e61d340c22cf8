import { randomBytes } from 'node:crypto';
import { isCallerCancel } from './classify-failure.js';
import { isErrorCode } from './codes.js';
import { isToolError } from './errors.js';

/** A short, unguessable id that ties what the model saw to the full error in the server log. */
export function newIncidentId(): string {
  return `inc_${randomBytes(9).toString('base64url')}`;
}

const INCIDENT_ID = /^inc_[A-Za-z0-9_-]{1,32}$/;

/**
 * Whether a value has the form of an incident id (`newIncidentId`'s, or a custom one of up to 32 URL-safe
 * characters after `inc_`): the only ids the model-facing boundary passes on to the model.
 */
export function isIncidentId(value: unknown): value is string {
  return typeof value === 'string' && INCIDENT_ID.test(value);
}

/**
 * The incident id core answers an error thrown out of the chain with (`register.ts`: `lastResort`,
 * `toolErrorAnswer`), set on the call now: anything
 * but a ToolError is `internal` under one, and a ToolError with a cause is answered under one (the
 * cause goes to the log under it), and so is one whose code is none of core's (relayed from an
 * upstream: the boundary answers `internal` for it). A middleware that records the throw before core
 * answers it (audit, otel) gets the id the model will see. A ToolError without a cause: the call's id,
 * if it has one; so does what the caller's own cancel made (`isCallerCancel`: not an incident).
 */
export function incidentOfThrow(
  ctx: { incidentId?: string | undefined; readonly request?: { readonly signal: AbortSignal } },
  error: unknown,
): string | undefined {
  if (isToolError(error) && error.cause === undefined && isErrorCode(error.code)) return ctx.incidentId;
  if (!isToolError(error) && ctx.request !== undefined && isCallerCancel({ request: ctx.request }, error)) {
    return ctx.incidentId;
  }
  ctx.incidentId ??= newIncidentId();
  return ctx.incidentId;
}

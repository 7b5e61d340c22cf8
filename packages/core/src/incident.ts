import { randomBytes } from 'node:crypto';

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

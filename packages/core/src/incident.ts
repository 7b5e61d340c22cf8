import { randomBytes } from 'node:crypto';

/** A short, unguessable id that ties what the model saw to the full error in the server log. */
export function newIncidentId(): string {
  return `inc_${randomBytes(9).toString('base64url')}`;
}

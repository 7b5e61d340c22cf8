import { subjectOf } from './identity.js';
import type { ToolContext } from './types.js';

/**
 * Who is calling: the token's subject (`authInfo.extra.sub`) when it names someone (not blank, not a
 * word for a missing value such as `"undefined"`, `"None"`, `"<nil>"` or `"0"`: core's identity rule
 * reads it the same way), else its client id;
 * undefined without auth. Audit and repeat-guard key on this.
 */
export function principalOf(ctx: Pick<ToolContext, 'request'>): string | undefined {
  const auth = ctx.request.authInfo;
  if (!auth) return undefined;
  return subjectOf(auth.extra) ?? (auth.clientId || undefined);
}

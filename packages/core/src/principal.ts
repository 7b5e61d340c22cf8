import { ownClaim } from './identity.js';
import type { ToolContext } from './types.js';

/**
 * Who is calling: the token's subject (`authInfo.extra.sub`) when present, else its client id;
 * undefined without auth. Audit and repeat-guard key on this.
 */
export function principalOf(ctx: Pick<ToolContext, 'request'>): string | undefined {
  const auth = ctx.request.authInfo;
  if (!auth) return undefined;
  const sub = auth.extra === undefined ? undefined : ownClaim(auth.extra, 'sub');
  if (typeof sub === 'string' && sub !== '') return sub;
  return auth.clientId || undefined;
}

import { createHash, timingSafeEqual } from 'node:crypto';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import * as z from 'zod';

const TokenEntrySchema = z.strictObject({
  token: z
    .string()
    .min(16, 'tokens must be at least 16 characters')
    // A bearer credential carries neither (RFC 6750); a comma is how a proxy joins two of them.
    .regex(/^[^\s,]+$/, 'tokens must not contain whitespace or commas'),
  clientId: z.string().min(1),
  scopes: z.array(z.string()).default([]),
  /** Claims the tools may bind parameters from, e.g. `{ "sub": "agent-7", "customerId": 17 }`. */
  claims: z.record(z.string(), z.unknown()).default({}),
});
export const TokenConfigSchema = z.strictObject({ tokens: z.array(TokenEntrySchema).min(1) });
export type TokenConfig = z.input<typeof TokenConfigSchema>;

/** Looks a bearer token up among the configured ones, in constant time per entry. */
export interface TokenVerifier {
  verify(token: string): AuthInfo | undefined;
}

export function createTokenVerifier(config: TokenConfig): TokenVerifier {
  const parsed = TokenConfigSchema.parse(config);
  const entries = parsed.tokens.map((entry) => ({ ...entry, digest: digest(entry.token) }));
  return {
    verify(token) {
      const candidate = digest(token);
      let found: (typeof entries)[number] | undefined;
      for (const entry of entries) if (timingSafeEqual(entry.digest, candidate)) found = entry;
      if (!found) return undefined;
      return { token, clientId: found.clientId, scopes: [...found.scopes], extra: { ...found.claims } };
    },
  };
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { callKey, canonicalJson, type ToolContext } from '@toolgate/core';

/** The argument a tool declares so a model can send a confirmation back (models only fill arguments). */
export const CONFIRMATION_ARGUMENT = 'confirmation';
/** The request `_meta` key a client may send a confirmation under instead. */
export const CONFIRMATION_META = 'toolgate/confirmation';

const VERSION = 'c1';
const MAC_HEX = 32; // 128 bits of HMAC-SHA256: ample against forgery, short enough for a model to copy

/** What a confirmation's MAC is keyed by: the server's secret and its audience (which server issued it). */
export interface MacKey {
  readonly secret: Uint8Array;
  /** `options.audience`; undefined only with the middleware's own memory store. */
  readonly audience: string | undefined;
}

/** A confirmation issued for one call: what was shown, to whom, until when. */
export interface Issued {
  /** `c1.<expiresAt base36>.<nonce hex>.<mac hex>`: no JSON, no base64 (nothing a secret pattern eats). */
  readonly token: string;
  /** The HMAC digest audit records (the token's MAC). */
  readonly digest: string;
  readonly nonce: string;
  readonly expiresAt: number;
}

export type Verdict =
  | { readonly ok: true; readonly digest: string; readonly nonce: string; readonly expiresAt: number }
  | { readonly ok: false; readonly reason: 'malformed' | 'mismatch' | 'expired'; readonly digest?: string };

/** The arguments a confirmation covers: all but the confirmation itself. */
export function coveredArguments(args: Readonly<Record<string, unknown>>): Record<string, unknown> {
  if (!(CONFIRMATION_ARGUMENT in args)) return args as Record<string, unknown>;
  const { [CONFIRMATION_ARGUMENT]: _token, ...rest } = args;
  return rest;
}

/**
 * HMAC-SHA256 over (the server's audience; caller identity + bindings + tool + canonical arguments,
 * from core's `callKey`; expiry; nonce): a confirmation is valid for exactly the call that was shown,
 * by the caller it was shown to, on the server that showed it, until it expires.
 */
export function macOf(key: MacKey, ctx: ToolContext, expiresAt: number, nonce: string): string {
  const call = callKey({ ...ctx, args: coveredArguments(ctx.args) });
  return createHmac('sha256', key.secret)
    .update(canonicalJson(['toolgate/confirm', VERSION, key.audience ?? null, call, expiresAt, nonce]))
    .digest('hex')
    .slice(0, MAC_HEX);
}

export function issue(key: MacKey, ctx: ToolContext, ttlMs: number): Issued {
  const expiresAt = Date.now() + ttlMs;
  const nonce = randomBytes(16).toString('hex');
  const digest = macOf(key, ctx, expiresAt, nonce);
  return { token: `${VERSION}.${expiresAt.toString(36)}.${nonce}.${digest}`, digest, nonce, expiresAt };
}

const SHAPE = /^c1\.([0-9a-z]{1,12})\.([0-9a-f]{32})\.([0-9a-f]{32})$/;

/** Checks a confirmation against this call on this server (constant-time MAC comparison) and its expiry. */
export function verify(key: MacKey, ctx: ToolContext, token: string): Verdict {
  const match = SHAPE.exec(token);
  if (match === null) return { ok: false, reason: 'malformed' };
  const [, expiry, nonce, mac] = match as unknown as [string, string, string, string];
  const expiresAt = Number.parseInt(expiry, 36);
  const expected = Buffer.from(macOf(key, ctx, expiresAt, nonce), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(mac, 'hex'))) return { ok: false, reason: 'mismatch' };
  if (Date.now() >= expiresAt) return { ok: false, reason: 'expired', digest: mac };
  return { ok: true, digest: mac, nonce, expiresAt };
}

/** The confirmation a call carries: its `confirmation` argument, else its request `_meta`. */
export function carriedConfirmation(ctx: ToolContext): unknown {
  const fromArgs = ctx.args[CONFIRMATION_ARGUMENT];
  if (fromArgs !== undefined) return fromArgs;
  return ctx.request.meta?.[CONFIRMATION_META];
}

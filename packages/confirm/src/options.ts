import type { KeyValueStore, PerToolOptions, ToolContext } from '@toolgate/core';

/** Options a tool may set for itself (under `tools`), or the server for every tool. */
export interface ConfirmToolOptions {
  /** Whether calls of the tool need a person's confirmation; a tool listed under `tools` with an object is enabled unless it says false. @default false */
  enabled: boolean;
  /** The sentence that opens the prompt, from the validated arguments (e.g. "Refund 25 EUR on order A-1"); plain text, sanitised, inert to markdown and cut past 300 characters like a value. @default undefined (the tool's title) */
  describe: ((args: Readonly<Record<string, unknown>>) => string) | undefined;
  /** How long a two-step confirmation stays valid, in ms. @default 300000 */
  ttlMs: number;
  /** How long the person has to answer an elicitation, in ms. @default 120000 */
  elicitTimeoutMs: number;
  /** Longest prompt shown, in characters (a longer one is cut and says so). @default 1500 */
  maxPromptChars: number;
  /**
   * Only the confirmation page counts (URL mode, needs `url`): a client that cannot open it is refused
   * rather than asked by form or in two steps, where the client or the model could answer for the person. @default false
   */
  pageOnly: boolean;
}

/** What `url.build` gets for a pending URL confirmation. */
export interface PendingUrlConfirmation {
  /** The confirmation's id: 128 random bits, base64url. Put it in the page's address. */
  readonly id: string;
  /** The tool the call asked for. */
  readonly tool: string;
  /** When the person's answer stops counting (epoch ms). */
  readonly expiresAt: number;
}

/**
 * URL mode: the person confirms on a page your server serves, where they sign in; the client only
 * opens it. The page reads the call with `confirm.pending(id)` and records the person's answer with
 * `confirm.answer(id, ...)`.
 */
export interface ConfirmUrlOptions {
  /** The page's absolute http(s) address for a pending confirmation (it must carry `pending.id`). @default none */
  build: (pending: PendingUrlConfirmation) => string;
  /** How often a waiting call reads the store for the person's answer, in ms. @default 250 */
  pollMs?: number;
  /**
   * Who may read and answer a call's confirmation: a string from the call that your page produces for
   * the person it signed in (pass it as `principal`). Servers that trust several issuers include the
   * issuer (`${iss} ${sub}`), so equal subjects of two issuers are not one person. @default principalOf(ctx) (the token's sub; a
   * token without one, whose client id may be shared by every user of an app, is not sent to the page)
   */
  person?: (ctx: ToolContext) => string | undefined;
  /**
   * Most confirmations one caller (core's `callerTag`) may have waiting on the page at once, on every
   * replica sharing the store; one more is refused `rate_limited`. From 1 to 100 (a refused call tries each). @default 20
   */
  maxOpenPerCaller?: number;
}

/** Options of `createConfirm`. */
export interface ConfirmOptions extends Partial<ConfirmToolOptions>, PerToolOptions<ConfirmToolOptions> {
  /** The server's HMAC key (at least 32 bytes, the same on every replica, from a secret store). Required. @default none */
  secret: string | Uint8Array;
  /**
   * This server's name (e.g. `'orders-prod'`): the same on every replica of one server, another on every
   * other server or deployment (staging, another service) that shares the secret or the store. Every
   * confirmation's MAC covers it and every key written starts with it, so a confirmation or a page's
   * answer of one server is never accepted by another. 1 to 64 letters, digits, `.`, `_` or `-`, the
   * first a letter or digit. @default none: required with `store` (a store passed in may be shared);
   * without `store`, the middleware's own memory store holds what no other server can read
   */
  audience?: string;
  /** Where issued two-step confirmations are held until used (each is accepted once, and only while held) and URL-mode calls wait; `@toolgate/redis-store` shares them across replicas. Needs `audience`. @default createMemoryStore() */
  store?: KeyValueStore;
  /** Longest one store operation may take, in ms. @default 200 */
  storeTimeoutMs?: number;
  /**
   * URL mode for clients that declare URL elicitation: the person confirms on your page (see
   * `ConfirmUrlOptions`); other clients get form elicitation or two steps as without it. @default undefined
   */
  url?: ConfirmUrlOptions;
}

export const TOOL_DEFAULTS: ConfirmToolOptions = Object.freeze({
  enabled: false,
  describe: undefined,
  ttlMs: 300_000,
  elicitTimeoutMs: 120_000,
  maxPromptChars: 1500,
  pageOnly: false,
});

export function checkToolOptions(resolved: Readonly<ConfirmToolOptions>, where: string): void {
  for (const field of ['ttlMs', 'elicitTimeoutMs', 'maxPromptChars'] as const) {
    if (!(Number.isInteger(resolved[field]) && resolved[field] >= 1)) {
      throw new RangeError(`${where}: ${field} must be a positive integer`);
    }
  }
  if (resolved.maxPromptChars < 200) throw new RangeError(`${where}: maxPromptChars must be at least 200`);
  if (typeof resolved.pageOnly !== 'boolean') throw new TypeError(`${where}: pageOnly must be a boolean`);
  if (resolved.describe !== undefined && typeof resolved.describe !== 'function') {
    throw new TypeError(`${where}: describe must be a function of the arguments`);
  }
}

/**
 * How long what the store holds about a confirmation (an issued two-step one, a page's answer or that
 * the call stopped waiting) outlives the confirmation's expiry. Replicas check expiry by their own clocks
 * while a shared store expires keys by its own: a replica whose clock lags must still find the record,
 * and a late page still learns the confirmation was taken.
 */
export const KEPT_PAST_EXPIRY_MS = 60_000;

const AUDIENCE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * The server's audience, checked: required with a store passed in (another server may share it, and
 * with it the secret: then each accepts the other's confirmations); none with the middleware's own
 * memory store, which no other server reads. No `:`, `{` or `}`: it is a segment of every store key,
 * in front of the key's hash tag.
 */
export function checkAudience(audience: unknown, storeGiven: boolean): string | undefined {
  if (audience === undefined) {
    if (!storeGiven) return undefined;
    throw new TypeError(
      "createConfirm: audience is required with a store: name this server (e.g. 'orders-prod'), the same on all its replicas and another on every other server sharing the store or the secret",
    );
  }
  if (typeof audience !== 'string' || !AUDIENCE.test(audience)) {
    throw new TypeError(
      "createConfirm: audience must be 1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit (e.g. 'orders-prod')",
    );
  }
  return audience;
}

/** The start of every key the package writes: `confirm:<audience>:` (`confirm:` without an audience). */
export function keyPrefix(audience: string | undefined): string {
  return audience === undefined ? 'confirm:' : `confirm:${audience}:`;
}

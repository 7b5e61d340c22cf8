import { randomBytes, randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type BoundedStore,
  callerTag,
  principalOf,
  redactSecretsInText,
  type ToolContext,
  ToolError,
} from '@toolgate/core';
import { type ConfirmUrlOptions, KEPT_PAST_EXPIRY_MS } from './options.js';

/** What `confirm.pending(id, principal)` gives the page to show. */
export interface UrlConfirmationCall {
  readonly id: string;
  /** The tool the call asked for. */
  readonly tool: string;
  /** The prompt the client was shown (sanitised, secrets redacted: escape it for HTML like any text). */
  readonly prompt: string;
  /** When an answer stops counting (epoch ms). */
  readonly expiresAt: number;
}

/**
 * What `confirm.answer` did: `recorded` (the waiting call goes on), `unknown` (no such confirmation, or
 * it expired), `forbidden` (the person is not the caller), `already answered` (the first answer stands),
 * `closed` (the call no longer waits: dismissed in the client, cancelled or failed).
 */
export type UrlAnswerOutcome = 'recorded' | 'unknown' | 'forbidden' | 'already answered' | 'closed';

/** The page's answer: the person's decision and who they signed in as (the caller's principal). */
export interface UrlAnswer {
  readonly approve: boolean;
  /** The principal the page authenticated (a token's `sub`, else its client id); undefined only for a caller without one. */
  readonly principal: string | undefined;
}

/** How the wait for the page ended. */
export type PageVerdict = 'approved' | 'declined';

/** A confirmation about to be opened: its id, page address and expiry. */
export interface PreparedPage {
  readonly id: string;
  readonly url: string;
  readonly expiresAt: number;
}

/** A confirmation stored and waiting: it holds one of its caller's open slots until `end`. */
export interface OpenPage extends PreparedPage {
  readonly slot: string;
}

interface Stored {
  tool: string;
  prompt: string;
  expiresAt: number;
  principal: string | null;
}

const ID = /^[A-Za-z0-9_-]{22}$/;
/** The answer key's value once the call stopped waiting. */
const CLOSED = 'closed';

/**
 * URL mode's store side: a pending call, the page's answer, the call's wait for it. Every key starts
 * with `prefix` (`confirm:<audience>:`), so a page of another server sharing the store neither finds
 * nor answers this server's calls, and each server counts its callers' open slots on its own.
 */
export function createUrlConfirmations(store: BoundedStore, url: ConfirmUrlOptions, prefix: string) {
  if (typeof url !== 'object' || url === null || typeof url.build !== 'function') {
    throw new TypeError(
      'createConfirm: url.build must be a function that returns the confirmation page address',
    );
  }
  if (url.person !== undefined && typeof url.person !== 'function') {
    throw new TypeError('createConfirm: url.person must be a function of the call');
  }
  const personOf = url.person ?? principalOf;
  const pollMs = url.pollMs ?? 250;
  if (!(Number.isInteger(pollMs) && pollMs >= 1)) {
    throw new RangeError('createConfirm: url.pollMs must be a positive integer');
  }
  const maxOpen = url.maxOpenPerCaller ?? 20;
  if (!(Number.isInteger(maxOpen) && maxOpen >= 1 && maxOpen <= 100)) {
    throw new RangeError('createConfirm: url.maxOpenPerCaller must be an integer from 1 to 100');
  }
  const pendingKey = (id: string): string => `${prefix}url:{${id}}`;
  const answerKey = (id: string): string => `${prefix}url:{${id}}:answer`;
  // In the caller's scope, so core's memory store counts a caller's URL confirmations against its
  // maxEntriesPerScope: the keys above each sit in a scope of their own (the page knows only the id).
  const openKey = (tag: string, id: string): string => `${prefix}url-open:{${tag}}:${id}`;
  const slotKey = (tag: string, slot: number): string => `${prefix}url-slot:{${tag}}:${slot}`;

  /** A new confirmation's id, expiry and page address (a bad address is the server's bug: throws TypeError). */
  const prepare = (ctx: ToolContext, ttlMs: number): PreparedPage => {
    const id = randomBytes(16).toString('base64url');
    const expiresAt = Date.now() + ttlMs;
    const address = url.build({ id, tool: ctx.toolName, expiresAt });
    checkAddress(address);
    return { id, url: address, expiresAt };
  };

  /**
   * Claims one of the caller's slots, then marks the confirmation in the caller's scope, then stores
   * the pending call so the page (on any replica) can show and answer it. Undefined when every slot is
   * held. Throws when the store cannot (full: core's StoreFullError), and then leaves nothing behind.
   */
  const save = async (
    ctx: ToolContext,
    prepared: PreparedPage,
    prompt: string,
  ): Promise<OpenPage | undefined> => {
    const { id, expiresAt } = prepared;
    const tag = callerTag(ctx);
    const ttl = Math.max(1, expiresAt - Date.now());
    // The mark stays until the keys under the id expire (the answer key a minute past the expiry), so a
    // closed confirmation's keys count against its caller too; the slot, freed by `end`, outlives the wait.
    const heldTtl = ttl + KEPT_PAST_EXPIRY_MS;
    const slot = await claimSlot(ctx, tag, id, heldTtl);
    if (slot === undefined) return undefined;
    const mark = openKey(tag, id);
    try {
      await store.set(mark, '1', heldTtl, ctx.signal);
      // The prompt the client is shown (core redacts secrets in an elicitation's message): the store
      // and the page never hold a secret the model put in an argument either.
      const stored: Stored = {
        tool: ctx.toolName,
        prompt: redactSecretsInText(prompt),
        expiresAt,
        principal: personOf(ctx) ?? null,
      };
      await store.set(pendingKey(id), JSON.stringify(stored), ttl, ctx.signal);
    } catch (error) {
      // Every key (a write that timed out may still land), without the call's signal: it may be what aborted.
      await Promise.all([slot, mark, pendingKey(id)].map((key) => store.delete(key).catch(() => false)));
      throw error;
    }
    return { ...prepared, slot };
  };

  /** A free slot of the caller's maxOpenPerCaller, tried from a random one on (so few are tried); undefined when all are held. */
  const claimSlot = async (
    ctx: ToolContext,
    tag: string,
    id: string,
    ttlMs: number,
  ): Promise<string | undefined> => {
    const first = randomInt(maxOpen);
    for (let tried = 0; tried < maxOpen; tried += 1) {
      const key = slotKey(tag, (first + tried) % maxOpen);
      if (await store.setIfAbsent(key, id, ttlMs, ctx.signal)) return key;
    }
    return undefined;
  };

  /** Closes a confirmation nothing waits for any more; false when the page answered first. */
  const close = (id: string, expiresAt: number): Promise<boolean> =>
    store.setIfAbsent(answerKey(id), CLOSED, Math.max(0, expiresAt - Date.now()) + KEPT_PAST_EXPIRY_MS);

  /**
   * The call no longer waits (answered, dismissed, timed out, cancelled or failed): closes the
   * confirmation and frees the caller's slot. Best effort: the slot's TTL is the backstop. The mark in
   * the caller's scope stays until the keys under the id expire.
   */
  const end = async (page: OpenPage): Promise<void> => {
    await Promise.all([
      close(page.id, page.expiresAt).catch(() => false),
      store.delete(page.slot).catch(() => false),
    ]);
  };

  /**
   * Waits for the page's answer until `expiresAt`, reading the store every pollMs (any replica may
   * serve the page). Throws the call's abort reason, `timeout`, or the store's failure.
   */
  const wait = async (ctx: ToolContext, id: string, expiresAt: number): Promise<PageVerdict> => {
    for (;;) {
      const answer = await store.get(answerKey(id), ctx.signal);
      if (answer === 'approved' || answer === 'declined') return answer;
      const left = expiresAt - Date.now();
      if (left <= 0) {
        // Closed first: an approval that lands now must not count for a call that already gave up.
        if ((await close(id, expiresAt)) === false) continue;
        throw new ToolError('timeout', 'The user did not answer on the confirmation page in time.', {
          hint: 'Nothing was done. Ask the user whether they still want this; if so, call again.',
        });
      }
      try {
        await sleep(Math.min(pollMs, left), undefined, { signal: ctx.signal });
      } catch (error) {
        if (ctx.signal.aborted) throw ctx.signal.reason;
        throw error;
      }
    }
  };

  /** The pending call for the page, only to the person who made it. */
  const pending = async (
    id: string,
    principal: string | undefined,
  ): Promise<UrlConfirmationCall | undefined> => {
    const stored = await read(id);
    if (stored === undefined || !samePerson(stored, principal)) return undefined;
    return { id, tool: stored.tool, prompt: stored.prompt, expiresAt: stored.expiresAt };
  };

  const answer = async (id: string, given: UrlAnswer): Promise<UrlAnswerOutcome> => {
    if (typeof given !== 'object' || given === null || typeof given.approve !== 'boolean') {
      throw new TypeError('confirm.answer: give { approve: boolean, principal }');
    }
    const stored = await read(id);
    if (stored === undefined) return 'unknown';
    if (!samePerson(stored, given.principal)) return 'forbidden';
    const left = stored.expiresAt - Date.now();
    if (left <= 0) return 'unknown';
    const recorded = await store.setIfAbsent(
      answerKey(id),
      given.approve ? 'approved' : 'declined',
      left + KEPT_PAST_EXPIRY_MS,
    );
    if (recorded) return 'recorded';
    return (await store.get(answerKey(id))) === CLOSED ? 'closed' : 'already answered';
  };

  const read = async (id: string): Promise<Stored | undefined> => {
    if (typeof id !== 'string' || !ID.test(id)) return undefined;
    const raw = await store.get(pendingKey(id));
    if (raw === undefined) return undefined;
    const stored = JSON.parse(raw) as Stored;
    return stored.expiresAt > Date.now() ? stored : undefined;
  };

  /**
   * Whether the page can tell who may answer this call. With the default `person`, a token without a
   * subject cannot say: its client id names an app every user of a public client shares, so anyone
   * that app signs in on the page would pass as the caller. `url.person` given: the author decides.
   */
  const knowsPerson = (ctx: ToolContext): boolean => url.person !== undefined || ctx.caller.kind !== 'client';

  return { prepare, save, wait, end, pending, answer, knowsPerson };
}

/** A call without a principal is answered without one: then the page address alone decides (see the README). */
function samePerson(stored: Stored, principal: string | undefined): boolean {
  return stored.principal === null ? principal === undefined : principal === stored.principal;
}

function checkAddress(address: unknown): void {
  let parsed: URL | undefined;
  try {
    parsed = typeof address === 'string' ? new URL(address) : undefined;
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) {
    throw new TypeError('createConfirm: url.build must return an absolute http(s) address');
  }
}

import {
  boundStore,
  callerTag,
  createMemoryStore,
  fail,
  isPassThrough,
  isStoreFullError,
  isToolError,
  type NextFn,
  optInTools,
  resolveToolOptions,
  type ToolContext,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import {
  CONFIRMATION_ARGUMENT,
  CONFIRMATION_META,
  carriedConfirmation,
  coveredArguments,
  issue,
  type MacKey,
  verify,
} from './confirmation.js';
import {
  type ConfirmOptions,
  type ConfirmToolOptions,
  checkAudience,
  checkToolOptions,
  KEPT_PAST_EXPIRY_MS,
  keyPrefix,
  TOOL_DEFAULTS,
} from './options.js';
import { renderPrompt, TWO_STEP_MESSAGE } from './prompt.js';
import {
  createUrlConfirmations,
  type OpenPage,
  type UrlAnswer,
  type UrlAnswerOutcome,
  type UrlConfirmationCall,
} from './url-mode.js';

/** The `_meta` key of a two-step answer: `{ status: 'confirmation_required', confirmation, expiresAt, prompt }`. */
export const CONFIRM_META = 'toolgate/confirm';

/** The hint of a person's refusal; the model must not work around it. */
export const DECLINED_HINT =
  'The user declined. Do not retry or rephrase to get around it; ask the user what they want instead.';

/** The middleware, with `close()` for the app's shutdown. */
export type ConfirmMiddleware = ToolMiddleware & {
  /** Writes pending log summaries and closes the store it created (a store passed in is the app's). */
  close(): Promise<void>;
  /**
   * URL mode, for your confirmation page: the call waiting under `id`, only when `principal` (the
   * person the page signed in) made it; undefined when unknown (another audience's too), expired or
   * someone else's.
   */
  pending(id: string, principal: string | undefined): Promise<UrlConfirmationCall | undefined>;
  /** URL mode, for your confirmation page: records the person's answer (to a call of this audience); the waiting call goes on. */
  answer(id: string, answer: UrlAnswer): Promise<UrlAnswerOutcome>;
};

const ASK_AGAIN =
  'Do not change, reuse or invent a confirmation. Call again without it to ask the user to confirm this exact request.';

/**
 * A person confirms before an enabled tool runs: by elicitation when the client supports it (the concrete
 * effect is shown; decline refuses), else in two steps (the first call answers with a single-use
 * confirmation bound to the call, the person is asked by the model, the second call carries it back).
 */
export function createConfirm(options: ConfirmOptions): ConfirmMiddleware {
  const {
    secret: rawSecret,
    audience: rawAudience,
    store: given,
    storeTimeoutMs = 200,
    tools,
    url,
    ...globals
  } = options ?? ({} as ConfirmOptions);
  const secret = secretBytes(rawSecret);
  const audience = checkAudience(rawAudience, given !== undefined);
  // Which server issued a confirmation is in its MAC and in every key: another server sharing the secret
  // and the store (staging and production) accepts none of this one's confirmations or page answers.
  const macKey: MacKey = { secret, audience };
  const prefix = keyPrefix(audience);
  const resolver = resolveToolOptions<ConfirmToolOptions>(
    'createConfirm',
    TOOL_DEFAULTS,
    { ...globals, tools: optInTools(tools) },
    (resolved, where) => {
      checkToolOptions(resolved, where);
      if (resolved.pageOnly && url === undefined) {
        throw new TypeError(`${where}: pageOnly needs URL mode: createConfirm({ url: { build } })`);
      }
    },
  );
  if (!(Number.isFinite(storeTimeoutMs) && storeTimeoutMs > 0)) {
    throw new RangeError('createConfirm: storeTimeoutMs must be a positive number of milliseconds');
  }
  const store = given ?? createMemoryStore();
  const bounded = boundStore(store, storeTimeoutMs, 'confirm');
  const pages = url === undefined ? undefined : createUrlConfirmations(bounded, url, prefix);

  const decide = (ctx: ToolContext, action: string, digest: string, reason?: string): void => {
    ctx.decisions.push({
      by: 'confirm',
      action,
      ...(reason === undefined ? {} : { reason }),
      detail: { digest },
    });
  };

  /** The store could not answer, or is full: nothing runs (fail closed), logged at most once a minute. */
  const storeFailed = (
    ctx: ToolContext,
    error: unknown,
    operation: string,
    digest: string,
    retry: string,
  ): ToolResult => {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    // A full store is a flood (this caller's, or many callers'), not an outage: too many calls.
    if (isStoreFullError(error)) {
      bounded.failed(
        operation,
        error,
        ctx.logger,
        'confirmations that need a new key are refused rate_limited',
      );
      ctx.decisions.push({
        by: 'confirm',
        action: 'refused',
        reason: 'store full',
        detail: { digest, full: error.reason },
      });
      return fail(
        'rate_limited',
        'The server is keeping track of too many confirmations right now; nothing was done.',
        {
          hint: `Finish or wait for your earlier calls before making new ones, then retry this one ${retry}.`,
          retryable: true,
        },
      );
    }
    bounded.failed(operation, error, ctx.logger, 'confirmations are refused unavailable until it answers');
    decide(ctx, 'refused', digest, 'store unavailable');
    return fail('unavailable', 'The server cannot check this confirmation right now; nothing was done.', {
      hint: `Retry once in a few seconds ${retry}; if it fails again, tell the user the service is unavailable.`,
      retryable: true,
      retryAfterMs: 2000,
    });
  };

  /**
   * Where an issued two-step confirmation is held until it is used, in its caller's scope. Single use is
   * the key's deletion, so a store that forgets (a restart, a flush, a failover to an empty replica, a
   * new process's memory store) forgets the confirmation too: it is refused, never accepted again.
   */
  const issuedKey = (ctx: ToolContext, nonce: string): string =>
    `${prefix}issued:{${callerTag(ctx)}}:${nonce}`;

  /** Takes an issued confirmation; false when it was used already (or the store no longer holds it). Throws when the store cannot answer. */
  const consume = (ctx: ToolContext, nonce: string): Promise<boolean> =>
    bounded.delete(issuedKey(ctx, nonce), ctx.signal);

  const withConfirmation = async (ctx: ToolContext, next: NextFn, token: unknown): Promise<ToolResult> => {
    const verdict =
      typeof token === 'string' ? verify(macKey, ctx, token) : ({ ok: false, reason: 'malformed' } as const);
    if (!verdict.ok) {
      decide(ctx, 'refused', verdict.digest ?? '', verdict.reason);
      return verdict.reason === 'expired'
        ? fail('permission_denied', 'This confirmation has expired.', { hint: ASK_AGAIN })
        : fail(
            'permission_denied',
            'This confirmation does not match this call (other arguments, another caller or another tool).',
            { hint: ASK_AGAIN },
          );
    }
    let fresh: boolean;
    try {
      fresh = await consume(ctx, verdict.nonce);
    } catch (error) {
      // The delete may have been applied with its answer lost (or, on a store whose writes replicas
      // must acknowledge, applied on the primary alone): the retry may then be refused as already used,
      // though nothing ran.
      return storeFailed(
        ctx,
        error,
        'delete',
        verdict.digest,
        'with the same confirmation (if it is then refused as already used, nothing was done either: call without it to ask the user again)',
      );
    }
    if (!fresh) {
      decide(ctx, 'refused', verdict.digest, 'used');
      return fail('permission_denied', 'This confirmation was already used.', {
        hint: 'A confirmation is valid once, and the call that used it may not have finished (it may have been cancelled or failed): check whether the change was made before calling without it to ask the user again.',
      });
    }
    decide(ctx, 'confirmed', verdict.digest);
    return next();
  };

  const required = async (
    ctx: ToolContext,
    opts: ConfirmToolOptions,
    prompt: string,
  ): Promise<ToolResult> => {
    const issued = issue(macKey, ctx, opts.ttlMs);
    try {
      // Held a minute past the expiry: the store keeps time by its own clock, replicas by theirs.
      await bounded.set(issuedKey(ctx, issued.nonce), '1', opts.ttlMs + KEPT_PAST_EXPIRY_MS, ctx.signal);
    } catch (error) {
      return storeFailed(ctx, error, 'set', issued.digest, 'without a confirmation');
    }
    decide(ctx, 'required', issued.digest);
    const expiresAt = new Date(issued.expiresAt).toISOString();
    const declared = ctx.tool?.inputSchema.shape[CONFIRMATION_ARGUMENT] !== undefined;
    const carry = declared
      ? `the argument ${CONFIRMATION_ARGUMENT}="${issued.token}"`
      : `"${CONFIRMATION_META}": "${issued.token}" in the request _meta`;
    const result = fail('confirmation_required', `${TWO_STEP_MESSAGE}${prompt}`, {
      hint: `Show the user exactly this request and ask whether to proceed. Only if they agree, call ${ctx.toolName} again with the same arguments and ${carry} (valid once, until ${expiresAt}). Never confirm on the user's behalf.`,
    });
    result._meta = {
      ...result._meta,
      [CONFIRM_META]: { status: 'confirmation_required', confirmation: issued.token, expiresAt, prompt },
    };
    return result;
  };

  // Not async itself: a call of a tool that did not opt in (nearly all) gets next()'s promise back
  // with no promise, await or closure of this middleware's own.
  const middleware = ((ctx, next) => {
    if (isPassThrough(ctx)) return next();
    const opts = resolver.forTool(ctx.toolName);
    if (opts === undefined || !opts.enabled) return next();
    return confirmedCall(ctx, next, opts);
  }) as ConfirmMiddleware;

  const confirmedCall = async (
    ctx: ToolContext,
    next: NextFn,
    opts: Readonly<ConfirmToolOptions>,
  ): Promise<ToolResult> => {
    const token = carriedConfirmation(ctx);
    const pageable = pages !== undefined && ctx.server.supports('elicitation.url');
    // A caller the page cannot tell from other users of its client confirms as a client without the
    // page would (a pageOnly tool is refused).
    const page = pageable && pages.knowsPerson(ctx);
    if (opts.pageOnly && (token !== undefined || !page)) {
      return pageRequired(ctx, token !== undefined ? 'carried' : pageable ? 'no person' : 'no page');
    }
    if (token !== undefined) return withConfirmation(ctx, next, token);
    const tool = ctx.tool ?? { name: ctx.toolName, title: undefined };
    const prompt = renderPrompt(tool, coveredArguments(ctx.args), opts.describe, opts.maxPromptChars);
    if (page) return byPage(ctx, next, opts, prompt);
    if (!ctx.server.supports('elicitation.form')) return required(ctx, opts, prompt);
    // The digest of what is shown, for audit: the same HMAC a two-step confirmation would carry.
    const shown = issue(macKey, ctx, opts.elicitTimeoutMs);
    let answer: Awaited<ReturnType<ToolContext['server']['elicit']>>;
    try {
      answer = await ctx.server.elicit(
        { mode: 'form', message: prompt, requestedSchema: { type: 'object', properties: {} } },
        { timeoutMs: opts.elicitTimeoutMs },
      );
    } catch (error) {
      // The client lost the ability meanwhile (a transport that cannot carry it): two steps instead.
      if (isToolError(error) && error.code === 'unavailable') return required(ctx, opts, prompt);
      decide(ctx, 'refused', shown.digest, isToolError(error) ? error.code : 'elicitation failed');
      throw error;
    }
    if (answer.action !== 'accept') return declined(ctx, shown.digest, answer.action);
    // The person may have answered after the call was cancelled: never run a cancelled call.
    ctx.signal.throwIfAborted();
    decide(ctx, 'confirmed', shown.digest);
    return next();
  };
  /**
   * URL mode: the client sends the person to the server's page (`url.build`), where they sign in and
   * answer; the call waits for that answer in the store, so any replica may serve the page.
   */
  const byPage = async (
    ctx: ToolContext,
    next: NextFn,
    opts: Readonly<ConfirmToolOptions>,
    prompt: string,
  ): Promise<ToolResult> => {
    const urls = pages!;
    const shown = issue(macKey, ctx, opts.elicitTimeoutMs);
    const prepared = urls.prepare(ctx, opts.elicitTimeoutMs);
    let opened: OpenPage | undefined;
    try {
      opened = await urls.save(ctx, prepared, prompt);
    } catch (error) {
      return storeFailed(ctx, error, 'set', shown.digest, 'without a confirmation');
    }
    if (opened === undefined) return tooManyOpen(ctx, shown.digest);
    let verdict: 'approved' | 'declined';
    try {
      let answer: Awaited<ReturnType<ToolContext['server']['elicit']>>;
      try {
        answer = await ctx.server.elicit(
          { mode: 'url', message: prompt, url: opened.url, elicitationId: opened.id },
          { timeoutMs: Math.max(1, opened.expiresAt - Date.now()) },
        );
      } catch (error) {
        // The client lost the ability meanwhile: two steps, unless only the page counts.
        if (isToolError(error) && error.code === 'unavailable') {
          return opts.pageOnly ? pageRequired(ctx, 'no page') : required(ctx, opts, prompt);
        }
        decide(ctx, 'refused', shown.digest, isToolError(error) ? error.code : 'elicitation failed');
        throw error;
      }
      if (answer.action !== 'accept') return declined(ctx, shown.digest, answer.action);
      try {
        verdict = await urls.wait(ctx, opened.id, opened.expiresAt);
      } catch (error) {
        if (ctx.signal.aborted) throw ctx.signal.reason;
        if (isToolError(error)) {
          decide(ctx, 'refused', shown.digest, error.code);
          throw error;
        }
        return storeFailed(ctx, error, 'get', shown.digest, 'without a confirmation');
      }
    } finally {
      // Whatever ended the wait (dismissed in the client, cancelled, failed), the page must not
      // record an approval nothing waits for (a no-op once the page answered); the slot is free again.
      await urls.end(opened);
    }
    await ctx.server.elicitationComplete(opened.id).catch((error: unknown) => {
      ctx.logger.warn({ err: error }, 'confirm: could not tell the client the confirmation page is done');
    });
    if (verdict === 'declined') return declined(ctx, shown.digest, 'page');
    ctx.signal.throwIfAborted();
    decide(ctx, 'confirmed', shown.digest);
    return next();
  };

  /** The caller already has `url.maxOpenPerCaller` confirmations waiting on the page: nothing stored, asked or run. */
  const tooManyOpen = (ctx: ToolContext, digest: string): ToolResult => {
    decide(ctx, 'refused', digest, 'too many open');
    return fail(
      'rate_limited',
      'Too many of your calls are waiting for the user on the confirmation page; nothing was done.',
      {
        hint: 'Wait until the user has answered or dismissed the confirmation pages already open, then retry this call.',
        retryable: true,
      },
    );
  };

  /**
   * A `pageOnly` tool the person cannot confirm on the page: this client cannot open it, or the call
   * carries a two-step confirmation (which only the model vouches for). Nothing is asked, nothing runs.
   */
  const pageRequired = (ctx: ToolContext, why: 'carried' | 'no person' | 'no page'): ToolResult => {
    decide(ctx, 'refused', '', why === 'carried' ? 'page only' : why);
    if (why === 'carried') {
      return fail('permission_denied', 'This tool is confirmed on the confirmation page only.', {
        hint: `Call ${ctx.toolName} again without a confirmation: the user will be sent to the confirmation page.`,
      });
    }
    if (why === 'no person') {
      return fail(
        'permission_denied',
        'This action needs the user to confirm on a confirmation page, and this sign-in does not say who the user is.',
        {
          hint: 'Nothing was done. Tell the user this needs them signed in with an account of their own; do not try another way.',
        },
      );
    }
    return fail(
      'unavailable',
      'This action needs the user to confirm on a confirmation page, which this client cannot open.',
      {
        hint: 'Nothing was done. Tell the user this needs an MCP client that supports URL elicitation; do not try another way.',
        retryable: false,
      },
    );
  };

  const declined = (ctx: ToolContext, digest: string, reason: string): ToolResult => {
    decide(ctx, 'declined', digest, reason);
    return fail(
      'permission_denied',
      reason === 'cancel'
        ? 'The user dismissed the confirmation without accepting.'
        : 'The user declined this request.',
      { hint: DECLINED_HINT },
    );
  };

  const withoutUrlMode = (): never => {
    throw new Error(
      'confirm: URL mode is off; pass createConfirm({ url: { build } }) to serve a confirmation page',
    );
  };
  middleware.pending = (id, principal) => (pages ?? withoutUrlMode()).pending(id, principal);
  middleware.answer = (id, answer) => (pages ?? withoutUrlMode()).answer(id, answer);
  middleware.close = async () => {
    bounded.flush();
    if (given === undefined) await store.close?.();
  };
  return middleware;
}

function secretBytes(secret: unknown): Uint8Array {
  const bytes =
    typeof secret === 'string'
      ? Buffer.from(secret, 'utf8')
      : secret instanceof Uint8Array
        ? Buffer.from(secret)
        : undefined;
  if (bytes === undefined || bytes.byteLength < 32) {
    throw new TypeError(
      'createConfirm: secret is required, at least 32 bytes (random, from a secret store, the same on every replica)',
    );
  }
  return bytes;
}

import {
  type CreateMessageRequestParams,
  type CreateMessageResult,
  CreateMessageResultSchema,
  type ElicitRequestFormParams,
  type ElicitRequestURLParams,
  type ElicitResult,
  ElicitResultSchema,
  type LoggingLevel,
} from '@modelcontextprotocol/sdk/types.js';
import { ToolError } from './errors.js';
import { mapStrings } from './map-strings.js';
import {
  createSecretKeyMatcher,
  createSecretRedactor,
  REDACTED,
  redactSecretsInText,
} from './redact-secrets.js';

/** What a call may ask of the client beyond its answer. */
export type ClientFeature = 'elicitation.form' | 'elicitation.url' | 'sampling';

export interface ClientRequestOptions {
  /** Give up after this long (the call's own signal also aborts it). @default 120000 for elicitation, 60000 for sampling */
  timeoutMs?: number;
}

/**
 * Server access from a call: progress, log messages and requests to the client, each bound to the call
 * (its JSON-RPC id, so Streamable HTTP routes them on the call's own stream, and its abort signal).
 */
export interface ServerAccess {
  /**
   * Sends `notifications/progress` when the request carried a progress token; resolves false (and sends
   * nothing) when it did not. Secrets in `message` are redacted (core's secret patterns), then the
   * global middleware's `scrubText` hooks apply, as to a failure's strings.
   */
  progress(progress: number, total?: number, message?: string): Promise<boolean>;
  /**
   * Sends `notifications/message` unless the client set a higher level with `logging/setLevel`. Resolves
   * false when the message was filtered out. The client (and through it the model) reads `data`: secrets
   * in it are redacted as the boundary redacts a failure's (values under secret-named keys, secret
   * patterns in every string and key, `loggerName` too), then the global middleware's `scrubText` hooks
   * apply (with @toolgate/redact-errors: paths, SQL, hosts, encoded secrets).
   */
  log(level: LoggingLevel, data: unknown, loggerName?: string): Promise<boolean>;
  /** Whether this client and transport can carry `feature` now (checked before asking). */
  supports(feature: ClientFeature): boolean;
  /**
   * Asks the person through the client (form or URL mode). Secrets in the strings of `params` are
   * redacted (core's secret patterns, and string values under secret-named keys; not the page's `url`,
   * `elicitationId` or `mode`); the `scrubText` hooks do not apply, as to a confirmation prompt, which
   * renders the model's own arguments. Throws a ToolError `unavailable` at once when
   * the client or the transport cannot carry it, or when the app withdrew the server's requests
   * (`withdrawClientRequests`: nobody can answer any more), and `timeout` when the person took too long.
   */
  elicit(
    params: ElicitRequestFormParams | ElicitRequestURLParams,
    options?: ClientRequestOptions,
  ): Promise<ElicitResult>;
  /**
   * Tells the client that the out-of-band interaction a URL elicitation started (`elicitationId`) is
   * over (`notifications/elicitation/complete`), so it can close its prompt and go on. Resolves false
   * (and sends nothing) when the client cannot carry URL elicitation.
   */
  elicitationComplete(elicitationId: string): Promise<boolean>;
  /**
   * Asks the client's model for a completion (`sampling/createMessage`); same errors as `elicit`. The
   * model reads every string of `params`: secrets are redacted as in `elicit`, then the `scrubText`
   * hooks apply, as to `log`. Media payloads (`data`, `blob`), `mimeType`, `type` and `role` are sent as
   * given.
   */
  sample(params: CreateMessageRequestParams, options?: ClientRequestOptions): Promise<CreateMessageResult>;
  /**
   * Closes this call's SSE stream so the client reconnects and resumes (polling during a long call);
   * false where the transport cannot (no event store, not Streamable HTTP).
   */
  closeStream(): boolean;
}

/**
 * A server's requests to the client that are waiting for an answer, so that the app can withdraw them
 * when nobody can answer any more (`withdrawClientRequests`: the client closed stdin).
 */
export interface PendingClientRequests {
  /** Set once withdrawn: every later request fails at once. */
  withdrawn: boolean;
  readonly pending: Set<AbortController>;
}

export function createPendingClientRequests(): PendingClientRequests {
  return { withdrawn: false, pending: new Set() };
}

/** Aborts every pending request (each call sees `withdrawnError`); returns how many there were. */
export function withdrawPending(requests: PendingClientRequests): number {
  requests.withdrawn = true;
  const count = requests.pending.size;
  for (const controller of [...requests.pending]) controller.abort();
  requests.pending.clear();
  return count;
}

function withdrawnError(cause?: unknown): ToolError {
  return new ToolError('unavailable', 'The client can no longer answer: its session is ending.', {
    hint: 'Do not retry; the session with the user is over.',
    retryable: false,
    cause,
  });
}

/** The pieces of the SDK's per-request `extra` and server state that server access needs. */
export interface ServerAccessSource {
  readonly signal: () => AbortSignal;
  /** The server's pending requests to the client (withdrawn by the app at the end of a session). */
  readonly pendingRequests?: PendingClientRequests;
  readonly progressToken: string | number | undefined;
  readonly sendNotification: (notification: {
    method: string;
    params?: Record<string, unknown>;
  }) => Promise<void>;
  readonly sendRequest: <T>(
    request: { method: string; params?: Record<string, unknown> },
    schema: unknown,
    options: { signal: AbortSignal; timeout: number },
  ) => Promise<T>;
  readonly clientCapabilities: () =>
    | { elicitation?: { form?: object; url?: object }; sampling?: object }
    | undefined;
  /** False when the transport cannot carry a server-to-client request for this call. */
  readonly canRequest: boolean;
  /** The level the client set for this session, when it did. */
  readonly logLevel: () => LoggingLevel | undefined;
  /** The transport's per-request stream close, when it has one. */
  readonly closeStream?: (() => void) | undefined;
  /**
   * Applied after core's secret patterns to every string of a progress message, a log message and a
   * sampling request: the global middleware's `scrubText` hooks, bound to the call. @default none
   */
  readonly scrubText?: ((text: string) => string) | undefined;
  /**
   * Applied after core's secret redaction to a log message's `data`: for each global middleware in
   * order, its `scrubValue` hook on the whole value, else its `scrubText` on every string and key.
   * @default `scrubText` on every string and key
   */
  readonly scrubData?: ((data: unknown) => unknown) | undefined;
}

const LEVEL_ORDER: readonly LoggingLevel[] = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
];

// What the client reads of a log message's data: the boundary's redaction of secrets.
const redactForClient = createSecretRedactor();
const secretsOnly = (text: string): string => redactSecretsInText(text);
const isSecretKey = createSecretKeyMatcher();

// Fields of a request to the client that are sent as given: discriminants, media types and base64
// payloads (a pattern could corrupt them; they hold nothing a reader sees as text), and a URL
// elicitation's own page and id.
const SENT_AS_GIVEN = new Set(['type', 'role', 'mode', 'mimeType', 'data', 'blob', 'url', 'elicitationId']);

/**
 * A request's params with secrets redacted in every string: `text` (secret patterns, maybe then the
 * scrub hooks), and a string under a secret-named key (`{ password: 'x' }`) whole. Only strings: a form field or tool parameter
 * named `password` (an object) keeps its schema, and object keys stay (they name fields).
 */
function redactRequest(params: object, text: (text: string) => string): Record<string, unknown> {
  return mapStrings(params, text, {
    replaceEntry: (key, value) => {
      if (typeof value !== 'string') return undefined;
      if (SENT_AS_GIVEN.has(key)) return value;
      return isSecretKey(key) && value !== '' ? REDACTED : undefined;
    },
  }) as Record<string, unknown>;
}

const FEATURE_WORDS: Record<ClientFeature, string> = {
  'elicitation.form': 'ask the user a question (form elicitation)',
  'elicitation.url': 'send the user to a page (URL elicitation)',
  sampling: 'run its model for the server (sampling)',
};

export function createServerAccess(source: ServerAccessSource): ServerAccess {
  const hooks = source.scrubText;
  const textForClient =
    hooks === undefined ? secretsOnly : (text: string) => hooks(redactSecretsInText(text));
  const supports = (feature: ClientFeature): boolean => {
    if (!source.canRequest) return false;
    const caps = source.clientCapabilities();
    if (feature === 'sampling') return caps?.sampling !== undefined;
    const elicitation = caps?.elicitation;
    if (elicitation === undefined) return false;
    // An empty `elicitation: {}` declares form support (the spec's backwards-compatible reading).
    if (feature === 'elicitation.url') return elicitation.url !== undefined;
    return elicitation.form !== undefined || elicitation.url === undefined;
  };
  const ask = async <T>(
    feature: ClientFeature,
    method: string,
    params: Record<string, unknown>,
    schema: unknown,
    timeoutMs: number,
  ): Promise<T> => {
    if (!supports(feature)) {
      const why = source.canRequest
        ? 'this client does not support it'
        : 'this connection cannot carry requests to the client';
      throw new ToolError('unavailable', `The server cannot ${FEATURE_WORDS[feature]}: ${why}.`, {
        hint: 'Do not retry this call in the same way; tell the user this needs a client that supports it.',
        retryable: false,
      });
    }
    const requests = source.pendingRequests;
    if (requests?.withdrawn) throw withdrawnError();
    const own = requests === undefined ? undefined : new AbortController();
    if (own !== undefined) requests!.pending.add(own);
    try {
      return await source.sendRequest<T>({ method, params }, schema, {
        signal: own === undefined ? source.signal() : AbortSignal.any([source.signal(), own.signal]),
        timeout: timeoutMs,
      });
    } catch (error) {
      if (own?.signal.aborted && !source.signal().aborted) throw withdrawnError(error);
      if (isRequestTimeout(error)) {
        throw new ToolError('timeout', `No answer from the client within ${timeoutMs} ms.`, {
          hint: 'The user did not answer in time. Ask them whether to try again before calling again.',
          retryable: false,
          cause: error,
        });
      }
      throw error;
    } finally {
      if (own !== undefined) requests!.pending.delete(own);
    }
  };
  return {
    async progress(progress, total, message) {
      if (source.progressToken === undefined) return false;
      const params: Record<string, unknown> = { progressToken: source.progressToken, progress };
      if (total !== undefined) params.total = total;
      if (message !== undefined) params.message = textForClient(message);
      await source.sendNotification({ method: 'notifications/progress', params });
      return true;
    },
    async log(level, data, loggerName) {
      const threshold = source.logLevel();
      if (threshold !== undefined && LEVEL_ORDER.indexOf(level) < LEVEL_ORDER.indexOf(threshold))
        return false;
      const redacted = redactForClient(data);
      const scrubData = source.scrubData;
      const params: Record<string, unknown> = {
        level,
        data:
          scrubData !== undefined
            ? scrubData(redacted)
            : hooks === undefined
              ? redacted
              : mapStrings(redacted, hooks, { mapKey: hooks }),
      };
      if (loggerName !== undefined) params.logger = textForClient(loggerName);
      await source.sendNotification({ method: 'notifications/message', params });
      return true;
    },
    supports,
    closeStream() {
      if (source.closeStream === undefined) return false;
      source.closeStream();
      return true;
    },
    elicit(params, options = {}) {
      const mode = params.mode === 'url' ? 'url' : 'form';
      const sent = redactRequest(mode === 'form' ? { ...params, mode: 'form' } : params, secretsOnly);
      return ask<ElicitResult>(
        mode === 'url' ? 'elicitation.url' : 'elicitation.form',
        'elicitation/create',
        sent,
        ElicitResultSchema,
        options.timeoutMs ?? 120_000,
      );
    },
    async elicitationComplete(elicitationId) {
      if (!supports('elicitation.url')) return false;
      await source.sendNotification({
        method: 'notifications/elicitation/complete',
        params: { elicitationId },
      });
      return true;
    },
    sample(params, options = {}) {
      return ask<CreateMessageResult>(
        'sampling',
        'sampling/createMessage',
        redactRequest(params, textForClient),
        CreateMessageResultSchema,
        options.timeoutMs ?? 60_000,
      );
    },
  };
}

// The SDK rejects a timed-out request with McpError code -32001 (RequestTimeout).
function isRequestTimeout(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === -32001;
}

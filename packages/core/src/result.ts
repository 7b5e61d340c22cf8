import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import { ERROR_CODE_DEFAULTS, type ErrorCode, isErrorCode } from './codes.js';
import type { ToolError } from './errors.js';

/** What a tool call returns: the SDK's CallToolResult. */
export type ToolResult = CallToolResult;

/** The `_meta` key under which a failure's envelope is published for machines. */
export const ERROR_META_KEY = 'toolgate/error';

/** The failure envelope: the JSON text of `content` and `_meta["toolgate/error"]`. */
export interface ErrorEnvelope {
  ok: false;
  error: ErrorCode;
  message: string;
  hint: string;
  retryable: boolean;
  retryAfterMs?: number;
  incidentId?: string;
  /** For `invalid_argument`: each refused field and what it expects. */
  fields?: ArgumentIssue[];
}

export interface ArgumentIssue {
  /** Dotted path of the argument, or `(arguments)` for the object itself. */
  path: string;
  /** What the argument expects, in words the model can act on. */
  expected: string;
}

export interface OkOptions {
  /** How many items exist in all, when the list in `data` was cut. */
  total?: number;
  /** A note for the model, e.g. that a list was cut. */
  note?: string;
  /**
   * Content blocks sent after the JSON text (images, audio, resource links, embedded resources), for
   * clients and models that read them. @default []
   */
  content?: readonly ContentBlock[];
}

/** Keys of a success's `structuredContent` that the envelope owns; `ok()` refuses them in `data`. */
const RESERVED_DATA_KEYS = ['ok', 'total', 'note'] as const;

export interface FailOptions {
  hint?: string;
  retryable?: boolean;
  retryAfterMs?: number;
  incidentId?: string;
  fields?: ArgumentIssue[];
}

// What `ok()` built, recorded on the result itself (symbol keys: never serialised, never validated): the
// text it wrote and the data object it wrote it from. A WeakSet entry per call measured over half a
// microsecond; these are two slots in the object literal. A copy (`{ ...result }`) carries them along,
// so the check compares them with what the result holds now.
const MIRROR_TEXT = Symbol('toolgate.ok.text');
const MIRROR_DATA = Symbol('toolgate.ok.data');

interface OkBuilt {
  [MIRROR_TEXT]?: string;
  [MIRROR_DATA]?: unknown;
}

/**
 * Whether `result`'s first content block is exactly `JSON.stringify(structuredContent)` as `ok()` wrote
 * it: the same data object, the same text. Then a store may keep the text alone and parse it back
 * (repeat-guard does). Results built by hand, or copied with other content or data, answer false.
 * Do not mutate an `ok()` result in place.
 */
export function mirrorsStructuredContent(result: ToolResult): boolean {
  const mark = result as ToolResult & OkBuilt;
  const text = mark[MIRROR_TEXT];
  if (text === undefined || mark[MIRROR_DATA] !== result.structuredContent) return false;
  const first = result.content[0];
  return first?.type === 'text' && first.text === text;
}

/**
 * A success: `structuredContent` is `{ ok: true, ...data }` (plus `total` and `note` when given) and
 * `content` mirrors it as JSON text for clients that only read text.
 */
export function ok(data: Record<string, unknown> = {}, options: OkOptions = {}): ToolResult {
  for (const key of RESERVED_DATA_KEYS) {
    if (Object.hasOwn(data, key)) {
      throw new TypeError(
        `ok(): data may not carry "${key}" (the envelope owns it; use options.${key === 'ok' ? 'note' : key} or fail())`,
      );
    }
  }
  const structured: Record<string, unknown> = { ok: true, ...data };
  if (options.total !== undefined) structured.total = options.total;
  if (options.note !== undefined) structured.note = options.note;
  const json = JSON.stringify(structured);
  const text: ContentBlock = { type: 'text', text: json };
  const result: ToolResult & OkBuilt = {
    content: options.content === undefined ? [text] : [text, ...options.content],
    structuredContent: structured,
    [MIRROR_TEXT]: json,
    [MIRROR_DATA]: structured,
  };
  return result;
}

/**
 * A failure: `isError`, the envelope as JSON text in `content` (what clients hand the model) and in
 * `_meta["toolgate/error"]`. Never `structuredContent`: the SDK client validates it against the
 * tool's output schema even on errors.
 */
export function fail(code: ErrorCode, message: string, options: FailOptions = {}): ToolResult {
  const defaults = ERROR_CODE_DEFAULTS[code];
  const envelope: ErrorEnvelope = {
    ok: false,
    error: code,
    message,
    hint: options.hint ?? defaults.hint,
    retryable: options.retryable ?? defaults.retryable,
  };
  if (options.retryAfterMs !== undefined) envelope.retryAfterMs = options.retryAfterMs;
  if (options.incidentId !== undefined) envelope.incidentId = options.incidentId;
  if (options.fields !== undefined) envelope.fields = options.fields;
  return resultFromEnvelope(envelope);
}

/** Builds the failure result for an envelope (used after a middleware rewrote one). */
export function resultFromEnvelope(envelope: ErrorEnvelope): ToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify(envelope) }],
    _meta: { [ERROR_META_KEY]: envelope },
  };
}

/** The failure result a ToolError stands for. */
export function toolErrorResult(error: ToolError, incidentId?: string): ToolResult {
  const options: FailOptions = { hint: error.hint, retryable: error.retryable };
  if (error.retryAfterMs !== undefined) options.retryAfterMs = error.retryAfterMs;
  if (error.fields !== undefined) options.fields = error.fields;
  if (incidentId !== undefined) options.incidentId = incidentId;
  return fail(error.code, error.message, options);
}

/**
 * The envelope of a failure result, or undefined for a success. A failure built without `fail()`
 * (a raw `isError` result) reads as `internal`.
 */
export function errorOf(result: ToolResult): ErrorEnvelope | undefined {
  if (result.isError !== true) return undefined;
  const meta = result._meta?.[ERROR_META_KEY] as Partial<ErrorEnvelope> | undefined;
  if (meta && isErrorCode(meta.error)) return meta as ErrorEnvelope;
  const firstText = result.content.find((part) => part.type === 'text');
  return {
    ok: false,
    error: 'internal',
    message: firstText?.type === 'text' ? firstText.text : 'Tool failed',
    hint: ERROR_CODE_DEFAULTS.internal.hint,
    retryable: false,
  };
}

/** `ok`, or the error code of a failure: the one word audit, metrics and breakers key on. */
export function outcomeOf(result: ToolResult): 'ok' | ErrorCode {
  return errorOf(result)?.error ?? 'ok';
}

/** True when a value looks like a tool result (has a `content` array). */
export function isToolResult(value: unknown): value is ToolResult {
  return (
    typeof value === 'object' && value !== null && Array.isArray((value as { content?: unknown }).content)
  );
}

import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { RequestId, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type * as z from 'zod';
import type { CallerIdentity } from './identity.js';
import type { ArgumentIssue, ToolResult } from './result.js';
import type { ServerAccess } from './server-access.js';

/** A tool's input: a zod shape (`{ q: z.string() }`) or a zod object. */
export type InputSchema = z.ZodRawShape | z.ZodObject;

/** The validated arguments an input schema describes. */
export type InferArgs<S extends InputSchema> = S extends z.ZodObject
  ? z.output<S>
  : S extends z.ZodRawShape
    ? z.output<z.ZodObject<S>>
    : never;

/** Where a tool call came from: what the transport and the SDK know about the request. */
export interface ToolRequest {
  /** The JSON-RPC request id. */
  readonly id: RequestId;
  /** The transport session, when the transport has one (Streamable HTTP with sessions). */
  readonly sessionId: string | undefined;
  /** The verified bearer token's info, when the server runs with auth. */
  readonly authInfo: AuthInfo | undefined;
  /** `params._meta` of the request (progress token, `traceparent`, ...). */
  readonly meta: Readonly<Record<string, unknown>> | undefined;
  /** HTTP headers of the request, when it came over HTTP. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>> | undefined;
  /**
   * True when the call came over a transport local to whoever started the server: the SDK's stdio or
   * in-memory transport, or one `registerTools`' `localTransport` accepts. Decided from the transport's
   * class once per connection, never from what a request carries (a remote transport may pass no
   * headers). Core's identity rule names an unauthenticated local caller `local`.
   */
  readonly local: boolean;
  /** Aborted when the client cancels or the connection closes. */
  readonly signal: AbortSignal;
}

/** A fact a policy records about a call: who decided what. Audit and tracing record these. */
export interface PolicyDecision {
  /** The deciding package or middleware, e.g. `repeat-guard`. */
  by: string;
  /** What it did, e.g. `short-circuit`, `open`, `allow`. */
  action: string;
  /** Why, in a few words, for the log (never shown to the model by core). */
  reason?: string;
  /** Small, serialisable details. */
  detail?: Record<string, unknown>;
}

/**
 * Per-call state middleware leave for each other. Packages add their own typed members by
 * declaration merging:
 *
 * ```ts
 * declare module '@toolgate/core' {
 *   interface ToolCallState { mySpan?: Span }
 * }
 * ```
 */
export interface ToolCallState {
  /** The active trace, set by tracing middleware (@toolgate/otel) for audit records and logs. */
  trace?: { traceId: string; spanId: string };
}

/**
 * The verdict of argument validation, made before the chain runs. `error` is set when validation
 * (a zod transform or refine) or a tool's `bind` threw: the innermost step rethrows it inside the chain,
 * so it is audited, traced and redacted like any handler throw.
 */
export type ArgumentVerdict =
  | { readonly ok: true }
  | { readonly ok: false; readonly issues: ArgumentIssue[]; readonly error?: unknown };

/** A logger with pino's call shape; core's default writes JSON lines to stderr. */
export interface Logger {
  error(fields: Record<string, unknown>, message?: string): void;
  warn(fields: Record<string, unknown>, message?: string): void;
  info(fields: Record<string, unknown>, message?: string): void;
  debug(fields: Record<string, unknown>, message?: string): void;
}

/** Everything a policy needs to know about one tool call. */
export interface ToolContext<Args = Record<string, unknown>> {
  /** The tool name the client asked for (also for unknown tools). */
  readonly toolName: string;
  /** The tool's definition; undefined when the client named a tool that does not exist. */
  readonly tool: ToolDefinition | undefined;
  /**
   * The validated arguments. When `validation.ok` is false these are the raw arguments the client
   * sent, and the chain's innermost step answers `invalid_argument` instead of the handler.
   */
  readonly args: Args;
  /** The arguments exactly as the client sent them. */
  readonly rawArgs: Readonly<Record<string, unknown>>;
  /** Whether the arguments passed the input schema, and if not, why. */
  readonly validation: ArgumentVerdict;
  readonly request: ToolRequest;
  /** Who is calling, derived once per call from what the transport verified (see `identifyCaller`). */
  readonly caller: CallerIdentity;
  /**
   * Values the tool binds from the caller rather than from the model (a customer id from the token's
   * claims), from the tool's `bind`. Every key derived from a call includes them (see `callKey`).
   */
  readonly bindings: Readonly<Record<string, unknown>>;
  /** Progress, log messages and requests to the client (elicitation, sampling), bound to this call. */
  readonly server: ServerAccess;
  /**
   * The call's abort signal; starts as `request.signal`. A middleware that sets a deadline (a breaker
   * timeout) replaces it with one that also follows the previous signal (`AbortSignal.any`), and the
   * handler sees the replacement.
   */
  signal: AbortSignal;
  /** Wall-clock start (ms since the epoch). */
  readonly startedAt: number;
  /** Monotonic start (`performance.now()`), for durations. */
  readonly startTime: number;
  /** Set by whoever first needs one (redact-errors, core's last-resort guard); shown to the model. */
  incidentId: string | undefined;
  /** Policy decisions of this call, in the order they were made. */
  readonly decisions: PolicyDecision[];
  /** Typed per-call state shared between middleware (see `ToolCallState`). */
  readonly state: ToolCallState;
  /** The server's logger (stderr by default; never stdout). */
  readonly logger: Logger;
}

/** What the next layer of the onion returns. */
export type NextFn = () => Promise<ToolResult>;

/**
 * A middleware: act before `next()`, after it, or answer without calling it. Calling `next()` twice
 * throws. Global middleware may also carry two hooks core consults:
 * - `canSee(tool, caller, request)`: false hides the tool from this caller in `tools/list`, and a call to
 *   it is answered exactly like a call to an unknown tool (decided before argument validation);
 * - `scrubText(text, ctx)`: applied by core's model-facing boundary to every string of every failure;
 * - `scrubValue(value, ctx)`: applied to the structured `data` of a log message a call sends the client
 *   (`ctx.server.log`), whole, so that keys and non-string values count (a `port` number, a pg error's
 *   `table`); a middleware without it has `scrubText` applied to each string and key of that data.
 */
export interface ToolMiddleware {
  (ctx: ToolContext, next: NextFn): Promise<ToolResult>;
  canSee?: (tool: ToolDefinition, caller: CallerIdentity, request: ToolRequest) => boolean;
  scrubText?: (text: string, ctx: ToolContext) => string;
  scrubValue?: (value: unknown, ctx: ToolContext) => unknown;
}

/** A tool's handler: validated arguments in, a result (`ok()` / `fail()`) out, or a thrown ToolError. */
export type ToolHandler<Args> = (args: Args, ctx: ToolContext<Args>) => Promise<ToolResult> | ToolResult;

/** What a server author writes to define a tool. */
export interface ToolSpec<S extends InputSchema, O extends InputSchema | undefined = undefined> {
  /** Unique, `snake_case` action name, e.g. `search_orders`. */
  name: string;
  title?: string;
  /** When to use the tool, and when not. The model reads this to choose. */
  description: string;
  /** The arguments: a zod shape or object. Unknown arguments are refused. */
  input: S;
  /** The `data` of a success; published extended with `ok`, `total` and `note`. */
  output?: O;
  annotations?: ToolAnnotations;
  /** This tool's own middleware, run inside the server's global middleware. */
  middleware?: ToolMiddleware[];
  /** Extra `_meta` published with the tool in `tools/list`. */
  meta?: Record<string, unknown>;
  /**
   * Values bound from the caller, not the model (e.g. `{ customerId }` from the token's claims), computed
   * before the chain runs and recorded on `ctx.bindings`. Throw a ToolError (`permission_denied`) when a
   * required claim is missing.
   */
  bind?: BindCaller;
  handler: ToolHandler<InferArgs<S>>;
}

/** A defined tool, ready for `registerTools`. */
export interface ToolDefinition<Args = Record<string, unknown>> {
  readonly name: string;
  readonly title: string | undefined;
  readonly description: string;
  /** The strict input object the arguments are validated against. */
  readonly inputSchema: z.ZodObject;
  /** The published output schema (declared output plus `ok`, `total`, `note`), when declared. */
  readonly outputSchema: z.ZodObject | undefined;
  readonly annotations: ToolAnnotations | undefined;
  readonly middleware: readonly ToolMiddleware[];
  readonly meta: Record<string, unknown> | undefined;
  readonly bind: BindCaller | undefined;
  // Method syntax on purpose: a tool with narrower args still fits a list of tools.
  handler(args: Args, ctx: ToolContext<Args>): Promise<ToolResult> | ToolResult;
}

/** A tool's `bind`: the values a call takes from its caller rather than from the model. */
export type BindCaller = (
  request: ToolRequest,
  caller: CallerIdentity,
) => Readonly<Record<string, unknown>> | Promise<Readonly<Record<string, unknown>>>;

import type { MeterProvider, Span, TextMapPropagator, TracerProvider } from '@opentelemetry/api';
import type { Logger, PerToolOptions, RedactSecretsOptions, ToolContext, ToolResult } from '@toolgate/core';

/**
 * Called with the tool span just before it ends, for recorded spans only: add attributes or events of
 * your own. `result` is undefined when the chain threw. A hook that throws (or rejects) is logged and
 * ignored; it can never break the call.
 */
export type OnSpanHook = (span: Span, ctx: ToolContext, result: ToolResult | undefined) => void;

/** What a tool may override (`tools: { name: { ... } }`), or `false` to opt out of tracing altogether. */
export interface OtelRules {
  /** Record the call's arguments (secrets redacted) as `gen_ai.tool.call.arguments`. @default false */
  recordArguments: boolean;
  /** Record the call's result (secrets redacted) as `gen_ai.tool.call.result`. @default false */
  recordResult: boolean;
  /** Record a thrown error's message and stack (secrets redacted) as an `exception` event. @default false */
  recordErrorStack: boolean;
  /** Record the caller's id as `toolgate.caller.id` (it can be personal data: a subject, a client id). @default false */
  recordCallerId: boolean;
  /**
   * How the transport's session id is recorded as `mcp.session.id`. Over Streamable HTTP the session id
   * is what lets a request continue a session (without auth, it is the caller's identity), so by default
   * a digest goes on the span (22 base64url characters of its SHA-256: one per session, for correlation,
   * and no use to whoever reads traces). `raw`: the id itself; `omit`: nothing.
   * @default 'digest'
   */
  sessionId: 'digest' | 'raw' | 'omit';
  /** A hook run just before the span ends; see `OnSpanHook`. @default undefined */
  onSpan: OnSpanHook | undefined;
}

/** @deprecated Use `Partial<OtelRules>`; kept for one release. */
export type ToolOtelOptions = Partial<OtelRules>;

/** How a client's trace context from `params._meta` is used (see `OtelOptions.clientContext`). */
export type ClientContextMode = 'parent' | 'link' | 'ignore';

/** Options of `createOtel`: rules for all tools, per-tool overrides, and where telemetry goes. */
export interface OtelOptions extends Partial<OtelRules>, PerToolOptions<OtelRules> {
  /** Where spans go. @default the global tracer provider (`trace`), resolved on each call until one is registered */
  tracerProvider?: TracerProvider;
  /** Where the duration histogram goes. @default the global meter provider (`metrics`), re-read on each call */
  meterProvider?: MeterProvider;
  /** Reads `traceparent` / `tracestate` / `baggage` from `params._meta`. @default the global propagator (`propagation`) */
  propagator?: TextMapPropagator;
  /**
   * What the trace context a client sent in `params._meta` may do. `parent`: the tool span joins the
   * client's trace (its trace id and, under a `ParentBased` sampler, its sampling decision) and the
   * client's baggage is active in the handler. `link`: the span starts from the server's own context
   * (the HTTP server span, else a new root) with a span link to the client's span; no client baggage.
   * `ignore`: `_meta` is not read. Use `link` or `ignore` when the clients are not yours.
   * @default 'parent'
   */
  clientContext?: ClientContextMode;
  /** The server's transport, recorded as `network.transport`: `pipe` for stdio, `tcp` for HTTP. @default undefined (not recorded) */
  transport?: 'pipe' | 'tcp';
  /** The MCP protocol version to record when the request carries no `mcp-protocol-version` header. @default undefined */
  protocolVersion?: string;
  /** Longest recorded arguments, result or stack text, in characters; longer text is cut. @default 4096 */
  maxRecordedLength?: number;
  /** Secret redaction applied to recorded arguments, results and stacks (core's redactor). @default core's defaults */
  redact?: RedactSecretsOptions;
  /** Where a throwing `onSpan` hook or propagator is reported. @default ctx.logger */
  logger?: Logger;
}

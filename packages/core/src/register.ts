import { performance } from 'node:perf_hooks';
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type ListToolsResult,
  type LoggingLevel,
  ErrorCode as RpcErrorCode,
  SetLevelRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import { markCoreWritten, type ScrubText, scrubFailureText, toModelFacing } from './boundary.js';
import { CALL_KEY_SLOT, NO_BINDINGS, SCOPE_KEY_SLOT } from './call-key.js';
import { type CauseLog, createCauseLog } from './cause-log.js';
import { cancelledResult, isCallerCancel } from './classify-failure.js';
import { compose } from './compose.js';
import { isToolError, ToolError } from './errors.js';
import { type CallerIdentity, type IdentifyCaller, identifyCaller } from './identity.js';
import { newIncidentId } from './incident.js';
import {
  handSettledStep,
  LATE_OUTCOME_SLOT,
  type LateSlot,
  lateSlotOf,
  notifyLate,
  STEP_SETTLED,
  StepThrow,
} from './late-outcome.js';
import { isLocalTransport, type LocalTransportRule } from './local-transport.js';
import { createStderrLogger } from './logger.js';
import { mapStrings } from './map-strings.js';
import { fail, isToolResult, type ToolResult, toolErrorResult } from './result.js';
import {
  createPendingClientRequests,
  createServerAccess,
  type PendingClientRequests,
  withdrawPending,
} from './server-access.js';
import { DEFER_SIGNAL, type SignalSource } from './signal-slot.js';
import type {
  ArgumentVerdict,
  Logger,
  ToolContext,
  ToolDefinition,
  ToolMiddleware,
  ToolRequest,
} from './types.js';
import {
  ARGUMENTS_OK,
  argumentVerdict,
  invalidArgumentsResult,
  isRecord,
  publishedTexts,
  safeParseFast,
} from './validate.js';

export interface RegisterToolsOptions {
  /** Middleware every call passes, outside each tool's own; the first listed is outermost. @default [] */
  middleware?: readonly ToolMiddleware[];
  /** Where core and middleware log (`ctx.logger`). Never stdout. @default createStderrLogger() */
  logger?: Logger;
  /** Replaces core's caller identity rule (see `identifyCaller`). @default identifyCaller */
  identify?: IdentifyCaller;
  /**
   * Which connected transports are local to whoever started the server, so that their calls without auth
   * are `local` (`ctx.request.local`; @toolgate/authz allows `local` every tool by default). Asked once
   * per connection with the server's transport; only `true` makes it local, and one that throws makes it
   * remote (the error in the log). Replaces core's rule; extend it with
   * `(t) => t instanceof MyPipeTransport || isLocalTransport(t)`. @default isLocalTransport (the SDK's
   * StdioServerTransport and InMemoryTransport)
   */
  localTransport?: LocalTransportRule;
  /**
   * Whether calls may send requests to the client (elicitation, sampling). `auto` allows them unless
   * the transport cannot carry them: stateless Streamable HTTP (no session: the client's answer would
   * reach another server instance) or JSON-response mode. `never` refuses them at once. @default 'auto'
   */
  clientRequests?: 'auto' | 'never';
  /**
   * How long a handler may go on after its call was cancelled (the client's `notifications/cancelled`,
   * a closed connection) before core answers the call without it, in ms, so that the chain unwinds:
   * audit records the call, the span ends, the breaker counts a `timeout`. The handler is not stopped
   * (JavaScript cannot stop it); what it settles to later is dropped, a rejection logged. A handler
   * that honours `ctx.signal` settles long before. `false` waits for the handler however long it takes.
   * @default 5000
   */
  abandonAfterMs?: number | false;
}

type RunChain = (ctx: ToolContext) => Promise<ToolResult>;

interface RegisteredEntry {
  readonly tool: ToolDefinition;
  readonly handle: RegisteredTool;
  readonly run: RunChain;
  /** The schemas `tools/list` publishes (JSON Schema 2020-12, as the spec asks), converted once. */
  readonly inputJsonSchema: Record<string, unknown>;
  readonly outputJsonSchema: Record<string, unknown> | undefined;
}

interface Registry {
  readonly server: McpServer;
  readonly tools: Map<string, RegisteredEntry>;
  readonly runUnknown: RunChain;
  readonly logger: Logger;
  readonly identify: IdentifyCaller;
  readonly localTransport: LocalTransportRule;
  /** The transport `transportIsLocal` was decided for: decided again only for a new transport (a new connection). */
  transportSeen: Transport | undefined;
  transportIsLocal: boolean;
  readonly canSee: readonly NonNullable<ToolMiddleware['canSee']>[];
  readonly scrub: readonly ScrubText[];
  readonly scrubData: Prepared['scrubData'];
  readonly clientRequests: 'auto' | 'never';
  readonly abandonAfterMs: number | false;
  /** `logging/setLevel` per session (the key `undefined` for a transport without sessions). */
  readonly logLevels: Map<string | undefined, LoggingLevel>;
  readonly causeLog: CauseLog;
  /** Requests to the client waiting for an answer (`withdrawClientRequests`). */
  readonly pendingRequests: PendingClientRequests;
}

// Each server's registry, on the server itself under a private symbol: a stateless HTTP server builds an
// McpServer per request, and a WeakMap entry per request cost more than one property.
const REGISTRY = Symbol('toolgate.registry');
type WithRegistry = McpServer & { [REGISTRY]?: Registry };

/**
 * Registers tools on an McpServer: McpServer publishes their metadata and schemas (`tools/list`, filtered
 * per caller by global middleware's `canSee`), and core takes over `tools/call` dispatch so that every
 * call, including one with refused arguments or for an unknown or hidden tool, passes the middleware
 * chain. Declares the logging capability (`logging/setLevel`, `ctx.server.log`). Call it before
 * `connect()`.
 *
 * Returns the SDK's handle of each tool by name (to `disable()` or `enable()` it later).
 */
export function registerTools(
  server: McpServer,
  tools: readonly ToolDefinition[],
  options: RegisterToolsOptions = {},
): Record<string, RegisteredTool> {
  if (!Array.isArray(tools) || tools.length === 0) {
    throw new TypeError('registerTools: give at least one tool defined with defineTool()');
  }
  const prepared = preparedFor(options.middleware ?? NO_MIDDLEWARE);
  const existing = (server as WithRegistry)[REGISTRY];
  const registry = existing ?? newRegistry(server, prepared, options);
  const handles: Record<string, RegisteredTool> = {};
  for (const tool of tools) {
    if (registry.tools.has(tool.name))
      throw new Error(`registerTools: tool ${tool.name} is already registered`);
    const chain = chainFor(prepared, tool);
    const schemas = jsonSchemasOf(tool);
    const handle = server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: tool.inputSchema,
        outputSchema: tool.outputSchema,
        annotations: tool.annotations,
        _meta: tool.meta,
      },
      NEVER_CALLED,
    );
    registry.tools.set(tool.name, {
      tool,
      handle,
      run: (ctx) => chain(ctx, () => innermost(ctx, registry)),
      inputJsonSchema: schemas.input,
      outputJsonSchema: schemas.output,
    });
    handles[tool.name] = handle;
  }
  if (existing === undefined) {
    (server as WithRegistry)[REGISTRY] = registry;
    installHandlers(registry);
  }
  return handles;
}

const NO_MIDDLEWARE: readonly ToolMiddleware[] = Object.freeze([]);

// McpServer wants a callback per tool; core dispatches tools/call itself, so it never runs.
const NEVER_CALLED = (): never => {
  throw new Error('toolgate: tools/call is dispatched by registerTools; this callback never runs');
};

/**
 * What registration derives from one global middleware list, kept for the next registration with the
 * same list: a stateless HTTP server builds an McpServer per request and registers the same tools each
 * time, so composing chains and converting schemas per request would be paid on every call.
 */
interface Prepared {
  /** The list as it was read (the caller's array may change later: then it is read again). */
  readonly global: readonly ToolMiddleware[];
  readonly globalChain: ToolMiddleware;
  readonly canSee: readonly NonNullable<ToolMiddleware['canSee']>[];
  readonly scrub: readonly ScrubText[];
  /** What a log message's data passes, per global middleware with a hook (see `ToolMiddleware`). */
  readonly scrubData: readonly ((value: unknown, ctx: ToolContext) => unknown)[];
  readonly chains: WeakMap<ToolDefinition, ToolMiddleware>;
  /** Shared by every server registered with this list, so its throttling holds across requests. */
  readonly causeLog: CauseLog;
  /** How many servers registered with this list are open: the last to close writes the held incident ids. */
  openServers: { count: number };
}

const preparedLists = new WeakMap<readonly ToolMiddleware[], Prepared>();

function preparedFor(list: readonly ToolMiddleware[]): Prepared {
  const cached = preparedLists.get(list);
  if (cached !== undefined && sameEntries(cached.global, list)) return cached;
  const global = [...list];
  const prepared: Prepared = {
    global,
    globalChain: compose(global),
    canSee: global.flatMap((m) => (typeof m.canSee === 'function' ? [m.canSee.bind(m)] : [])),
    scrub: global.flatMap((m) => (typeof m.scrubText === 'function' ? [m.scrubText.bind(m)] : [])),
    scrubData: global.flatMap((m) => {
      if (typeof m.scrubValue === 'function') return [m.scrubValue.bind(m)];
      if (typeof m.scrubText !== 'function') return [];
      const text = m.scrubText.bind(m);
      return [
        (value: unknown, ctx: ToolContext) =>
          mapStrings(value, (s) => text(s, ctx), { mapKey: (s) => text(s, ctx) }),
      ];
    }),
    chains: new WeakMap(),
    causeLog: cached?.causeLog ?? createCauseLog(),
    openServers: cached?.openServers ?? { count: 0 },
  };
  preparedLists.set(list, prepared);
  return prepared;
}

function sameEntries(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i += 1) if (a[i] !== b[i]) return false;
  return true;
}

function chainFor(prepared: Prepared, tool: ToolDefinition): ToolMiddleware {
  let chain = prepared.chains.get(tool);
  if (chain === undefined) {
    chain =
      tool.middleware.length === 0 ? prepared.globalChain : compose([...prepared.global, ...tool.middleware]);
    prepared.chains.set(tool, chain);
  }
  return chain;
}

interface JsonSchemas {
  readonly input: Record<string, unknown>;
  readonly output: Record<string, unknown> | undefined;
}

const jsonSchemas = new WeakMap<ToolDefinition, JsonSchemas>();

/**
 * The schemas `tools/list` publishes, converted once per tool (at its first registration, so that a
 * schema JSON Schema cannot express is refused there). A definition is frozen, so they never go stale.
 */
function jsonSchemasOf(tool: ToolDefinition): JsonSchemas {
  let schemas = jsonSchemas.get(tool);
  if (schemas === undefined) {
    schemas = {
      input: z.toJSONSchema(tool.inputSchema, { target: 'draft-2020-12', io: 'input' }),
      output: tool.outputSchema
        ? z.toJSONSchema(tool.outputSchema, { target: 'draft-2020-12', io: 'output' })
        : undefined,
    };
    jsonSchemas.set(tool, schemas);
  }
  return schemas;
}

/**
 * Withdraws every request the server's calls are waiting on from the client (a question to the person,
 * a sampling request), and fails every later one at once: for the end of a session in which nobody can
 * answer any more, such as a stdio client that closed the server's stdin. Each waiting call gets a
 * ToolError `unavailable` ("the client can no longer answer") from `ctx.server.elicit`/`sample`, goes
 * on from there (@toolgate/confirm runs nothing) and returns through the chain, so it is answered and
 * audited within the app's drain instead of waiting out its question's timeout. The calls themselves
 * are not aborted. Returns how many requests were waiting; 0 for a server `registerTools` never saw.
 */
export function withdrawClientRequests(server: McpServer): number {
  const registry = (server as WithRegistry)[REGISTRY];
  return registry === undefined ? 0 : withdrawPending(registry.pendingRequests);
}

function newRegistry(server: McpServer, prepared: Prepared, options: RegisterToolsOptions): Registry {
  const registry: Registry = {
    server,
    tools: new Map(),
    runUnknown: (ctx) => prepared.globalChain(ctx, () => innermost(ctx, registry)),
    logger: options.logger ?? defaultLogger(),
    identify: options.identify ?? identifyCaller,
    localTransport: localTransportOf(options.localTransport),
    transportSeen: undefined,
    transportIsLocal: false,
    canSee: prepared.canSee,
    scrub: prepared.scrub,
    scrubData: prepared.scrubData,
    clientRequests: options.clientRequests ?? 'auto',
    abandonAfterMs: abandonAfterMsOf(options.abandonAfterMs),
    logLevels: new Map(),
    causeLog: prepared.causeLog,
    pendingRequests: createPendingClientRequests(),
  };
  flushOnClose(server, prepared);
  return registry;
}

/**
 * Writes the incident ids the cause log holds (at most a second's worth) when the last open server that
 * shares it closes (its transport closed: `server.close()`, stdin ended, a per-request server's response
 * done), so a shutdown does not lose ids a model may quote. Not at every close: a stateless HTTP server
 * closes one server per request, and the ids of a flood would then take a line per call. Chained to
 * `server.server.onclose`: an app that sets that property after registration replaces this (the ids are
 * then written within a second, as always, unless the process exits first).
 */
function flushOnClose(server: McpServer, prepared: Prepared): void {
  const low = server.server;
  const previous = low.onclose;
  const open = prepared.openServers;
  let closed = false;
  open.count += 1;
  low.onclose = () => {
    if (!closed) {
      closed = true;
      open.count -= 1;
      if (open.count <= 0) prepared.causeLog.flush();
    }
    previous?.();
  };
}

function abandonAfterMsOf(value: number | false | undefined): number | false {
  if (value === undefined) return DEFAULT_ABANDON_AFTER_MS;
  if (value === false || (typeof value === 'number' && Number.isFinite(value) && value >= 0)) return value;
  throw new TypeError(
    `registerTools: abandonAfterMs must be a number of ms (0 or more) or false, not ${String(value)}`,
  );
}

const DEFAULT_ABANDON_AFTER_MS = 5000;

function localTransportOf(value: LocalTransportRule | undefined): LocalTransportRule {
  if (value === undefined) return isLocalTransport;
  if (typeof value === 'function') return value;
  throw new TypeError(
    `registerTools: localTransport must be a function (transport) => boolean, not ${value === null ? 'null' : typeof value}`,
  );
}

/**
 * Whether the server's transport is local, decided once per connection (a property read and a
 * comparison per call). No transport (the connection closed under the call) is remote.
 */
function transportIsLocal(registry: Registry): boolean {
  const transport = registry.server.server.transport;
  if (transport !== registry.transportSeen) {
    registry.transportSeen = transport;
    registry.transportIsLocal = transport !== undefined && decideLocal(registry, transport);
  }
  return registry.transportIsLocal;
}

function decideLocal(registry: Registry, transport: Transport): boolean {
  try {
    const rule = registry.localTransport;
    return rule(transport) === true;
  } catch (error) {
    // Fail closed: a rule that cannot decide leaves the transport's callers unauthenticated, not `local`.
    logSafely(registry.logger, { err: error }, 'localTransport threw; transport treated as remote');
    return false;
  }
}

let stderrLogger: Logger | undefined;
function defaultLogger(): Logger {
  stderrLogger ??= createStderrLogger();
  return stderrLogger;
}

interface CallExtra {
  signal: AbortSignal;
  requestId: ToolRequest['id'];
  sessionId?: string | undefined;
  authInfo?: ToolRequest['authInfo'];
  _meta?: Record<string, unknown> | undefined;
  requestInfo?: { headers?: Record<string, string | string[] | undefined> } | undefined;
  sendNotification: (notification: never) => Promise<void>;
  sendRequest: (request: never, schema: never, options?: never) => Promise<unknown>;
  closeSSEStream?: (() => void) | undefined;
}

function installHandlers(registry: Registry): void {
  const low = registry.server.server;
  // McpServer's own tools/list (schemas converted by the SDK), filtered per caller. Read from the
  // SDK's handler table once, after registerTool installed it.
  const handlers = (
    low as unknown as { _requestHandlers?: Map<string, (r: unknown, e: unknown) => Promise<unknown>> }
  )._requestHandlers;
  const listTools = handlers?.get('tools/list');
  if (listTools === undefined) {
    throw new Error("registerTools: this SDK version does not expose McpServer's tools/list handler");
  }
  low.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
    const listed = (await listTools(request, extra)) as ListToolsResult;
    const toolRequest = requestOf(registry, extra as unknown as CallExtra, undefined);
    let caller: CallerIdentity | undefined;
    if (registry.canSee.length > 0) {
      const identified = identifySafely(registry, toolRequest, 'tools/list');
      if (identified instanceof Unidentified) {
        // No caller, so no canSee can judge a tool: a designed JSON-RPC error, the reason in the log.
        throw Object.assign(new Error('Internal error.'), {
          code: RpcErrorCode.InternalError,
          data: { incidentId: identified.incidentId },
        });
      }
      caller = identified;
    }
    const tools: ListToolsResult['tools'] = [];
    for (const item of listed.tools) {
      const entry = registry.tools.get(item.name);
      if (entry === undefined) {
        tools.push(item);
        continue;
      }
      if (caller !== undefined && !visible(registry, entry.tool, caller, toolRequest)) continue;
      // McpServer converts zod to draft-07; publish 2020-12, the dialect MCP specifies.
      const published = {
        ...item,
        inputSchema: entry.inputJsonSchema as ListToolsResult['tools'][number]['inputSchema'],
      };
      if (entry.outputJsonSchema !== undefined) {
        published.outputSchema = entry.outputJsonSchema as NonNullable<
          ListToolsResult['tools'][number]['outputSchema']
        >;
      }
      tools.push(published);
    }
    return { ...listed, tools };
  });
  // Replaces McpServer's own tools/call handler, which would validate and refuse calls before any
  // middleware saw them.
  low.setRequestHandler(CallToolRequestSchema, (request, extra) =>
    dispatch(registry, request.params, extra as unknown as CallExtra),
  );
  // The SDK parses a tools/call request with its schema before that handler, and answers one it refuses
  // (`arguments` a string, `name` a number) with a zod issue dump as a JSON-RPC error: no middleware ran,
  // so audit had no record. Core's entry checks the params' shape first (a few typeof checks): a
  // well-formed call goes the SDK's way; a malformed one passes the global chain, then gets a designed
  // JSON-RPC error.
  const sdkCall = handlers?.get('tools/call');
  if (handlers === undefined || sdkCall === undefined) {
    throw new Error('registerTools: this SDK version does not expose its tools/call handler');
  }
  handlers.set('tools/call', (request, extra) => {
    const params = (request as { params?: unknown }).params;
    const malformed = malformedParams(params);
    if (malformed !== undefined) return refuseMalformed(registry, params, extra as CallExtra, malformed);
    try {
      return sdkCall(request, extra);
    } catch (error) {
      // Thrown before the handler ran (its wrapper is async): the SDK's schema refused something the
      // checks above do not look at (a `task` that is not an object).
      return refuseMalformed(registry, params, extra as CallExtra, sdkRefusal(error));
    }
  });
  low.registerCapabilities({ logging: {} });
  low.setRequestHandler(SetLevelRequestSchema, (request, extra) => {
    registry.logLevels.set(sessionKey(extra as unknown as CallExtra), request.params.level);
    return {};
  });
}

function visible(
  registry: Registry,
  tool: ToolDefinition,
  caller: CallerIdentity,
  request: ToolRequest,
): boolean {
  try {
    for (const canSee of registry.canSee) if (!canSee(tool, caller, request)) return false;
    return true;
  } catch (error) {
    // Fail closed: a policy that cannot decide hides the tool; its error (a host, a store) stays here.
    logSafely(
      registry.logger,
      { tool: tool.name, requestId: request.id, err: error },
      'canSee threw; tool hidden',
    );
    return false;
  }
}

function sessionKey(extra: CallExtra): string | undefined {
  const header = extra.requestInfo?.headers?.['mcp-session-id'];
  return extra.sessionId || (typeof header === 'string' ? header : undefined);
}

function requestOf(
  registry: Registry,
  extra: CallExtra,
  meta: Record<string, unknown> | undefined,
): ToolRequest {
  return {
    id: extra.requestId,
    sessionId: extra.sessionId,
    authInfo: extra.authInfo,
    meta,
    headers: extra.requestInfo?.headers,
    local: transportIsLocal(registry),
    signal: extra.signal,
  };
}

interface CallParams {
  name: string;
  arguments?: Record<string, unknown> | undefined;
  _meta?: Record<string, unknown> | undefined;
}

/** What is wrong with a malformed tools/call request: the verdict the chain sees, the client's message. */
interface Malformed {
  readonly verdict: ArgumentVerdict;
  readonly message: string;
}

function malformedAs(field: string, expected: string): Malformed {
  const issue = Object.freeze({ path: `(${field})`, expected });
  const verdict: ArgumentVerdict = Object.freeze({ ok: false, issues: Object.freeze([issue]) as never });
  const malformed = Object.freeze({
    verdict,
    message: `Invalid tools/call request: \`${field}\` must be ${expected}.`,
  });
  malformedMessages.set(verdict, malformed.message);
  return malformed;
}

/** The message of each malformed verdict, for the innermost step's answer. */
const malformedMessages = new WeakMap<ArgumentVerdict, string>();

const MALFORMED = {
  name: malformedAs('name', 'a string'),
  arguments: malformedAs('arguments', 'an object'),
  meta: malformedAs('_meta', 'an object'),
  task: malformedAs('task', 'an object with an optional number `ttl`'),
  params: malformedAs('params', 'an object as MCP defines for tools/call'),
} as const;

/** What is wrong with tools/call params, or undefined when their shape is what dispatch needs. */
function malformedParams(params: unknown): Malformed | undefined {
  if (!isRecord(params)) return MALFORMED.name;
  const name = params.name;
  // An empty name is a name the schema accepts: an unknown tool, answered as every other one.
  if (typeof name !== 'string') return MALFORMED.name;
  const args = params.arguments;
  if (args !== undefined && !isRecord(args)) return MALFORMED.arguments;
  const meta = params._meta;
  if (meta !== undefined && !isRecord(meta)) return MALFORMED.meta;
  return undefined;
}

/** The field the SDK's schema refused (its first issue), among those core names; `params` otherwise. */
function sdkRefusal(error: unknown): Malformed {
  try {
    const path = (error as { issues?: Array<{ path?: unknown }> } | undefined)?.issues?.[0]?.path;
    const field = Array.isArray(path) && path[0] === 'params' ? path[1] : undefined;
    if (field === 'task') return MALFORMED.task;
    if (field === 'name') return MALFORMED.name;
    if (field === 'arguments') return MALFORMED.arguments;
    if (field === '_meta') return MALFORMED.meta;
  } catch {
    // an unreadable error: the generic answer
  }
  return MALFORMED.params;
}

/**
 * A malformed tools/call request: the global chain runs it as it runs an unknown tool (so audit records
 * it, the name as sent), its innermost step answers `invalid_argument`, and the client then receives
 * JSON-RPC error -32602 with `malformed.message`. Arguments that are not an object are kept for the
 * chain under `arguments` (`ctx.rawArgs` stays an object).
 */
function refuseMalformed(
  registry: Registry,
  params: unknown,
  extra: CallExtra,
  malformed: Malformed,
): Promise<ToolResult> {
  try {
    const sent = isRecord(params) ? params : {};
    const args = sent.arguments;
    const meta = sent._meta;
    return dispatch(
      registry,
      {
        name: nameAsSent(sent.name),
        arguments: args === undefined ? {} : isRecord(args) ? args : { arguments: args },
        _meta: isRecord(meta) ? meta : undefined,
      },
      extra,
      malformed,
    );
  } catch {
    return Promise.reject(invalidRequest(malformed));
  }
}

/** A tool name as the client sent it: a string as is, nothing as '', anything else as its JSON. */
function nameAsSent(name: unknown): string {
  if (typeof name === 'string') return name;
  if (name === undefined) return '';
  try {
    return JSON.stringify(name) ?? String(name);
  } catch {
    return typeof name;
  }
}

/** The JSON-RPC error of a malformed request. A plain error with a code: McpError would prefix its own. */
function invalidRequest(malformed: Malformed): Error {
  return Object.assign(new Error(malformed.message), { code: RpcErrorCode.InvalidParams });
}

async function dispatch(
  registry: Registry,
  params: CallParams,
  extra: CallExtra,
  malformed?: Malformed,
): Promise<ToolResult> {
  const request = requestOf(registry, extra, params._meta);
  const caller = identifySafely(registry, request, params.name);
  if (caller instanceof Unidentified) {
    if (malformed !== undefined) throw invalidRequest(malformed);
    return caller.answer;
  }
  const entry = malformed === undefined ? registry.tools.get(params.name) : undefined;
  // A hidden tool is decided before validation, so a refused schema cannot reveal that it exists.
  const active =
    entry?.handle.enabled && (registry.canSee.length === 0 || visible(registry, entry.tool, caller, request))
      ? entry
      : undefined;
  const rawArgs = params.arguments ?? {};
  let verdict: ArgumentVerdict = malformed === undefined ? ARGUMENTS_OK : malformed.verdict;
  let args: Record<string, unknown> = rawArgs;
  let bindings: Readonly<Record<string, unknown>> = NO_BINDINGS;
  if (active) {
    try {
      const schema = active.tool.inputSchema;
      const parsing = safeParseFast(schema, rawArgs);
      const parsed = parsing instanceof Promise ? await parsing : parsing;
      const validated = argumentVerdict(schema, rawArgs, parsed as ReturnType<typeof schema.safeParse>);
      verdict = validated.verdict;
      args = validated.args;
      if (verdict.ok && active.tool.bind)
        bindings = Object.freeze({ ...(await active.tool.bind(request, caller)) });
    } catch (error) {
      // A throwing transform/refine or bind: rethrown by the innermost step, inside the chain.
      verdict = { ok: false, issues: [], error };
    }
  }
  const ctx: ToolContext = new CallContext(
    params.name,
    active?.tool,
    args,
    rawArgs,
    verdict,
    request,
    caller,
    bindings,
    registry,
    extra,
  );
  let result: ToolResult;
  try {
    result = await (active ? active.run(ctx) : registry.runUnknown(ctx));
  } catch (error) {
    result = lastResort(ctx, error, registry);
  }
  // From here on the handler's outcome is late: a middleware answered for it (a breaker's deadline).
  const late = (ctx as CallContext)[LATE_OUTCOME_SLOT];
  if (late !== undefined) {
    late.answered = true;
    // Or it was already: the handler settled after that answer, while the chain outside went on.
    try {
      handSettledStep(late, ctx, result, (ctx as CallContext)[STEP_SETTLED]);
    } catch {
      // A malformed answer of a middleware's: the boundary below refuses it; nothing to hand over.
    }
  }
  if (!active) {
    if (malformed !== undefined) throw invalidRequest(malformed);
    // The spec answers an unknown tool with a JSON-RPC error; the chain has seen (and audited) it.
    // A plain error with a code: McpError would prefix "MCP error -32602:" and the client adds it again.
    throw Object.assign(new Error(`Unknown tool: ${params.name}`), { code: RpcErrorCode.InvalidParams });
  }
  try {
    const schema = active.tool.outputSchema;
    // A success a middleware answered with other data than the handler's (a cached or replayed answer,
    // a rewrite) is checked here; the handler's own was checked at the innermost step. The SDK client
    // would refuse data that does not match with an error of its own, and no incident id.
    if (
      schema !== undefined &&
      isToolResult(result) &&
      result.isError !== true &&
      result.structuredContent !== (ctx as CallContext)[OUTPUT_CHECKED]
    ) {
      const parsing = safeParseFast(schema, result.structuredContent);
      const checked = parsing instanceof Promise ? await parsing : parsing;
      if (!checked.success) {
        return internalError(
          ctx,
          new TypeError(`Tool ${params.name} was answered with data that does not match its output schema`, {
            cause: checked.error,
          }),
        );
      }
    }
    return toModelFacing(ctx, result, registry.scrub);
  } catch (error) {
    // A scrubText hook, the logger or an output schema's refinement threw: the SDK would send its
    // message to the client as is.
    return internalError(ctx, error);
  }
}

/** A call whose caller could not be identified: its answer, under `incidentId`. */
class Unidentified {
  readonly answer: ToolResult;
  constructor(readonly incidentId: string) {
    this.answer = fail('internal', 'Internal error.', { incidentId });
  }
}

/**
 * The caller, or `internal` when a custom `identify` throws or returns no identity. Decided before the
 * chain runs, so no policy sees the call: policies key on the caller, and one stand-in for every such
 * call would put them all in one bucket. Even a ToolError is `internal` here: identify names the caller,
 * it does not refuse one (a `bind` or a policy does, inside the chain, where audit records it). Its
 * message goes to the log under the incident id, throttled per cause as ToolError causes are.
 */
function identifySafely(
  registry: Registry,
  request: ToolRequest,
  toolName: string,
): CallerIdentity | Unidentified {
  let error: unknown;
  try {
    const caller = registry.identify(request);
    // An async identify gives a promise: its id, undefined, would make every caller one key. Checked
    // without reading the identity's fields: a call no policy keys reads none of them.
    if (typeof caller === 'object' && caller !== null && !(caller instanceof Promise)) return caller;
    error = new TypeError(
      `identify returned ${caller === null ? 'null' : caller instanceof Promise ? 'a promise' : typeof caller}, not a caller identity`,
    );
  } catch (thrown) {
    error = thrown;
  }
  const incidentId = newIncidentId();
  registry.causeLog(registry.logger, {
    incidentId,
    tool: toolName,
    requestId: request.id,
    code: 'internal',
    err: new ToolError('internal', 'The caller could not be identified.', { cause: error }),
    during: 'identify',
  });
  return new Unidentified(incidentId);
}

const OUTPUT_CHECKED = Symbol('toolgate.outputChecked');

/**
 * The context of one call. A class, so every call's context has one shape; server access is built
 * only when a call asks for it (most never reach the client).
 */
class CallContext implements ToolContext {
  readonly startedAt = Date.now();
  // perf_hooks' performance, not the global: Node defines that one as a getter on globalThis, which
  // optimized code cannot fold into a constant (a global load IC on every call).
  readonly startTime = performance.now();
  incidentId: string | undefined = undefined;
  readonly decisions: ToolContext['decisions'] = [];
  readonly state: ToolContext['state'] = {};
  // callKey/callerScope cache their keys here (see call-key.ts).
  [SCOPE_KEY_SLOT]: unknown = undefined;
  [CALL_KEY_SLOT]: unknown = undefined;
  /** The handler's `structuredContent` the innermost step checked against the output schema. */
  [OUTPUT_CHECKED]: unknown = undefined;
  /** Who waits for the handler's outcome should it come after the answer (see `onLateOutcome`). */
  [LATE_OUTCOME_SLOT]: LateSlot | undefined = undefined;
  /** What the handler's step settled with, once it settled (see `handSettledStep`). */
  [STEP_SETTLED]: ToolResult | StepThrow | undefined = undefined;
  #signal: AbortSignal;
  #signalSource: SignalSource | undefined = undefined;
  readonly logger: Logger;
  #server: ToolContext['server'] | undefined;
  readonly #registry: Registry;
  readonly #extra: CallExtra;

  constructor(
    readonly toolName: string,
    readonly tool: ToolDefinition | undefined,
    readonly args: Record<string, unknown>,
    readonly rawArgs: Readonly<Record<string, unknown>>,
    readonly validation: ArgumentVerdict,
    readonly request: ToolRequest,
    readonly caller: CallerIdentity,
    readonly bindings: Readonly<Record<string, unknown>>,
    registry: Registry,
    extra: CallExtra,
  ) {
    this.#signal = request.signal;
    this.logger = registry.logger;
    this.#registry = registry;
    this.#extra = extra;
  }

  get signal(): AbortSignal {
    const source = this.#signalSource;
    return source === undefined ? this.#signal : source.readSignal();
  }

  set signal(value: AbortSignal) {
    const source = this.#signalSource;
    if (source === undefined) this.#signal = value;
    else source.writeSignal(value);
  }

  /** See `deferSignal`: a slot instead of an accessor property defined on each context. */
  [DEFER_SIGNAL](source: SignalSource): void {
    this.#signalSource = source;
  }

  get server(): ToolContext['server'] {
    this.#server ??= serverAccessFor(this.#registry, this.#extra, this);
    return this.#server;
  }
}

function serverAccessFor(registry: Registry, extra: CallExtra, ctx: ToolContext): ToolContext['server'] {
  const low = registry.server.server;
  const request = ctx.request;
  const hooks = registry.scrub;
  const progressToken = (request.meta?.progressToken ?? undefined) as string | number | undefined;
  return createServerAccess({
    signal: () => extra.signal,
    pendingRequests: registry.pendingRequests,
    progressToken,
    sendNotification: extra.sendNotification as never,
    sendRequest: extra.sendRequest as never,
    clientCapabilities: () => low.getClientCapabilities(),
    canRequest: registry.clientRequests === 'auto' && transportCanRequest(registry, request),
    logLevel: () => registry.logLevels.get(sessionKey(extra)),
    closeStream: extra.closeSSEStream,
    // What a failure's strings pass at the boundary: a server that scrubs internals from failures
    // (@toolgate/redact-errors) scrubs them from these side channels too.
    scrubText:
      hooks.length === 0
        ? undefined
        : (text) => {
            let out = text;
            for (const scrub of hooks) out = scrub(out, ctx);
            return out;
          },
    scrubData:
      registry.scrubData.length === 0
        ? undefined
        : (data) => {
            let out = data;
            for (const scrub of registry.scrubData) out = scrub(out, ctx);
            return out;
          },
  });
}

// Over HTTP without a session the client's answer arrives as a new POST at another server instance,
// and in JSON-response mode the request has no stream to travel on: either way it would never return.
// A question about HTTP, not locality: a transport that passes no headers (stdio, in-memory, WebSocket)
// is one duplex stream, which carries the client's answer back whoever is at the other end.
function transportCanRequest(registry: Registry, request: ToolRequest): boolean {
  if (request.headers === undefined) return true;
  if (!request.sessionId) return false;
  const transport = registry.server.server.transport as { _enableJsonResponse?: boolean } | undefined;
  return transport?._enableJsonResponse !== true;
}

/**
 * The chain's innermost step: answers refused calls, otherwise runs the handler. Not an async
 * function: an async handler's answer is settled from the handler's own promise in one reaction
 * (`settleHandler`), where awaiting a race and then returning from an async frame took two, one more
 * microtask hop on every async tool's answer (see `afterSettled` for what a hop costs over HTTP).
 */
function innermost(ctx: ToolContext, registry: Registry): Promise<ToolResult> {
  try {
    const tool = ctx.tool;
    if (!tool) {
      // A malformed request (see `refuseMalformed`): the client gets a JSON-RPC error after the chain.
      const malformed = ctx.validation.ok ? undefined : malformedMessages.get(ctx.validation);
      if (malformed !== undefined) return Promise.resolve(fail('invalid_argument', malformed));
      return Promise.resolve(
        fail('not_found', `Unknown tool: ${ctx.toolName}.`, {
          hint: 'Call tools/list to see the tools this server offers.',
        }),
      );
    }
    if (!ctx.validation.ok) {
      const thrown = ctx.validation.error;
      // A bind that refused on purpose answers like a handler's ToolError; anything else thrown while
      // validating or binding goes up the chain like a handler's crash (redaction maps it).
      if (isToolError(thrown)) return Promise.resolve(thrownAnswer(ctx, thrown, registry));
      if (thrown !== undefined) return Promise.reject(thrown);
      // Core's own words pass as written; every piece of an issue from the schema, a transform or the
      // arguments (a message, pattern, value, path, key: a caught error, a connection string) is
      // scrubbed as a failure's strings are.
      // A piece the tool's published input schema shows the model (an enum value, a pattern) passes.
      const scrub = (text: string): string => scrubFailureText(text, registry.scrub, ctx);
      const shown = publishedTexts(registry.tools.get(tool.name)?.inputJsonSchema);
      return Promise.resolve(
        markCoreWritten(invalidArgumentsResult(tool.name, ctx.validation.issues, scrub, shown)),
      );
    }
    let returned: unknown;
    try {
      returned = tool.handler(ctx.args, ctx);
    } catch (error) {
      if (!isToolError(error)) return Promise.reject(error);
      return Promise.resolve(thrownAnswer(ctx, error, registry));
    }
    // A synchronous handler's result is used as is: awaiting a plain value costs a promise.
    if (returned instanceof Promise) return settleHandler(returned, ctx, registry, tool);
    return Promise.resolve(handlerAnswer(ctx, registry, tool, returned));
  } catch (error) {
    return Promise.reject(error);
  }
}

/** What a handler's thrown ToolError answers, as the model sees it. */
function thrownAnswer(ctx: ToolContext, error: ToolError, registry: Registry): ToolResult {
  return toModelFacing(ctx, toolErrorAnswer(ctx, error, registry), registry.scrub);
}

/**
 * A handler's returned value, checked (a result, data matching the output schema) and made model-facing.
 * A promise only when the output schema's check is asynchronous (an async refinement).
 */
function handlerAnswer(
  ctx: ToolContext,
  registry: Registry,
  tool: ToolDefinition,
  result: unknown,
): ToolResult | Promise<ToolResult> {
  if (!isToolResult(result)) {
    throw new TypeError(`Tool ${tool.name} returned ${typeof result}; a handler must return ok() or fail()`);
  }
  if (tool.outputSchema && result.isError !== true) {
    const parsing = safeParseFast(tool.outputSchema, result.structuredContent);
    if (parsing instanceof Promise)
      return parsing.then((checked) => checkedAnswer(ctx, registry, tool, result, checked));
    return checkedAnswer(ctx, registry, tool, result, parsing);
  }
  return toModelFacing(ctx, result, registry.scrub);
}

function checkedAnswer(
  ctx: ToolContext,
  registry: Registry,
  tool: ToolDefinition,
  result: ToolResult,
  checked: { success: boolean; error?: unknown },
): ToolResult {
  if (!checked.success) {
    throw new TypeError(`Tool ${tool.name} returned data that does not match its output schema`, {
      cause: checked.error,
    });
  }
  (ctx as CallContext)[OUTPUT_CHECKED] = result.structuredContent;
  return toModelFacing(ctx, result, registry.scrub);
}

/**
 * The answer of an async handler: settled in the handler's promise's own reaction, unless the call is
 * cancelled and the handler goes on for `abandonAfterMs` more: then `timeout` without it. Watches the
 * caller's own signal (`ctx.request.signal`: cancellation, a closed connection): a middleware's deadline
 * (the breaker's) answers its calls itself.
 */
function settleHandler(
  pending: Promise<unknown>,
  ctx: ToolContext,
  registry: Registry,
  tool: ToolDefinition,
): Promise<ToolResult> {
  const graceMs = registry.abandonAfterMs;
  const signal = ctx.request.signal;
  return new Promise<ToolResult>((resolve, reject) => {
    const step = ctx as CallContext;
    const answer = (value: unknown): void => {
      try {
        const result = handlerAnswer(ctx, registry, tool, value);
        if (result instanceof Promise) {
          result.then(
            (checked) => {
              step[STEP_SETTLED] = checked;
            },
            (error: unknown) => {
              step[STEP_SETTLED] = new StepThrow(error);
            },
          );
        } else step[STEP_SETTLED] = result;
        resolve(result);
      } catch (error) {
        step[STEP_SETTLED] = new StepThrow(error);
        reject(error);
      }
    };
    const refuse = (error: unknown): void => {
      // In the try too: a hostile value (a Proxy whose traps throw) can make the check itself throw.
      try {
        if (isToolError(error)) {
          const result = thrownAnswer(ctx, error, registry);
          step[STEP_SETTLED] = result;
          resolve(result);
        } else {
          step[STEP_SETTLED] = new StepThrow(error);
          reject(error);
        }
      } catch (thrown) {
        step[STEP_SETTLED] = new StepThrow(thrown);
        reject(thrown);
      }
    };
    if (graceMs === false) {
      // A middleware that answered for the call (a breaker's deadline) got this step's answer late: the
      // answer, computed once, settles the step and goes to whoever asked for it (`onLateOutcome`).
      pending.then(
        (value) => {
          if (lateSlotOf(ctx)?.answered) resolve(handLate(ctx, registry, tool, { value }));
          else answer(value);
        },
        (error: unknown) => {
          if (lateSlotOf(ctx)?.answered) resolve(handLate(ctx, registry, tool, { error }));
          else refuse(error);
        },
      );
      return;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    let abandoned = false;
    const abandon = (): void => {
      abandoned = true;
      signal.removeEventListener('abort', onAbort);
      ctx.incidentId ??= newIncidentId();
      logSafely(
        ctx.logger,
        {
          incidentId: ctx.incidentId,
          tool: ctx.toolName,
          requestId: ctx.request.id,
          abandonAfterMs: graceMs,
        },
        'handler still running after its call was cancelled; answered without it',
        'warn',
      );
      answer(
        fail('timeout', 'The call was cancelled and did not stop in time.', { incidentId: ctx.incidentId }),
      );
    };
    const onAbort = (): void => {
      // Unreferenced: an abandoned handler's timer never holds a closing process open.
      timer = setTimeout(abandon, graceMs);
      timer.unref?.();
    };
    const settled = (): boolean => {
      if (abandoned) return false;
      signal.removeEventListener('abort', onAbort);
      if (timer !== undefined) clearTimeout(timer);
      return true;
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    pending.then(
      (value) => {
        // Abandoned: the step was answered `timeout`; what the handler came to goes only to whoever asked.
        if (!settled()) {
          if (lateSlotOf(ctx)?.listeners.length) handLate(ctx, registry, tool, { value }).catch(ignoreLate);
        } else if (lateSlotOf(ctx)?.answered) resolve(handLate(ctx, registry, tool, { value }));
        else answer(value);
      },
      (error: unknown) => {
        if (settled()) {
          if (lateSlotOf(ctx)?.answered) resolve(handLate(ctx, registry, tool, { error }));
          else refuse(error);
        } else {
          if (lateSlotOf(ctx)?.listeners.length) handLate(ctx, registry, tool, { error }).catch(ignoreLate);
          // Ended by the cancel itself (`signal.throwIfAborted()` throws the client's reason text): the
          // call was cancelled, nothing failed, and the client's words stay out of the log.
          const cancelled = isCallerCancel(ctx, error);
          logSafely(
            ctx.logger,
            {
              incidentId: ctx.incidentId,
              tool: ctx.toolName,
              requestId: ctx.request.id,
              ...(cancelled ? { cancelled: true } : { err: error }),
            },
            cancelled
              ? 'abandoned handler stopped after its call was answered'
              : 'abandoned handler failed after its call was answered',
            cancelled ? 'info' : 'warn',
          );
        }
      },
    );
  });
}

/**
 * A handler that settled after its call was answered without it: its outcome, made model-facing as its
 * answer would have been (checked, scrubbed; rejected with what it threw otherwise), handed to whoever
 * asked (`onLateOutcome`). Off the call's path.
 */
function handLate(
  ctx: ToolContext,
  registry: Registry,
  tool: ToolDefinition,
  settled: { value: unknown } | { error: unknown },
): Promise<ToolResult> {
  const computed = new Promise<ToolResult>((resolve) => {
    if ('value' in settled) resolve(handlerAnswer(ctx, registry, tool, settled.value));
    else if (isToolError(settled.error)) resolve(thrownAnswer(ctx, settled.error, registry));
    else throw settled.error;
  });
  const slot = lateSlotOf(ctx);
  if (slot !== undefined && slot.listeners.length > 0) {
    computed.then(
      (result) => notifyLate(slot, ctx, { result }),
      (error: unknown) => notifyLate(slot, ctx, { error }),
    );
  }
  return computed;
}

/** An abandoned handler's rejection, already logged where it settled. */
const ignoreLate = (): void => {};

/**
 * A ToolError's own result. With a cause, the model sees an incident id and the log keeps the cause
 * under it, throttled per failure class: during an outage every call fails the same way.
 */
function toolErrorAnswer(ctx: ToolContext, error: ToolError, registry: Registry): ToolResult {
  if (error.cause === undefined) return toolErrorResult(error);
  ctx.incidentId ??= newIncidentId();
  registry.causeLog(ctx.logger, {
    incidentId: ctx.incidentId,
    tool: ctx.toolName,
    requestId: ctx.request.id,
    code: error.code,
    err: error,
  });
  return toolErrorResult(error, ctx.incidentId);
}

/**
 * What the model sees when something escapes every middleware: a ToolError's own result or `internal`.
 * Never throws: a ToolError whose fields cannot be read, or a logger that throws, still ends in `internal`.
 */
function lastResort(ctx: ToolContext, error: unknown, registry: Registry): ToolResult {
  try {
    if (isToolError(error)) {
      return error.cause === undefined
        ? toolErrorResult(error, ctx.incidentId)
        : toolErrorAnswer(ctx, error, registry);
    }
  } catch (unreadable) {
    return internalError(ctx, unreadable);
  }
  if (isCallerCancel(ctx, error)) return cancelledAnswer(ctx);
  return internalError(ctx, error);
}

/**
 * The caller cancelled and the chain failed with what its cancel made: not an incident. Logged at info
 * without the error (a client's cancel reason is text it chose, never an error-level line of ours).
 */
function cancelledAnswer(ctx: ToolContext): ToolResult {
  logSafely(
    ctx.logger,
    { tool: ctx.toolName, requestId: ctx.request.id },
    'tool call cancelled by the client',
    'info',
  );
  return cancelledResult(ctx.toolName);
}

/** `internal` with an incident id; the full error goes to the log under it (if the logger can take it). */
function internalError(ctx: ToolContext, error: unknown): ToolResult {
  const incidentId = ctx.incidentId ?? newIncidentId();
  ctx.incidentId = incidentId;
  logSafely(
    ctx.logger,
    { incidentId, tool: ctx.toolName, requestId: ctx.request.id, err: error },
    'tool call failed',
  );
  return fail('internal', 'Internal error.', { incidentId });
}

// A logger that throws must not turn an answer into its own error message (nor, in a timer or a
// promise reaction, into an uncaught exception).
function logSafely(
  logger: Logger,
  fields: Record<string, unknown>,
  message: string,
  level: 'info' | 'warn' | 'error' = 'error',
): void {
  try {
    logger[level](fields, message);
  } catch {
    // nothing better to do: the logger itself is broken
  }
}

import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CallToolRequestSchema,
  McpError,
  ErrorCode as RpcErrorCode,
} from '@modelcontextprotocol/sdk/types.js';
import { compose } from './compose.js';
import { isToolError } from './errors.js';
import { newIncidentId } from './incident.js';
import { createStderrLogger } from './logger.js';
import { fail, isToolResult, type ToolResult, toolErrorResult } from './result.js';
import type { Logger, ToolContext, ToolDefinition, ToolMiddleware, ToolRequest } from './types.js';
import { invalidArgumentsResult, validateArguments } from './validate.js';

export interface RegisterToolsOptions {
  /** Middleware every call passes, outside each tool's own; the first listed is outermost. @default [] */
  middleware?: readonly ToolMiddleware[];
  /** Where core and middleware log (`ctx.logger`). Never stdout. @default createStderrLogger() */
  logger?: Logger;
}

type RunChain = (ctx: ToolContext) => Promise<ToolResult>;

interface RegisteredEntry {
  readonly tool: ToolDefinition;
  readonly handle: RegisteredTool;
  readonly run: RunChain;
}

interface Registry {
  readonly tools: Map<string, RegisteredEntry>;
  readonly runUnknown: RunChain;
  readonly logger: Logger;
}

const registries = new WeakMap<McpServer, Registry>();

/**
 * Registers tools on an McpServer: McpServer publishes their metadata and schemas (`tools/list`),
 * and core takes over `tools/call` dispatch so that every call, including one with refused
 * arguments or for an unknown tool, passes the middleware chain. Call it before `connect()`.
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
  const global = [...(options.middleware ?? [])];
  const globalChain = compose(global);
  let registry = registries.get(server);
  if (!registry) {
    registry = {
      tools: new Map(),
      runUnknown: (ctx) => globalChain(ctx, () => innermost(ctx)),
      logger: options.logger ?? createStderrLogger(),
    };
  }
  const handles: Record<string, RegisteredTool> = {};
  for (const tool of tools) {
    if (registry.tools.has(tool.name))
      throw new Error(`registerTools: tool ${tool.name} is already registered`);
    const chain = compose([...global, ...tool.middleware]);
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
      () => {
        throw new Error('toolgate: tools/call is dispatched by registerTools; this callback never runs');
      },
    );
    registry.tools.set(tool.name, { tool, handle, run: (ctx) => chain(ctx, () => innermost(ctx)) });
    handles[tool.name] = handle;
  }
  if (!registries.has(server)) {
    registries.set(server, registry);
    const known = registry;
    // Replaces McpServer's own tools/call handler (registered by registerTool above), which would
    // validate and refuse calls before any middleware saw them.
    server.server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
      dispatch(known, request.params, extra),
    );
  }
  return handles;
}

interface CallParams {
  name: string;
  arguments?: Record<string, unknown> | undefined;
  _meta?: Record<string, unknown> | undefined;
}

interface CallExtra {
  signal: AbortSignal;
  requestId: ToolRequest['id'];
  sessionId?: string | undefined;
  authInfo?: ToolRequest['authInfo'];
  requestInfo?: { headers?: Record<string, string | string[] | undefined> } | undefined;
}

async function dispatch(registry: Registry, params: CallParams, extra: CallExtra): Promise<ToolResult> {
  const entry = registry.tools.get(params.name);
  const active = entry?.handle.enabled ? entry : undefined;
  const rawArgs = params.arguments ?? {};
  const validated = active
    ? await validateArguments(active.tool.inputSchema, rawArgs)
    : { verdict: { ok: true } as const, args: rawArgs };
  const ctx: ToolContext = {
    toolName: params.name,
    tool: active?.tool,
    args: validated.args,
    rawArgs,
    validation: validated.verdict,
    request: {
      id: extra.requestId,
      sessionId: extra.sessionId,
      authInfo: extra.authInfo,
      meta: params._meta,
      headers: extra.requestInfo?.headers,
      signal: extra.signal,
    },
    signal: extra.signal,
    startedAt: Date.now(),
    startTime: performance.now(),
    incidentId: undefined,
    decisions: [],
    state: {},
    logger: registry.logger,
  };
  let result: ToolResult;
  try {
    result = await (active ? active.run(ctx) : registry.runUnknown(ctx));
  } catch (error) {
    result = lastResort(ctx, error);
  }
  if (!active) {
    // The spec answers an unknown tool with a JSON-RPC error; the chain has seen (and audited) it.
    throw new McpError(RpcErrorCode.InvalidParams, `Unknown tool: ${params.name}`);
  }
  return result;
}

/** The chain's innermost step: answers refused calls, otherwise runs the handler. */
async function innermost(ctx: ToolContext): Promise<ToolResult> {
  const tool = ctx.tool;
  if (!tool) {
    return fail('not_found', `Unknown tool: ${ctx.toolName}.`, {
      hint: 'Call tools/list to see the tools this server offers.',
    });
  }
  if (!ctx.validation.ok) return invalidArgumentsResult(tool.name, ctx.validation.issues);
  let result: unknown;
  try {
    result = await tool.handler(ctx.args, ctx);
  } catch (error) {
    if (!isToolError(error)) throw error;
    if (error.cause === undefined) return toolErrorResult(error);
    // The model sees the ToolError; the log keeps what caused it, under the id the model sees.
    ctx.incidentId ??= newIncidentId();
    ctx.logger.error(
      {
        incidentId: ctx.incidentId,
        tool: tool.name,
        requestId: ctx.request.id,
        code: error.code,
        err: error,
      },
      'tool error with a cause',
    );
    return toolErrorResult(error, ctx.incidentId);
  }
  if (!isToolResult(result)) {
    throw new TypeError(`Tool ${tool.name} returned ${typeof result}; a handler must return ok() or fail()`);
  }
  if (tool.outputSchema && result.isError !== true) {
    const checked = await tool.outputSchema.safeParseAsync(result.structuredContent);
    if (!checked.success) {
      throw new TypeError(`Tool ${tool.name} returned data that does not match its output schema`, {
        cause: checked.error,
      });
    }
  }
  return result;
}

/** What the model sees when something escapes every middleware: a ToolError's own result or `internal`. */
function lastResort(ctx: ToolContext, error: unknown): ToolResult {
  if (isToolError(error)) return toolErrorResult(error, ctx.incidentId);
  const incidentId = ctx.incidentId ?? newIncidentId();
  ctx.incidentId = incidentId;
  ctx.logger.error(
    { incidentId, tool: ctx.toolName, requestId: ctx.request.id, err: error },
    'tool call failed',
  );
  return fail('internal', 'Internal error.', { incidentId });
}

import { createHash } from 'node:crypto';
import type { Attributes } from '@opentelemetry/api';
import type { ToolContext } from '@toolgate/core';
import type { OtelConfig } from './options.js';
import { clip, wellFormed } from './recorded-text.js';
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_JSONRPC_REQUEST_ID,
  ATTR_MCP_METHOD_NAME,
  ATTR_MCP_PROTOCOL_VERSION,
  ATTR_MCP_SESSION_ID,
  ATTR_NETWORK_TRANSPORT,
  ATTR_TOOLGATE_CALLER_ID,
  ATTR_TOOLGATE_CALLER_KIND,
  GEN_AI_OPERATION_EXECUTE_TOOL,
  MCP_METHOD_TOOLS_CALL,
} from './semconv.js';
import type { OtelRules } from './types.js';

// Client-controlled strings (tool name, request id, header) are capped so one request cannot bloat a span.
const MAX_ID_LENGTH = 256;
// A protocol version is a date like 2025-06-18; anything else in the header is ignored.
const PROTOCOL_VERSION = /^[A-Za-z0-9._-]{1,32}$/;

/** The span's attributes known when the call starts (given at start, so samplers see them). */
export function startAttributes(
  ctx: ToolContext,
  config: OtelConfig,
  rules: Readonly<OtelRules>,
): Attributes {
  const attributes: Attributes = {
    [ATTR_MCP_METHOD_NAME]: MCP_METHOD_TOOLS_CALL,
    [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_EXECUTE_TOOL,
    // A registered tool's name is the server's own. Any other name is what the model typed: it may quote
    // a secret it has seen, so it passes the secret patterns like every other recorded text (and is capped).
    [ATTR_GEN_AI_TOOL_NAME]:
      ctx.tool === undefined ? config.recorder.text(ctx.toolName, MAX_ID_LENGTH) : ctx.toolName,
    [ATTR_JSONRPC_REQUEST_ID]: clientText(String(ctx.request.id)),
    // The kind only: the id names a person or a client (personal data), so it is opt-in.
    [ATTR_TOOLGATE_CALLER_KIND]: ctx.caller.kind,
  };
  if (rules.recordCallerId) attributes[ATTR_TOOLGATE_CALLER_ID] = callerIdOf(ctx, rules);
  const sessionId = ctx.request.sessionId;
  if (typeof sessionId === 'string' && sessionId !== '' && rules.sessionId !== 'omit') {
    attributes[ATTR_MCP_SESSION_ID] =
      rules.sessionId === 'raw' ? clientText(sessionId) : sessionDigest(sessionId);
  }
  const version = protocolVersionOf(ctx) ?? config.protocolVersion;
  if (version !== undefined) attributes[ATTR_MCP_PROTOCOL_VERSION] = version;
  if (config.transport !== undefined) attributes[ATTR_NETWORK_TRANSPORT] = config.transport;
  return attributes;
}

// A session makes many calls: the last id's digest is kept rather than rehashed on each.
let lastSessionId: string | undefined;
let lastSessionDigest = '';

/** The session id's digest: 22 base64url characters of its SHA-256 (see `OtelRules.sessionId`). */
export function sessionDigest(sessionId: string): string {
  if (sessionId !== lastSessionId) {
    lastSessionDigest = createHash('sha256').update(sessionId).digest('base64url').slice(0, 22);
    lastSessionId = sessionId;
  }
  return lastSessionDigest;
}

/**
 * The caller's id as recorded. A session caller's id is `session:<id>`, and that id is what lets a request
 * continue the session: it follows the `sessionId` rule, so only `sessionId: 'raw'` records it as it is.
 */
function callerIdOf(ctx: ToolContext, rules: Readonly<OtelRules>): string {
  const { id, kind } = ctx.caller;
  if (kind === 'session' && rules.sessionId !== 'raw') {
    const sessionId = id.startsWith(SESSION_CALLER) ? id.slice(SESSION_CALLER.length) : id;
    return `${SESSION_CALLER}${sessionDigest(sessionId)}`;
  }
  return clientText(id);
}

const SESSION_CALLER = 'session:';

/** A string the client chose: capped, and well-formed so that no exporter batch is refused for it. */
function clientText(text: string): string {
  return clip(wellFormed(text), MAX_ID_LENGTH);
}

function protocolVersionOf(ctx: ToolContext): string | undefined {
  const header = ctx.request.headers?.['mcp-protocol-version'];
  const value = Array.isArray(header) ? header[0] : header;
  return typeof value === 'string' && PROTOCOL_VERSION.test(value) ? value : undefined;
}

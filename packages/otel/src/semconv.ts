// Every attribute, event and metric name this package writes, in one place. The MCP and gen_ai names are
// incubating (Development) in the OpenTelemetry semantic conventions, which advise copying such names
// into the instrumentation rather than importing an incubating package that may rename them.
// https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/

/** The MCP method: always `tools/call` here. */
export const ATTR_MCP_METHOD_NAME = 'mcp.method.name';
/** The MCP session id, when the transport has sessions. */
export const ATTR_MCP_SESSION_ID = 'mcp.session.id';
/** The MCP protocol version of the request (HTTP header `mcp-protocol-version`, or configured). */
export const ATTR_MCP_PROTOCOL_VERSION = 'mcp.protocol.version';
/** The JSON-RPC request id, as a string. */
export const ATTR_JSONRPC_REQUEST_ID = 'jsonrpc.request.id';
/** The JSON-RPC error code, when the request was answered with a JSON-RPC error (an unknown tool). */
export const ATTR_RPC_RESPONSE_STATUS_CODE = 'rpc.response.status_code';
/** The tool's name. */
export const ATTR_GEN_AI_TOOL_NAME = 'gen_ai.tool.name';
/** The GenAI operation: `execute_tool`. */
export const ATTR_GEN_AI_OPERATION_NAME = 'gen_ai.operation.name';
/** The call's arguments as JSON, secrets redacted (opt-in). */
export const ATTR_GEN_AI_TOOL_CALL_ARGUMENTS = 'gen_ai.tool.call.arguments';
/** The call's result as JSON, secrets redacted (opt-in). */
export const ATTR_GEN_AI_TOOL_CALL_RESULT = 'gen_ai.tool.call.result';
/** `pipe` (stdio) or `tcp` (HTTP). */
export const ATTR_NETWORK_TRANSPORT = 'network.transport';
/** A low-cardinality error class: `tool_error`, a thrown error's name or code, or a JSON-RPC code. */
export const ATTR_ERROR_TYPE = 'error.type';

/** The toolgate error code the model saw (`not_found`, `unavailable`, ...). */
export const ATTR_TOOLGATE_ERROR_CODE = 'toolgate.error.code';
/** The incident id the model saw, which keys the server log entry. */
export const ATTR_TOOLGATE_INCIDENT_ID = 'toolgate.incident.id';

/** The kind of caller core identified (`subject`, `client`, `local`, `session`, `anonymous`). */
export const ATTR_TOOLGATE_CALLER_KIND = 'toolgate.caller.kind';
/** The caller's id (`sub:<issuer>|<subject>`, ...): personal data, recorded only with `recordCallerId`. */
export const ATTR_TOOLGATE_CALLER_ID = 'toolgate.caller.id';

/** The span event for each policy decision of the call. */
export const EVENT_TOOLGATE_DECISION = 'toolgate.decision';
/** Who decided (`repeat-guard`, `circuit-breaker`, ...). */
export const ATTR_TOOLGATE_DECISION_BY = 'toolgate.decision.by';
/** What was decided (`short-circuit`, `open`, ...). */
export const ATTR_TOOLGATE_DECISION_ACTION = 'toolgate.decision.action';
/** Why, when the deciding middleware said. */
export const ATTR_TOOLGATE_DECISION_REASON = 'toolgate.decision.reason';

/** The span event for a thrown error, when `recordErrorStack` is on (the semconv `exception` event). */
export const EVENT_EXCEPTION = 'exception';
export const ATTR_EXCEPTION_TYPE = 'exception.type';
export const ATTR_EXCEPTION_MESSAGE = 'exception.message';
export const ATTR_EXCEPTION_STACKTRACE = 'exception.stacktrace';

/** The server-side duration histogram, in seconds. */
export const METRIC_MCP_SERVER_OPERATION_DURATION = 'mcp.server.operation.duration';
/** The spec's advised bucket boundaries for MCP operation durations, in seconds. */
export const MCP_DURATION_BUCKETS: readonly number[] = [
  0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300,
];

/** Values. */
export const MCP_METHOD_TOOLS_CALL = 'tools/call';
export const GEN_AI_OPERATION_EXECUTE_TOOL = 'execute_tool';
export const ERROR_TYPE_TOOL_ERROR = 'tool_error';
/** The semconv fallback for an error type (or a metric attribute) that cannot be named safely. */
export const OTHER = '_OTHER';

export { isWellFormedResult, type ScrubText } from './boundary.js';
export { type BoundedStore, boundStore } from './bounded-store.js';
export { callerScope, callerTag, callKey } from './call-key.js';
export { canonicalJson } from './canonical-json.js';
export {
  cancelledResult,
  classifyFailure,
  type FailureClass,
  isCallerCancel,
} from './classify-failure.js';
export { ERROR_CODE_DEFAULTS, ERROR_CODES, type ErrorCode, isErrorCode } from './codes.js';
export { afterSettled, callNext, compose } from './compose.js';
export {
  createDeadline,
  type Deadline,
  deadlineSignal,
  isAbortError,
  raceAbort,
  withDeadline,
} from './deadline.js';
export { defineTool } from './define-tool.js';
export { runDetached } from './detached.js';
export { isToolError, ToolError, type ToolErrorOptions } from './errors.js';
export { FAILURE_WITHHELD, MAX_FAILURE_CHARS, MAX_FAILURE_VALUES } from './failure-bound.js';
export {
  type CallerIdentity,
  type IdentifyCaller,
  identifyCaller,
  MAX_CLAIM_DEPTH,
  nestedPast,
  TENANT_CLAIMS,
} from './identity.js';
export { incidentOfThrow, isIncidentId, newIncidentId } from './incident.js';
export {
  createMemoryStore,
  isStoreFullError,
  type KeyValueStore,
  limitStore,
  type MemoryStoreOptions,
  StoreFullError,
  type StoreOperationOptions,
} from './key-value-store.js';
export { type LateOutcome, type LateOutcomeListener, onLateOutcome } from './late-outcome.js';
export { isLocalTransport, type LocalTransportRule } from './local-transport.js';
export { createLogThrottle, type LogThrottle, type LogThrottleOptions } from './log-throttle.js';
export { createSilentLogger, createStderrLogger, type LogLevel, type StderrLoggerOptions } from './logger.js';
export { CIRCULAR, type MapStringsOptions, mapStrings, nextFreeName, TRUNCATED } from './map-strings.js';
export { principalOf } from './principal.js';
export {
  createSecretKeyMatcher,
  createSecretPairTests,
  createSecretRedactor,
  DEFAULT_SECRET_KEYS,
  ESCAPED_CHARACTER,
  isNameFieldKey,
  REDACTED,
  type RedactSecretsOptions,
  redactSecrets,
  redactSecretsInText,
  SECRET_PATTERNS,
  type SecretPairTests,
  type SecretPattern,
  SPLIT_SECRET_OPENER,
  WHOLE_SECRET_KEYS,
} from './redact-secrets.js';
export { closesSilentRedisConnections, type RedisClientOptionsView } from './redis-options.js';
export { type RegisterToolsOptions, registerTools, withdrawClientRequests } from './register.js';
export {
  type ArgumentIssue,
  ERROR_META_KEY,
  type ErrorEnvelope,
  errorOf,
  type FailOptions,
  fail,
  isToolResult,
  mirrorsStructuredContent,
  type OkOptions,
  ok,
  outcomeOf,
  resultFromEnvelope,
  type ToolResult,
  toolErrorResult,
} from './result.js';
export type { ClientFeature, ClientRequestOptions, ServerAccess } from './server-access.js';
export { createSettleable, mapSettled, type Settleable } from './settled-steps.js';
export { deferSignal, type SignalSource } from './signal-slot.js';
export { type StoreCommand, StoreCommandError, type StoreCommandSummary } from './store-command-error.js';
export {
  isPassThrough,
  optInTools,
  type PerToolOptions,
  resolveToolOptions,
  type ToolOptionsResolver,
} from './tool-options.js';
export type {
  ArgumentVerdict,
  BindCaller,
  InferArgs,
  InputSchema,
  Logger,
  NextFn,
  PolicyDecision,
  ToolCallState,
  ToolContext,
  ToolDefinition,
  ToolHandler,
  ToolMiddleware,
  ToolRequest,
  ToolSpec,
} from './types.js';
export { MAX_LISTED_ISSUES, synchronousRefinements } from './validate.js';

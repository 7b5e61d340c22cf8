// Public face of @toolgate/audit: explicit named exports only.
export { createAudit } from './audit.js';
export { GENESIS_HASH } from './chain.js';
export { defaultChainId } from './chain-id.js';
export { readAuditKeyFile } from './chain-key.js';
export { createFileSink, type FileSinkOptions } from './file-sink.js';
export { createFunctionSink, type FunctionSinkOptions } from './function-sink.js';
export { createPostgresSink, type PostgresSinkOptions } from './postgres-sink.js';
export { AuditSinkError, isPermanentSinkError } from './sink-errors.js';
export { createStderrSink, type StderrSinkOptions } from './stderr-sink.js';
export type {
  ArgsMode,
  AuditBatch,
  AuditHead,
  AuditKey,
  AuditMiddleware,
  AuditOptions,
  AuditQueryable,
  AuditRecord,
  AuditRow,
  AuditSink,
  AuditStats,
  AuditToolOptions,
  ChainAnchor,
  ChainHead,
} from './types.js';
export {
  type ChainVerifyResult,
  type VerifyOptions,
  type VerifyResult,
  type VerifyTableOptions,
  verifyAuditFile,
  verifyAuditLines,
  verifyAuditTable,
} from './verify.js';

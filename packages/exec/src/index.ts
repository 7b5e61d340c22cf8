// Public face of @toolgate/exec: explicit named exports only (what a server author calls or types).
export {
  type ArgEntry,
  type ArgSpec,
  type ArgText,
  type ArgValue,
  type OptionOptions,
  option,
  type ValueOptions,
  value,
} from './arg-spec.js';
export { DEFAULT_EXEC_ENV } from './environment.js';
export { createExecSlots, type ExecSlots, type ExecSlotsOptions } from './exec-slots.js';
export { execTool } from './exec-tool.js';
export { safeExec } from './safe-exec.js';
export type {
  ExecOptions,
  ExecOutcome,
  ExecToolOptions,
  ExitCodeMapping,
  RunAs,
  SafeExecOptions,
} from './types.js';

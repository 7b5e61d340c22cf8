// Public face of @toolgate/redact-errors: explicit named exports only.
export { classifyError } from './classify.js';
export { createRedactErrors, redactErrors } from './redact-errors.js';
export { scrubErrorText } from './scrub.js';
export { ERROR_SCRUB_PATTERNS, INTERNAL_PATTERNS } from './scrub-patterns.js';
export type {
  ClassifyError,
  ErrorClassification,
  RedactErrors,
  RedactErrorsOptions,
  RedactErrorsRules,
  RedactErrorsToolOptions,
} from './types.js';

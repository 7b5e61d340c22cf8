/** The error codes a model can see. Each has a default hint telling the model what to do next. */
export const ERROR_CODES = [
  'invalid_argument',
  'permission_denied',
  'not_found',
  'unavailable',
  'timeout',
  'rate_limited',
  'repeated_call',
  'confirmation_required',
  'internal',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

interface CodeDefaults {
  readonly hint: string;
  readonly retryable: boolean;
}

/** Default hint and retryability per code; `fail()` uses these unless told otherwise. */
export const ERROR_CODE_DEFAULTS: Readonly<Record<ErrorCode, CodeDefaults>> = {
  invalid_argument: {
    hint: 'Fix the argument named in the message and call the tool again.',
    retryable: false,
  },
  permission_denied: {
    hint: 'This call is not allowed for this user. Do not retry; tell the user it cannot be done here.',
    retryable: false,
  },
  not_found: {
    hint: 'Nothing matches. Check the identifier or try other criteria; do not repeat the same call.',
    retryable: false,
  },
  unavailable: {
    hint: 'A service this tool depends on is unavailable. Do not retry now; tell the user and try once later.',
    retryable: true,
  },
  timeout: {
    hint: 'The call took too long. Retry once, with narrower arguments if possible.',
    retryable: true,
  },
  rate_limited: {
    hint: 'Too many calls. Wait for retryAfterMs before calling again.',
    retryable: true,
  },
  repeated_call: {
    hint: 'This exact call was already answered and the result has not changed. Change the arguments or answer the user.',
    retryable: false,
  },
  confirmation_required: {
    hint: 'A person must confirm this change first. Show the user the request in the message and ask; only if they agree, call again with the same arguments and the confirmation named here. Never confirm on their behalf.',
    retryable: true,
  },
  internal: {
    hint: 'An unexpected error occurred. Do not retry; tell the user and quote the incident id.',
    retryable: false,
  },
};

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}

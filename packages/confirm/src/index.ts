export { CONFIRM_META, type ConfirmMiddleware, createConfirm, DECLINED_HINT } from './confirm.js';
export { CONFIRMATION_ARGUMENT, CONFIRMATION_META } from './confirmation.js';
export { confirmationArgument } from './confirmation-argument.js';
export type {
  ConfirmOptions,
  ConfirmToolOptions,
  ConfirmUrlOptions,
  PendingUrlConfirmation,
} from './options.js';
export type { UrlAnswer, UrlAnswerOutcome, UrlConfirmationCall } from './url-mode.js';

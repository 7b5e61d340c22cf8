import { type ArgumentIssue, ToolError } from '@toolgate/core';

/** A refused argv element: an `invalid_argument` ToolError that names the refused field. */
export class ArgumentRefusal extends ToolError {
  declare readonly fields: ArgumentIssue[];

  constructor(message: string, hint: string, field: ArgumentIssue) {
    super('invalid_argument', message, { hint, retryable: false, fields: [field] });
    this.name = 'ArgumentRefusal';
  }
}

import { type BindCaller, ToolError } from '@toolgate/core';

/**
 * The `bind` of a customer-scoped tool: the caller's customer id from its token (`customerId`), or
 * the call is refused. The tenant shapes its own claims, so anything but one positive whole number
 * (a list, a string, an object, a fraction) is refused here, never passed on to a query.
 */
export function bindCustomerId(customerScoped: boolean): BindCaller | undefined {
  if (!customerScoped) return undefined;
  return (request) => ({ customerId: customerIdOf(request) });
}

/**
 * The caller's customer id from its token, checked as above: every scoped tool (the SQL tools' `bind`
 * too) refuses the same claims with the same answer, so "43" or -1 is no customer anywhere.
 */
export function customerIdOf(request: Parameters<BindCaller>[0]): number {
  const customerId = request.authInfo?.extra?.customerId;
  if (!isCustomerId(customerId)) {
    throw new ToolError('permission_denied', 'This token is not tied to a customer.');
  }
  return customerId;
}

/** The largest id the `customers.customer_id` column holds (a PostgreSQL integer). */
const MAX_CUSTOMER_ID = 2_147_483_647;

/**
 * A customer id a token may name: a whole number the column can hold. A larger one (2^31, 2^53 - 1)
 * would reach PostgreSQL and fail there, a different answer from each tool (`internal`, or
 * `unavailable` "call again", which a model would retry forever) instead of this one refusal.
 */
function isCustomerId(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 1 && (value as number) <= MAX_CUSTOMER_ID;
}

/**
 * The `bind` of a tool that reads no customer's data but shares the customer-scoped tools' per-caller
 * budget (search_docs): the caller's customer id when its token names a valid one, else nothing (the
 * tool still serves it). Per-caller keys are the identity plus the bindings, so a tool binding nothing
 * would count the same person's calls apart from the scoped tools', and give each person the budget
 * twice (rate-limit's README: tools under one `caller` limit bind the same values).
 */
export function bindCustomerIdIfAny(customerScoped: boolean): BindCaller | undefined {
  if (!customerScoped) return undefined;
  return (request) => {
    const customerId = request.authInfo?.extra?.customerId;
    return isCustomerId(customerId) ? { customerId } : {};
  };
}

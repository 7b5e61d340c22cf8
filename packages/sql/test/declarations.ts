import type { SqlQueryDeclaration, SqlToolOptions } from '../src/index.js';
import { SCHEMA } from './engines.js';

export const STATUSES = ['pending', 'paid', 'shipped', 'delivered', 'cancelled'] as const;

/** The mission's example: search_orders(status, days, customer_email prefix, sort, limit). */
export const searchOrdersDeclaration = {
  from: { schema: SCHEMA, table: 'orders' },
  columns: ['id', 'status', { column: 'customer_email', as: 'email' }, 'total_cents', 'created_at'],
  filters: {
    status: { kind: 'enum', values: STATUSES, description: 'Only orders in this status.' },
    days: {
      kind: 'withinDays',
      column: 'created_at',
      max: 365,
      default: 30,
      description: 'Only orders placed within the last N days.',
    },
    customer_email: {
      kind: 'prefix',
      maxLength: 100,
      description: 'Only orders whose customer email starts with this text.',
    },
  },
  sort: {
    keys: { created_at: 'created_at', total: 'total_cents' },
    default: 'created_at_desc',
    tiebreaker: 'id',
  },
  limit: { default: 20, max: 50 },
} satisfies SqlQueryDeclaration;

export function searchOrdersOptions(
  db: SqlToolOptions['db'],
  from: SqlToolOptions['from'] = searchOrdersDeclaration.from,
): SqlToolOptions {
  return {
    ...searchOrdersDeclaration,
    from,
    name: 'search_orders',
    description:
      'Search orders by status, age and customer email. Use for lists of orders; not for one order by id.',
    db,
    noun: 'orders',
  };
}

/** Every other filter kind, over the same table. */
export const exploreOrdersDeclaration = {
  from: { schema: SCHEMA, table: 'orders' },
  columns: ['id'],
  filters: {
    id: { kind: 'equals', type: 'integer', min: 1, max: 1_000_000, description: 'One order id.' },
    email: {
      kind: 'equals',
      type: 'string',
      column: 'customer_email',
      maxLength: 100,
      description: 'Exact email.',
    },
    statuses: { kind: 'oneOf', column: 'status', values: STATUSES, description: 'Any of these statuses.' },
    total: {
      kind: 'range',
      type: 'integer',
      column: 'total_cents',
      min: 0,
      max: 100_000,
      description: 'Order total in cents',
    },
    placed: {
      kind: 'range',
      type: 'date',
      column: 'placed_on',
      min: '2020-01-01',
      max: '2030-12-31',
      description: 'Day the order was placed',
    },
    note: { kind: 'contains', maxLength: 100, description: 'Text inside the order note.' },
    note_ci: {
      kind: 'contains',
      column: 'note',
      caseInsensitive: true,
      description: 'Text inside the note, any case.',
    },
  },
  sort: { keys: ['id'], default: 'id_asc' },
  limit: { default: 10, max: 10 },
} satisfies SqlQueryDeclaration;

/** Orders of the signed-in customer only: customer_id comes from the token, never the arguments. */
export const myOrdersDeclaration = {
  from: { schema: SCHEMA, table: 'orders' },
  columns: ['id', 'status'],
  filters: {
    status: { kind: 'enum', values: STATUSES, description: 'Only orders in this status.' },
  },
  bind: { customer_id: (ctx) => ctx.request.authInfo?.extra?.customerId as number | undefined },
  sort: { keys: ['id'], directions: ['asc'], default: 'id_asc' },
  limit: { default: 10, max: 10 },
} satisfies SqlQueryDeclaration;

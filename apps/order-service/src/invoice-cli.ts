#!/usr/bin/env node
// The bundled invoice renderer that render_invoice runs through @toolgate/exec: argv in, text out.
// It never touches the database or the network; everything it prints comes from its arguments.
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    'order-id': { type: 'string' },
    customer: { type: 'string' },
    status: { type: 'string' },
    'total-cents': { type: 'string' },
    currency: { type: 'string' },
    items: { type: 'string' },
    'created-at': { type: 'string' },
  },
  strict: true,
});

const orderId = values['order-id'];
if (!orderId || !/^\d{16}$/.test(orderId)) {
  process.stderr.write('invoice: --order-id must be a 16-digit order id\n');
  process.exit(2);
}
const cents = Number.parseInt(values['total-cents'] ?? '0', 10);
const total = `${(cents / 100).toFixed(2)} ${values.currency ?? 'USD'}`;
const lines = [
  'INVOICE',
  `Order:    ${orderId}`,
  `Customer: ${values.customer ?? '-'}`,
  `Placed:   ${values['created-at'] ?? '-'}`,
  `Status:   ${values.status ?? '-'}`,
  `Items:    ${values.items ?? '-'}`,
  `Total:    ${total}`,
];
process.stdout.write(`${lines.join('\n')}\n`);

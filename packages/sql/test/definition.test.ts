import { describe, expect, it } from 'vitest';
import { identifierProblem } from '../src/identifiers.js';
import { type Queryable, type SqlToolOptions, sqlTool } from '../src/index.js';
import { searchOrdersOptions } from './declarations.js';

const neverCalled: Queryable = {
  engine: 'none',
  readOnly: () => Promise.reject(new Error('no SQL runs at definition time')),
};

function define(change: Partial<SqlToolOptions>): () => unknown {
  return () => sqlTool({ ...searchOrdersOptions(neverCalled), ...change });
}

describe('sqlTool: identifiers are checked when the tool is defined', () => {
  it.each([
    ['orders; DROP TABLE orders', 'must match'],
    ['Orders', 'must match'],
    ['orders"', 'must match'],
    ['or-ders', 'must match'],
    ['1orders', 'must match'],
    ['', 'must match'],
    ['select', 'reserved SQL key word'],
    ['user', 'reserved SQL key word'],
    ['pg_class', 'system object'],
    ['ctid', 'system object'],
    ['information_schema', 'system object'],
    ['a'.repeat(64), 'longer than 63'],
  ])('refuses %j (%s)', (name, reason) => {
    expect(identifierProblem(name)).toContain(reason);
    expect(define({ from: name })).toThrow(reason);
    expect(define({ from: { schema: name, table: 'orders' } })).toThrow(
      `from.schema: identifier ${JSON.stringify(name)}`,
    );
    expect(define({ columns: ['id', name] })).toThrow(`columns[1]: identifier ${JSON.stringify(name)}`);
    expect(define({ columns: [{ column: 'id', as: name }] })).toThrow(`columns[0].as: identifier`);
    expect(define({ sort: { keys: { id: name }, default: 'id_asc' } })).toThrow(`sort.keys.id: identifier`);
    expect(define({ filters: { x: { kind: 'prefix', column: name, description: 'x' } } })).toThrow(
      'filters.x.column: identifier',
    );
    expect(define({ bind: { x: { column: name, value: () => 1 } } })).toThrow('bind.x: identifier');
  });

  it('refuses a bind match other than text or column', () => {
    for (const match of ['loose', 'exact', true, null]) {
      expect(define({ bind: { x: { value: () => 1, match: match as 'text' } } })).toThrow(
        "sqlTool(search_orders): bind.x.match must be 'text' or 'column'",
      );
    }
    expect(define({ bind: { x: { value: () => 1, match: 'column' } } })).not.toThrow();
  });

  it('accepts a plain snake_case name', () => {
    expect(identifierProblem('customer_email')).toBeUndefined();
  });

  it('refuses declarations that do not make sense', () => {
    expect(define({ columns: [] })).toThrow('columns must list at least one column');
    expect(define({ columns: ['id', { column: 'status', as: 'id' }] })).toThrow(
      'the output key id appears twice',
    );
    expect(define({ columns: ['id', '__proto__'] })).toThrow(
      'columns[1]: the output key __proto__ cannot be a property of a row',
    );
    expect(define({ columns: [{ column: 'id', as: '__proto__' }] })).toThrow(
      'columns[0]: the output key __proto__ cannot be a property of a row',
    );
    expect(define({ columns: [{ column: '__proto__', as: 'proto' }] })).not.toThrow();
    expect(define({ columns: [{ column: 'id', as: '_toolgate_total' }] })).toThrow(
      'reserved for the total count',
    );
    expect(define({ limit: { default: 51, max: 50 } })).toThrow('limit.default must not exceed limit.max');
    expect(define({ limit: { default: 0, max: 50 } })).toThrow('limit.default must be a positive integer');
    expect(define({ sort: { keys: ['id'], default: 'created_at_desc' } })).toThrow(
      'sort.default must be one of id_asc, id_desc',
    );
    expect(define({ filters: { limit: { kind: 'prefix', description: 'x' } } })).toThrow(
      'not be sort or limit',
    );
    expect(define({ filters: { Status: { kind: 'prefix', description: 'x' } } })).toThrow(
      'argument name must match',
    );
    expect(define({ filters: { x: { kind: 'prefix', description: ' ' } } })).toThrow(
      'a description is required',
    );
    expect(define({ filters: { x: { kind: 'raw', description: 'x' } as never } })).toThrow(
      'unknown filter kind "raw"',
    );
    expect(define({ filters: { x: { kind: 'enum', values: [] as never, description: 'x' } } })).toThrow(
      'values must be a non-empty list',
    );
    expect(
      define({ filters: { x: { kind: 'enum', values: ['a'], default: 'b', description: 'x' } } }),
    ).toThrow('the default "b" is not one of the values');
    expect(
      define({ filters: { x: { kind: 'range', type: 'integer', min: 10, max: 1, description: 'x' } } }),
    ).toThrow('min must not exceed max');
    expect(
      define({
        filters: { x: { kind: 'range', type: 'date', min: '2024-1-1', max: '2025-01-01', description: 'x' } },
      }),
    ).toThrow('a date range needs min <= max as YYYY-MM-DD strings');
    expect(
      define({ filters: { x: { kind: 'withinDays', max: 30, default: 31, description: 'x' } } }),
    ).toThrow('the default must be an integer from 1 to max');
    expect(
      define({
        filters: { customer_id: { kind: 'equals', type: 'integer', description: 'x' } },
        bind: { customer_id: () => 1 },
      }),
    ).toThrow('a filter may not share its name with a bound parameter');
    expect(
      define({
        filters: { total: { kind: 'range', type: 'integer', min: 0, max: 10, description: 'x' } },
        bind: { min_total: () => 1 },
      }),
    ).toThrow('the argument min_total would share its name with a bound parameter');
    // Every object inherits these: a missing argument or binding would read the prototype's value.
    for (const name of ['constructor', '__proto__']) {
      expect(define({ filters: { [name]: { kind: 'prefix', column: 'status', description: 'x' } } })).toThrow(
        'argument name must match',
      );
      expect(define({ bind: { [name]: { column: 'customer_id', value: () => 1 } } })).toThrow(
        `bind.${name}: the name is a property every object inherits`,
      );
    }
    expect(define({ timeoutMs: 0 })).toThrow('timeoutMs must be a positive integer');
    // PostgreSQL refuses a statement_timeout past INT_MAX ms: such a tool would fail every call.
    expect(define({ timeoutMs: 2_147_483_648 })).toThrow('no larger than 2147483647');
    expect(define({ timeoutMs: 2_147_483_647 })).not.toThrow();
    expect(define({ db: {} as Queryable })).toThrow('db must be a Queryable');
    expect(define({ name: 'search orders' })).toThrow('invalid tool name');
  });
});

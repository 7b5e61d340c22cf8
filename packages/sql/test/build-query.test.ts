import { ToolError } from '@toolgate/core';
import { describe, expect, it } from 'vitest';
import { buildQuery } from '../src/build-query.js';
import { escapeLike } from '../src/escape-like.js';
import { exploreOrdersDeclaration, myOrdersDeclaration, searchOrdersDeclaration } from './declarations.js';
import { SCHEMA } from './engines.js';

// The declarations' table, each name quoted (the schema is the worker's: toolgate_sql_test_<n>).
const T = `"${SCHEMA}"."orders"`;
const SEARCH_COLUMNS = '"id", "status", "customer_email" AS "email", "total_cents", "created_at"';

function statement(columns: string, where: string, orderBy: string, limitIndex: number): string {
  const w = where === '' ? '' : ` WHERE ${where}`;
  return `SELECT ${columns}, (SELECT count(*) FROM ${T}${w}) AS "_toolgate_total" FROM ${T}${w}${orderBy} LIMIT $${limitIndex}`;
}

describe('buildQuery: search_orders', () => {
  it('the defaults: days window, newest first with the id tiebreaker, the default limit', () => {
    expect(buildQuery(searchOrdersDeclaration, { days: 30 })).toEqual({
      text: statement(
        SEARCH_COLUMNS,
        '"created_at" >= now() - make_interval(days => $1)',
        ' ORDER BY "created_at" DESC, "id" DESC',
        2,
      ),
      values: [30, 20],
      boundValues: 0,
      limit: 20,
      requestedLimit: undefined,
    });
  });

  it('every filter present, numbered in declaration order, with the prefix escaped for LIKE', () => {
    const built = buildQuery(searchOrdersDeclaration, {
      status: 'shipped',
      days: 7,
      customer_email: "50%_a\\b' OR 1=1 --",
      sort: 'total_asc',
      limit: 5,
    });
    expect(built.text).toBe(
      statement(
        SEARCH_COLUMNS,
        `"status" = $1 AND "created_at" >= now() - make_interval(days => $2) AND "customer_email" LIKE $3 ESCAPE E'\\\\'`,
        ' ORDER BY "total_cents" ASC, "id" ASC',
        4,
      ),
    );
    expect(built.values).toEqual(['shipped', 7, "50\\%\\_a\\\\b' OR 1=1 --%", 5]);
  });

  it('no filter at all: no WHERE clause', () => {
    expect(buildQuery(searchOrdersDeclaration, {}).text).toBe(
      statement(SEARCH_COLUMNS, '', ' ORDER BY "created_at" DESC, "id" DESC', 1),
    );
  });

  it('clamps the limit whatever the arguments say', () => {
    expect(buildQuery(searchOrdersDeclaration, { limit: 10_000 })).toMatchObject({
      limit: 50,
      requestedLimit: 10_000,
      values: [50],
    });
    expect(buildQuery(searchOrdersDeclaration, { limit: 0 })).toMatchObject({
      limit: 1,
      requestedLimit: 0,
      values: [1],
    });
    expect(buildQuery(searchOrdersDeclaration, { limit: -5 })).toMatchObject({
      limit: 1,
      requestedLimit: -5,
    });
    expect(buildQuery(searchOrdersDeclaration, { limit: 7.9 })).toMatchObject({
      limit: 7,
      requestedLimit: undefined,
    });
    expect(buildQuery(searchOrdersDeclaration, { limit: '100' })).toMatchObject({ limit: 20, values: [20] });
    expect(buildQuery(searchOrdersDeclaration, { limit: Number.POSITIVE_INFINITY })).toMatchObject({
      limit: 20,
    });
  });

  it('an unknown sort option falls back to the default instead of reaching SQL', () => {
    expect(buildQuery(searchOrdersDeclaration, { sort: 'id; DROP TABLE orders' }).text).toContain(
      ' ORDER BY "created_at" DESC, "id" DESC LIMIT $1',
    );
  });

  it('reuses one statement text per shape', () => {
    const first = buildQuery(searchOrdersDeclaration, { status: 'paid' });
    const second = buildQuery(searchOrdersDeclaration, { status: 'shipped' });
    expect(second.text).toBe(first.text);
    expect(second.values).toEqual(['shipped', 20]);
  });
});

describe('buildQuery: every other filter kind', () => {
  it('equals, oneOf, integer and date ranges, contains and case-insensitive contains', () => {
    const built = buildQuery(exploreOrdersDeclaration, {
      id: 3,
      email: 'bob@example.com',
      statuses: ['paid', 'shipped'],
      min_total: 100,
      max_total: 5000,
      min_placed: '2024-01-02',
      max_placed: '2024-01-05',
      note: 'gift_',
      note_ci: 'DOOR',
    });
    expect(built.text).toBe(
      statement(
        '"id"',
        [
          '"id" = $1',
          '"customer_email" = $2',
          '"status" = ANY($3)',
          '"total_cents" >= $4',
          '"total_cents" <= $5',
          '"placed_on" >= $6::date',
          '"placed_on" < ($7::date + 1)',
          `"note" LIKE $8 ESCAPE E'\\\\'`,
          `"note" ILIKE $9 ESCAPE E'\\\\'`,
        ].join(' AND '),
        ' ORDER BY "id" ASC',
        10,
      ),
    );
    expect(built.values).toEqual([
      3,
      'bob@example.com',
      ['paid', 'shipped'],
      100,
      5000,
      '2024-01-02',
      '2024-01-05',
      '%gift\\_%',
      '%DOOR%',
      10,
    ]);
  });

  it('one bound of a range alone', () => {
    const built = buildQuery(exploreOrdersDeclaration, { max_total: 999 });
    expect(built.text).toBe(statement('"id"', '"total_cents" <= $1', ' ORDER BY "id" ASC', 2));
    expect(built.values).toEqual([999, 10]);
  });
});

describe('buildQuery: bound parameters', () => {
  it('puts the bound value first, as a parameter', () => {
    const built = buildQuery(myOrdersDeclaration, { status: 'paid' }, { customer_id: 4 });
    expect(built.text).toBe(
      statement('"id", "status"', '"customer_id" = $1 AND "status" = $2', ' ORDER BY "id" ASC', 3),
    );
    expect(built.values).toEqual([4, 'paid', 10]);
    // $1 came from the caller: a database error naming it is the credentials' fault.
    expect(built.boundValues).toBe(1);
  });

  it('a list binding becomes = ANY($n)', () => {
    const declaration = {
      ...myOrdersDeclaration,
      bind: { customer_id: { value: () => [1, 2], list: true } },
    };
    const built = buildQuery(declaration, {}, { customer_id: [1, 2] });
    expect(built.text).toBe(statement('"id", "status"', '"customer_id" = ANY($1)', ' ORDER BY "id" ASC', 2));
    expect(built.values).toEqual([[1, 2], 10]);
  });

  it('a binding whose column compares looser than its text also compares the column’s text in the C collation', () => {
    const built = buildQuery(myOrdersDeclaration, { status: 'paid' }, { customer_id: 4 }, [true]);
    expect(built.text).toBe(
      statement(
        '"id", "status"',
        '"customer_id" = $1 AND CAST("customer_id" AS text) COLLATE "C" = $2 AND "status" = $3',
        ' ORDER BY "id" ASC',
        4,
      ),
    );
    // The claim's text as the driver spells the value; both values came from the caller.
    expect(built.values).toEqual([4, '4', 'paid', 10]);
    expect(built.boundValues).toBe(2);
    const listed = { ...myOrdersDeclaration, bind: { customer_id: { value: () => [1, '2'], list: true } } };
    const list = buildQuery(listed, {}, { customer_id: [1, '2'] }, [true]);
    expect(list.text).toBe(
      statement(
        '"id", "status"',
        '"customer_id" = ANY($1) AND CAST("customer_id" AS text) COLLATE "C" = ANY($2)',
        ' ORDER BY "id" ASC',
        3,
      ),
    );
    expect(list.values).toEqual([[1, '2'], ['1', '2'], 10]);
    // The same declaration, a column whose equality is its text's: the plain statement, cached apart.
    expect(buildQuery(listed, {}, { customer_id: [1, '2'] }, [false]).text).toBe(
      statement('"id", "status"', '"customer_id" = ANY($1)', ' ORDER BY "id" ASC', 2),
    );
  });

  it('a list for a binding not declared a list, or a value of the wrong type, refuses with permission_denied', () => {
    for (const bound of [
      { customer_id: [1, 2] },
      { customer_id: { id: 1 } as never },
      { customer_id: Number.NaN },
      { customer_id: 'a\u0000b' },
      { customer_id: 2 ** 53 + 2 },
    ]) {
      expect(() => buildQuery(myOrdersDeclaration, {}, bound)).toThrow(
        "This tool cannot use the caller's credentials.",
      );
    }
  });

  it('a missing binding refuses with permission_denied; an argument of its name is ignored', () => {
    for (const bound of [{}, { customer_id: undefined }, { customer_id: null }, { customer_id: [] }]) {
      expect(() => buildQuery(myOrdersDeclaration, { customer_id: 2 }, bound)).toThrow(ToolError);
    }
    expect(() => buildQuery(myOrdersDeclaration, {}, {})).toThrow('This tool needs an authenticated caller.');
    expect(buildQuery(myOrdersDeclaration, { customer_id: 2 }, { customer_id: 1 }).values).toEqual([1, 10]);
  });

  it('an optional binding that yields nothing drops its filter', () => {
    const declaration = {
      ...myOrdersDeclaration,
      bind: { customer_id: { value: () => undefined, optional: true } },
    };
    expect(buildQuery(declaration, {}, {}).text).toBe(
      statement('"id", "status"', '', ' ORDER BY "id" ASC', 1),
    );
  });
});

describe('escapeLike', () => {
  it('escapes the backslash, percent and underscore, nothing else', () => {
    expect(escapeLike('a\\b%c_d')).toBe('a\\\\b\\%c\\_d');
    expect(escapeLike('o\'hara "x" [y] *')).toBe('o\'hara "x" [y] *');
  });
});

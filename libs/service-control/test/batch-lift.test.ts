// The prepared form of a batched statement (decision 0194), lifted by one indexOf scan since decision 0480: the same
// answer as the regular expression it replaced — the marked values become $1…$n in order, and a statement with a
// stray mark character or a separator outside its values is not prepared — on written cases and on random statements.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lift, lit } from '../src/adapter/postgresql/batch.js';

const M0 = '\uE000';
const M1 = '\uE001';

/** The lifting of decision 0194 as it was (a replace with a callback), the model the scan must agree with. */
const model = (sql: string): { template: string; args: string[] } | null => {
  if (!/^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i.test(sql)) return null;
  const args: string[] = [];
  const template = sql.replace(/\uE000([^\uE000\uE001]*)\uE001/g, (_m, literal: string) => {
    args.push(literal);
    return `$${args.length}`;
  });
  if (template.includes(';') || template.includes(M0) || template.includes(M1)) return null;
  return { template, args };
};

const shape = (sql: string) => {
  const l = lift(sql);
  return l === null ? null : { template: l.template, args: [...l.args] };
};

describe('batch statement lifting (decisions 0194, 0480)', () => {
  it('M6-18 the marked values of a statement become its parameters in order, casts and text kept', () => {
    const sql = `SELECT * FROM t WHERE a = ${lit.bytea(new Uint8Array([1, 2]))} AND b = ${lit.num(7n)} AND c = ${lit.text("x;'y")}`;
    expect(shape(sql)).toEqual({
      template: 'SELECT * FROM t WHERE a = $1::bytea AND b = $2 AND c = $3::text',
      args: ["'\\x0102'", '7', "'x;''y'"],
    });
    expect(lift(sql)?.name).toMatch(/^sc_[0-9a-f]{20}$/);
    expect(lift('UPDATE t SET a = 1')).toMatchObject({ template: 'UPDATE t SET a = 1', args: [] });
  });

  it('M6-18 a statement that cannot be prepared is sent as it is: not DML, two statements, stray or unclosed marks', () => {
    for (const sql of [
      'BEGIN',
      `SET LOCAL x = ${lit.num(1)}`,
      `SELECT 1; SELECT ${lit.num(2)}`,
      `SELECT ${M0}1`,
      `SELECT 1${M1}`,
      `SELECT ${M0}${M0}1${M1}`,
      `SELECT ${M0}1${M1}${M1}`,
    ])
      expect(lift(sql)).toBeNull();
  });

  it('M6-18 on random statements of marks, separators and text the scan answers as the regular expression did', () => {
    const piece = fc.constantFrom('SELECT ', 'a', ' ', ';', "'", M0, M1, '1', '$', 'x::bytea');
    const value = fc.constantFrom(lit.num(3), lit.text('a;b'), lit.bytea(new Uint8Array([9])), `${M0}${M1}`);
    const statement = fc.array(fc.oneof(piece, value), { maxLength: 24 }).map((ps) => ps.join(''));
    fc.assert(
      fc.property(fc.boolean(), statement, (select, s) => {
        const sql = select ? `SELECT ${s}` : s;
        expect(shape(sql)).toEqual(model(sql));
      }),
      { numRuns: 2000 },
    );
  });
});

import { Either, Schema } from 'effect';
import { describe, expect, it } from 'vitest';
import { describeJsonError, describeParseError } from './errors.js';

const Login = Schema.Struct({ name: Schema.String, password: Schema.String });
const fail = (value: unknown) => {
  const r = Schema.decodeUnknownEither(Login, { onExcessProperty: 'error' })(value);
  if (Either.isRight(r)) throw new Error('decoded');
  return describeParseError(r.left);
};

describe('TC-37 body errors say what is wrong, never the values sent', () => {
  it('a wrong type names the path and the expectation, not the value', () => {
    const message = fail({ name: 'ann', password: ['s3cret-value'] });
    expect(message).toBe('"password": Expected string');
    expect(fail(['s3cret-value'])).not.toContain('s3cret-value');
  });

  it('missing and unexpected fields are still named', () => {
    expect(fail({ name: 'ann' })).toBe('"password": is missing');
    expect(fail({ name: 'ann', password: 'x', role: 's3cret-value' })).toMatch(/^"role": is unexpected/);
  });

  it('a JSON syntax error keeps the position and drops the text V8 quotes', () => {
    let error: unknown;
    try {
      JSON.parse('s3cret-value');
    } catch (e) {
      error = e;
    }
    expect((error as Error).message).toContain('s3cret-value'); // what V8 would have echoed
    expect(describeJsonError(error)).toBe('not valid JSON');
    try {
      JSON.parse('{"password":"s3cret-value"');
    } catch (e) {
      error = e;
    }
    expect(describeJsonError(error)).toMatch(/^not valid JSON at position \d+$/);
  });
});

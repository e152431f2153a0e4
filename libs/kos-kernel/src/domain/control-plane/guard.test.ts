// The request guard's pure rules (issue 17, first section; decision 0200).
import { describe, expect, it } from 'vitest';
import { isJsonContentType } from './guard.js';

describe('hole 1: writes require Content-Type: application/json (rule)', () => {
  it('application/json with or without parameters, any case, is JSON; nothing else is', () => {
    for (const ok of [
      'application/json',
      'application/json; charset=utf-8',
      'Application/JSON;charset=UTF-8',
      ' application/json ',
    ])
      expect(isJsonContentType(ok)).toBe(true);
    for (const no of [
      undefined,
      '',
      'text/plain',
      'text/plain;charset=UTF-8',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/jsonx',
      'application/json-seq',
      'text/json',
    ])
      expect(isJsonContentType(no)).toBe(false);
  });
});

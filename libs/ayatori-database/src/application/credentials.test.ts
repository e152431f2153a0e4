// The credential programs walked with HTTP facts (status + body), the way the seed's httptest cases feed the
// adapter. The real OpenBao dev server cases (AY-66…70) need the adapter and stay "not yet".
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { ApplicationCredential, makeCredentialScope } from '../domain/credential-location.js';
import type { Endpoint } from '../domain/instance.js';
import {
  CAS_MISMATCH,
  type CredentialAction,
  createCredentialProgram,
  type HttpFact,
  readCredentialProgram,
} from './credentials.js';
import { walk } from './program.js';

const scope = Either.getOrThrow(makeCredentialScope('secret', 'applications'));
const endpoint: Endpoint = {
  host: 'postgres.example.test',
  hostAddr: '192.0.2.10',
  port: 5432,
  managementDatabase: 'app',
  tlsMode: 'verify-full',
};
const CANARY = 'AYATORI-TEST-ONLY-application-password';
const credential = Either.getOrThrow(ApplicationCredential.make('app', CANARY, 'app', endpoint));
const data = credential.secretData();

const ok = (body: unknown): HttpFact => ({ _tag: 'Response', status: 200, body });
const created = ok({ data: { version: 1, created_time: 'now' } });
const stored = (version: unknown = 1, values: unknown = data): HttpFact =>
  ok({ data: { data: values, metadata: { version } } });

const create = (put: HttpFact, get: HttpFact = stored(), path = 'applications/database-uid') =>
  walk(createCredentialProgram(scope, path, credential), (action: CredentialAction) =>
    action._tag === 'Put' ? put : get,
  );
const errorOf = (r: Either.Either<unknown, { message: string }>) => (Either.isLeft(r) ? r.left.message : 'ok');

describe('credential create program', () => {
  it('one create-only PUT (cas 0) to <mount>/data/<path>, then one GET read-back; success only if version 1 and equal data', () => {
    const { actions, result } = create(created);
    expect(actions).toEqual([
      { _tag: 'Put', route: 'secret/data/applications/database-uid', body: { data, options: { cas: 0 } } },
      { _tag: 'Get', route: 'secret/data/applications/database-uid' },
    ]);
    expect(Either.isRight(result)).toBe(true);
    // the answer is the credential parsed from the read-back (decision 0313), equal to the one written
    expect(Either.map(result, (c) => c.secretData())).toEqual(Either.right(data));
  });

  it.each<[string, HttpFact]>([
    ['read-back failure 503', { _tag: 'Response', status: 503, body: { errors: ['sealed'] } }],
    ['read-back version 2', stored(2)],
    ['read-back with a changed password', stored(1, { ...data, password: 'other' })],
    ['read-back without metadata', ok({ data: { data } })],
    ['read-back lost', { _tag: 'NoResponse' }],
  ])('AY-63 (rule): %s → Uncertain after exactly one write', (_name, get) => {
    const { actions, result } = create(created, get);
    expect(actions.filter((a) => a._tag === 'Put')).toHaveLength(1);
    expect(errorOf(result)).toBe('credential creation outcome is uncertain; manual resolution required');
  });

  it.each<[string, HttpFact]>([
    [
      'HTTP 500 whose body holds secrets',
      { _tag: 'Response', status: 500, body: { errors: [`token AYATORI-TEST-ONLY-bao-token ${CANARY}`] } },
    ],
    ['a lost write response (502 from a proxy)', { _tag: 'Response', status: 502, body: undefined }],
    ['no response at all', { _tag: 'NoResponse' }],
    ['a 200 without version', ok({ data: {} })],
    ['a 200 with version 2', ok({ data: { version: 2 } })],
    [
      'a 400 whose CAS message is only a substring',
      { _tag: 'Response', status: 400, body: { errors: [`${CAS_MISMATCH}!`] } },
    ],
  ])('AY-64/AY-67 (rule): %s → Uncertain with one request, nothing leaked', (_name, put) => {
    const { actions, result } = create(put);
    expect(actions).toHaveLength(1);
    expect(errorOf(result)).toBe('credential creation outcome is uncertain; manual resolution required');
    expect(JSON.stringify(result)).not.toContain(CANARY);
    expect(JSON.stringify(result)).not.toContain('bao-token');
  });

  it('AY-65 (rule): 401/403 on write → Unavailable (definitely not written)', () => {
    for (const status of [401, 403]) {
      const { actions, result } = create({ _tag: 'Response', status, body: { errors: ['permission denied'] } });
      expect(actions).toHaveLength(1);
      expect(errorOf(result)).toBe('credential backend unavailable');
    }
  });

  it('AY-66/AY-68 (rule): a 400 listing exactly the CAS message → Conflict (never adopted)', () => {
    const { result } = create({ _tag: 'Response', status: 400, body: { errors: ['other', CAS_MISMATCH] } });
    expect(errorOf(result)).toBe('credential creation requires manual conflict resolution');
  });

  it('AY-62 (rule): a path outside the scope is refused before any request', () => {
    for (const path of [
      '',
      '/absolute',
      'applications',
      'applications-other/key',
      'applications/../management',
      'applications/%2e%2e/key',
      'applications//key',
      'applications/data/key',
    ]) {
      const { actions, result } = create(created, stored(), path);
      expect(actions).toEqual([]);
      expect(errorOf(result)).toBe('credential location is outside the configured scope');
      const read = walk(readCredentialProgram(scope, path), () => stored());
      expect(read.actions).toEqual([]);
      expect(errorOf(read.result)).toBe('credential location is outside the configured scope');
    }
  });
});

describe('credential read program', () => {
  it('AY-68 (rule): a read returns the identical 7 keys', () => {
    const { actions, result } = walk(readCredentialProgram(scope, 'applications/database-uid'), () => stored());
    expect(actions).toEqual([{ _tag: 'Get', route: 'secret/data/applications/database-uid' }]);
    expect(Either.getOrThrow(result).secretData()).toEqual(data);
  });

  it('AY-69 (rule): 404 or a soft-deleted version (data null) → NotFound', () => {
    for (const reply of [
      { _tag: 'Response', status: 404, body: { errors: [] } } as const,
      { _tag: 'Response', status: 404, body: { data: { data: null, metadata: { version: 1 } } } } as const,
      ok({ data: { data: null } }),
    ]) {
      expect(errorOf(walk(readCredentialProgram(scope, 'applications/x'), () => reply).result)).toBe(
        'application credential not found',
      );
    }
  });

  it('AY-65 (rule): any other read error → Unavailable; invalid stored data → invalid credential, not echoed', () => {
    for (const reply of [{ _tag: 'Response', status: 500, body: {} } as const, { _tag: 'NoResponse' } as const]) {
      expect(errorOf(walk(readCredentialProgram(scope, 'applications/x'), () => reply).result)).toBe(
        'credential backend unavailable',
      );
    }
    const bad = walk(readCredentialProgram(scope, 'applications/x'), () => stored(1, { ...data, port: 'abc' }));
    expect(errorOf(bad.result)).toBe('application credential is invalid');
    expect(JSON.stringify(bad.result)).not.toContain(CANARY);
  });
});

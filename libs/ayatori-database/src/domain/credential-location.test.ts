import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  acceptsCredentialRef,
  additionalSecretData,
  acceptsPath,
  ApplicationCredential,
  CredentialKeys,
  credentialURL,
  isValidOpenBaoAddress,
  kvRoutes,
  makeCredentialScope,
  provisionPath,
} from './credential-location.js';
import type { Endpoint } from './instance.js';

const scope = Either.getOrThrow(makeCredentialScope('secret', 'applications'));
const INVALID = 'credential location is outside the configured scope';

describe('credential location scope', () => {
  it.each(['', 'data', 'metadata', '../secret', 'secret/', 'secret?query', '/secret', 'a//b', 'a/./b', 'a/data/b'])(
    'AY-61: mount or base %j is rejected',
    (bad) => {
      const asMount = makeCredentialScope(bad, 'applications');
      const asBase = makeCredentialScope('secret', bad);
      expect(Either.isLeft(asMount) && asMount.left.message).toBe(INVALID);
      expect(Either.isLeft(asBase) && asBase.left.message).toBe(INVALID);
    },
  );

  it('AY-61: ProvisionPath is <base>/<uid>; UIDs "", ../key, a/b, a?b are rejected', () => {
    expect(provisionPath(scope, 'database-uid')).toEqual(Either.right('applications/database-uid'));
    for (const bad of ['', '../key', 'a/b', 'a?b']) expect(Either.isLeft(provisionPath(scope, bad))).toBe(true);
  });

  it.each([
    '',
    '/absolute',
    'applications',
    'applications-other/key',
    'applications/../management',
    'applications/%2e%2e/key',
    'applications//key',
    'applications/data/key',
  ])('AY-62 (rule): path %j is outside the scope', (path) => {
    expect(acceptsPath(scope, path)).toBe(false);
  });

  it('AY-62 (rule): paths below the base are accepted; an imported credentialRef must name the mount too', () => {
    expect(acceptsPath(scope, 'applications/key')).toBe(true);
    expect(acceptsPath(scope, 'applications/team/key')).toBe(true);
    expect(acceptsCredentialRef(scope, { mount: 'secret', path: 'applications/imported' })).toBe(true);
    expect(acceptsCredentialRef(scope, { mount: 'other', path: 'applications/imported' })).toBe(false);
    expect(acceptsCredentialRef(scope, { mount: 'secret', path: 'existing/app/postgresql' })).toBe(false);
  });

  it('KV v2 routes add the data/metadata layer; the credential URL carries no auth and must be in scope', () => {
    expect(kvRoutes(scope, 'applications/u1')).toEqual({
      data: 'secret/data/applications/u1',
      metadata: 'secret/metadata/applications/u1',
    });
    expect(credentialURL('https://bao.example.test/', scope, 'applications/u1')).toEqual(
      Either.right('https://bao.example.test/v1/secret/data/applications/u1'),
    );
    for (const bad of [
      'https://user:pw@bao.example.test',
      'https://bao.example.test?x=1',
      'https://bao.example.test#f',
      'ftp://bao',
      'bao.example.test',
    ]) {
      expect(isValidOpenBaoAddress(bad), bad).toBe(false);
    }
    expect(Either.isLeft(credentialURL('https://bao.example.test', scope, 'management/instance'))).toBe(true);
  });
});

const endpoint: Endpoint = {
  host: 'postgres.example.test',
  hostAddr: '192.0.2.10',
  port: 5432,
  managementDatabase: 'app',
  tlsMode: 'verify-full',
};
const CANARY = 'AYATORI-TEST-ONLY-application-password';

describe('application credential', () => {
  it('AY-71: a generated credential has exactly the 7 keys, a 43-char base64url password, differs per generation, and round-trips', () => {
    const a = Either.getOrThrow(ApplicationCredential.fromEntropy('app', 'app', endpoint, randomBytes(32)));
    const b = Either.getOrThrow(ApplicationCredential.fromEntropy('app', 'app', endpoint, randomBytes(32)));
    const data = a.secretData();
    expect(Object.keys(data)).toEqual([...CredentialKeys]);
    expect(data.password).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(b.secretData().password).not.toBe(data.password);
    expect(data).toMatchObject({
      username: 'app',
      database: 'app',
      host: 'postgres.example.test',
      hostaddr: '192.0.2.10',
      port: '5432',
      sslmode: 'verify-full',
    });
    const parsed = Either.getOrThrow(ApplicationCredential.parse(data));
    expect(parsed.secretData()).toEqual(data);
    expect(Either.isLeft(ApplicationCredential.fromEntropy('app', 'app', endpoint, randomBytes(16)))).toBe(true);
  });

  it('AY-72: string, inspect and JSON renderings are redacted; mutating the returned map changes nothing', () => {
    const c = Either.getOrThrow(ApplicationCredential.make('app', CANARY, 'app', endpoint));
    const renderings = [
      String(c),
      `${c}`,
      inspect(c),
      inspect({ nested: c }, { depth: 5 }),
      JSON.stringify(c),
      JSON.stringify({ c }),
    ];
    for (const text of renderings) {
      expect(text).toContain('[redacted application credential]');
      expect(text).not.toContain(CANARY);
    }
    const data = c.secretData();
    data.password = 'changed';
    data.username = 'changed';
    expect(c.secretData().password).toBe(CANARY);
    expect(c.secretData().username).toBe('app');
  });

  it('AY-73: parse rejects each missing key, non-string, empty value, non-integer port, invalid hostaddr or sslmode', () => {
    const good = Either.getOrThrow(ApplicationCredential.make('app', CANARY, 'app', endpoint)).secretData();
    const cases: Array<Record<string, unknown>> = [];
    for (const key of CredentialKeys) {
      const { [key]: _dropped, ...missing } = good;
      cases.push(missing, { ...good, [key]: 5432 }, { ...good, [key]: '' });
    }
    cases.push(
      { ...good, port: '54x2' },
      { ...good, port: '5432.0' },
      { ...good, hostaddr: 'localhost' },
      { ...good, sslmode: 'prefer' },
    );
    cases.push({ ...good, username: 'Bad-Name' }, { ...good, port: '70000' });
    for (const data of cases) {
      const result = ApplicationCredential.parse(data);
      expect(Either.isLeft(result) && result.left.message).toBe('application credential is invalid');
      if (Either.isLeft(result)) expect(JSON.stringify(result.left)).not.toContain(CANARY);
    }
    expect(Either.isLeft(ApplicationCredential.parse(undefined))).toBe(true);
    expect(Either.isLeft(ApplicationCredential.parse({}))).toBe(true);
  });

  it('read-back equality is exact over the stored keys', () => {
    const data = Either.getOrThrow(ApplicationCredential.make('app', CANARY, 'app', endpoint)).secretData();
    expect(ApplicationCredential.sameData(data, { ...data })).toBe(true);
    expect(ApplicationCredential.sameData(data, { ...data, password: 'x' })).toBe(false);
    expect(ApplicationCredential.sameData(data, { ...data, extra: 'x' })).toBe(false);
  });
});

describe('opt-in additional Secret keys (decision 0314)', () => {
  const seven = {
    username: 'app_owner',
    password: 'p/w+d%?&=@:x',
    database: 'app_db',
    host: 'db.example.internal',
    hostaddr: '10.0.0.7',
    port: '6432',
    sslmode: 'verify-full',
  };

  it('none requested: no key at all (the seven-key contract stays the default)', () => {
    expect(additionalSecretData(seven, [])).toEqual({});
  });

  it('uri: a postgresql:// URI whose parts parse back to exactly the seven values (password with URI delimiters escaped)', () => {
    const { uri, ...rest } = additionalSecretData(seven, ['uri']);
    expect(rest).toEqual({});
    const u = new URL(uri as string);
    expect(u.protocol).toBe('postgresql:');
    expect(decodeURIComponent(u.username)).toBe(seven.username);
    expect(decodeURIComponent(u.password)).toBe(seven.password);
    expect(u.hostname).toBe(seven.host);
    expect(u.port).toBe(seven.port);
    expect(decodeURIComponent(u.pathname.slice(1))).toBe(seven.database);
    expect(Object.fromEntries(u.searchParams)).toEqual({ sslmode: seven.sslmode, hostaddr: seven.hostaddr });
  });

  it('jdbc-uri: a jdbc:postgresql:// URL naming host, port and database, user and password as parameters', () => {
    const { 'jdbc-uri': jdbc, ...rest } = additionalSecretData(seven, ['jdbc-uri']);
    expect(rest).toEqual({});
    expect(jdbc?.startsWith('jdbc:postgresql://')).toBe(true);
    const u = new URL((jdbc as string).slice('jdbc:'.length));
    expect([u.hostname, u.port, decodeURIComponent(u.pathname.slice(1))]).toEqual([
      seven.host,
      seven.port,
      seven.database,
    ]);
    expect(Object.fromEntries(u.searchParams)).toEqual({
      user: seven.username,
      password: seven.password,
      sslmode: seven.sslmode,
    });
    expect(u.username).toBe('');
  });

  it('an IPv6 host is bracketed in both', () => {
    const both = additionalSecretData({ ...seven, host: 'fd00::7', hostaddr: 'fd00::7' }, ['uri', 'jdbc-uri']);
    expect(new URL(both['uri'] as string).hostname).toBe('[fd00::7]');
    expect(new URL((both['jdbc-uri'] as string).slice(5)).hostname).toBe('[fd00::7]');
  });
});

// AY-70 on the test bed's real OpenBao dev server: a short-lived token holding only the controller policy can
// create and read under the tenant prefix and cannot read a management path.
import { randomBytes } from 'node:crypto';
import { baoRequest, useKvPath } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ApplicationCredential,
  controllerPolicy,
  makeCredentialScope,
  provisioningPolicy,
} from '../src/domain/credential-location.js';
import { Effect } from 'effect';
import { makeOpenBaoCredentials } from '../src/adapter/openbao/credentials.js';
import { httpCall } from './http-plain.js';

const kv = useKvPath('ayatori');
const policyName = `ayatori-controller-${randomBytes(4).toString('hex')}`;

afterAll(async () => {
  await baoRequest('DELETE', `sys/policies/acl/${policyName}`);
  await baoRequest('DELETE', `sys/policies/acl/${policyName}-prov`);
});

const asToken = (token: string, method: string, path: string, body?: unknown) =>
  httpCall(`${kv.addr}/v1/${path}`, method, token, body);

describe('OpenBao controller policy', () => {
  it('AY-70: the policy token can create/read under the tenant prefix but cannot read a management path', async () => {
    const scope = Either.getOrThrow(makeCredentialScope(kv.mount, `${kv.base}/applications`));
    expect(controllerPolicy(scope)).toBe(
      `path "${kv.mount}/data/${kv.base}/applications/*" {\n  capabilities = ["create", "update", "read"]\n}\n`,
    );
    expect(
      (await baoRequest('PUT', `sys/policies/acl/${policyName}`, { policy: controllerPolicy(scope) })).status,
    ).toBe(204);
    const management = await baoRequest('POST', `${kv.mount}/data/${kv.base}/management/instance`, {
      data: { password: 'AYATORI-TEST-ONLY-initial-password' },
    });
    expect(management.status).toBe(200);
    const tokenReply = await baoRequest('POST', 'auth/token/create', {
      policies: [policyName],
      no_default_policy: true,
      ttl: '5m',
    });
    expect(tokenReply.status, tokenReply.body).toBe(200);
    const token = (JSON.parse(tokenReply.body) as { auth: { client_token: string } }).auth.client_token;

    const write = await asToken(token, 'POST', `${kv.mount}/data/${kv.base}/applications/database-uid`, {
      data: { username: 'app' },
      options: { cas: 0 },
    });
    expect(write.status, write.body).toBe(200);
    expect((await asToken(token, 'GET', `${kv.mount}/data/${kv.base}/applications/database-uid`)).status).toBe(200);
    const denied = await asToken(token, 'GET', `${kv.mount}/data/${kv.base}/management/instance`);
    expect(denied.status).toBe(403);
    expect(denied.body).not.toContain('AYATORI-TEST-ONLY-initial-password');
    expect((await asToken(token, 'DELETE', `${kv.mount}/metadata/${kv.base}/applications/database-uid`)).status).toBe(
      403,
    );
    expect((await asToken(token, 'LIST', `${kv.mount}/metadata/${kv.base}/applications`)).status).toBe(403);
  });

  it('issue 21: the provisioning policy lets the credential store create, read and remove every version (read back as gone) under the prefix; still no LIST and no management path', async () => {
    const scope = Either.getOrThrow(makeCredentialScope(kv.mount, `${kv.base}/tenants`));
    const name = `${policyName}-prov`;
    expect((await baoRequest('PUT', `sys/policies/acl/${name}`, { policy: provisioningPolicy(scope) })).status).toBe(
      204,
    );
    const tokenReply = await baoRequest('POST', 'auth/token/create', {
      policies: [name],
      no_default_policy: true,
      ttl: '5m',
    });
    const token = (JSON.parse(tokenReply.body) as { auth: { client_token: string } }).auth.client_token;
    const store = Either.getOrThrow(
      makeOpenBaoCredentials({ address: kv.addr, token, mount: kv.mount, basePath: `${kv.base}/tenants` }),
    );
    const path = `${kv.base}/tenants/database-uid`;
    const credential = Either.getOrThrow(
      ApplicationCredential.fromEntropy(
        'app',
        'app',
        { host: 'localhost', hostAddr: '127.0.0.1', port: 5432, tlsMode: 'disable', managementDatabase: 'app' },
        new Uint8Array(32).fill(7),
      ),
    );
    await Effect.runPromise(store.create(path, credential));
    await Effect.runPromise(store.read(path));
    expect(Either.isRight(await Effect.runPromise(Effect.either(store.remove(path))))).toBe(true);
    expect((await baoRequest('GET', `${kv.mount}/metadata/${path}`)).status).toBe(404);
    expect((await asToken(token, 'LIST', `${kv.mount}/metadata/${kv.base}/tenants`)).status).toBe(403);
    expect((await asToken(token, 'DELETE', `${kv.mount}/metadata/${kv.base}/management/instance`)).status).toBe(403);
    // the seed's policy alone cannot remove: reclaim Delete needs the provisioning policy
    expect(provisioningPolicy(scope).startsWith(controllerPolicy(scope))).toBe(true);
  });
});

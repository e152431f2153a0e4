// The API items AY-1…AY-12 on the test bed's real kube-apiserver, with the CRDs generated from the Schemas.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { testbed, useNamespace } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ApiVersion } from '../src/api/index.js';
import { httpCall } from './http.js';
import { base, call, databases, installCrds, instances, tenants, uniqueName, type Reply } from './kube-fixture.js';

const ns = useNamespace('ayatori-api');
const created: string[] = [];

beforeAll(installCrds, 120_000);
afterAll(async () => {
  for (const path of created.reverse()) await call('DELETE', path);
});

const create = async (collection: string, body: Record<string, unknown>): Promise<Reply> => {
  const res = await call('POST', collection, body);
  if (res.status === 201) created.push(`${collection}/${(body['metadata'] as { name: string }).name}`);
  return res;
};

const expectInvalid = (res: Reply, message?: string) => {
  expect(res.status, res.body).toBe(422);
  expect(res.json<{ reason: string }>().reason).toBe('Invalid');
  if (message !== undefined) expect(res.body).toContain(message);
};

const instance = (name: string, endpoint: Record<string, unknown> = {}, cred: Record<string, unknown> = {}) => ({
  apiVersion: ApiVersion,
  kind: 'PostgreSQLInstance',
  metadata: { name },
  spec: {
    endpoint: { host: 'postgres.example.test', hostaddr: '192.0.2.10', ...endpoint },
    adminCredentialRef: { name: 'admin', ...cred },
  },
});
const database = (name: string, spec: Record<string, unknown> = {}) => ({
  apiVersion: ApiVersion,
  kind: 'PostgreSQLDatabase',
  metadata: { name },
  spec: { instanceRef: { name: 'shared' }, database: 'app', loginRole: 'app', source: 'Provision', ...spec },
});
const tenant = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: ApiVersion,
  kind: 'PostgreSQLTenant',
  metadata: { name, namespace: ns.name },
  spec,
});

interface Obj {
  metadata: { name: string; resourceVersion: string; generation: number; uid: string };
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

describe('AY-1 installed CRDs', () => {
  it('AY-1: three kinds, their scopes and status subresources are served; no short names', async () => {
    const list = (await call('GET', base)).json<{
      resources: Array<{ name: string; kind: string; namespaced: boolean; shortNames?: string[] }>;
    }>();
    const byName = new Map(list.resources.map((r) => [r.name, r]));
    expect(byName.get('postgresqlinstances')).toMatchObject({ kind: 'PostgreSQLInstance', namespaced: false });
    expect(byName.get('postgresqldatabases')).toMatchObject({ kind: 'PostgreSQLDatabase', namespaced: false });
    expect(byName.get('postgresqltenants')).toMatchObject({ kind: 'PostgreSQLTenant', namespaced: true });
    for (const r of ['postgresqlinstances', 'postgresqldatabases', 'postgresqltenants']) {
      expect(byName.has(`${r}/status`), r).toBe(true);
      expect(byName.get(r)?.shortNames ?? []).toEqual([]);
    }
  });

  it('AY-1: the printer columns of §2 are served (Table view)', async () => {
    const table = async (path: string) => {
      const { kube } = testbed();
      const reply = await httpCall(`${kube.server}${path}`, {
        ca: kube.caCert,
        headers: { authorization: `Bearer ${kube.token}`, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' },
      });
      expect(reply.status, reply.body).toBe(200);
      return (JSON.parse(reply.body) as { columnDefinitions: Array<{ name: string }> }).columnDefinitions.map(
        (c) => c.name,
      );
    };
    expect(await table(instances)).toEqual(['Name', 'Ready']);
    expect(await table(databases)).toEqual(['Name', 'Instance', 'Database', 'Ready']);
    expect(await table(tenants(ns.name))).toEqual(['Name', 'Database', 'Ready']);
  });
});

describe('PostgreSQLInstance on the API server', () => {
  it('AY-2: host, hostaddr and adminCredentialRef.name alone read back with every default', async () => {
    const name = uniqueName('ay2');
    const res = await create(instances, instance(name));
    expect(res.status, res.body).toBe(201);
    const obj = res.json<Obj>();
    expect(obj.spec).toEqual({
      endpoint: {
        host: 'postgres.example.test',
        hostaddr: '192.0.2.10',
        port: 5432,
        database: 'postgres',
        sslMode: 'verify-full',
      },
      adminCredentialRef: { name: 'admin', usernameKey: 'username', passwordKey: 'password' },
    });
  });

  it.each<[string, Record<string, unknown>, Record<string, unknown>, string?]>([
    ['port -1', { port: -1 }, {}],
    ['port 65536', { port: 65536 }, {}],
    ['hostaddr localhost', { hostaddr: 'localhost' }, {}, 'hostaddr must be a single IPv4 or IPv6 address'],
    ['hostaddr fe80::1%eth0', { hostaddr: 'fe80::1%eth0' }, {}, 'hostaddr must be a single IPv4 or IPv6 address'],
    ['sslMode prefer', { sslMode: 'prefer' }, {}],
    ['endpoint.database bad-name', { database: 'bad-name' }, {}],
    ['passwordKey bad/key', {}, { passwordKey: 'bad/key' }],
    ['hostaddr longer than 45', { hostaddr: `2001:db8:${'0:'.repeat(20)}1` }, {}],
  ])('AY-4: rejects %s as Invalid', async (_name, endpoint, cred, message) => {
    expectInvalid(await create(instances, instance(uniqueName('ay4'), endpoint, cred)), message);
  });
});

describe('PostgreSQLDatabase on the API server', () => {
  it('AY-3: reclaimPolicy defaults to Retain; Retain → Delete → Retain updates succeed', async () => {
    const res = await create(databases, database(uniqueName('ay3')));
    expect(res.status, res.body).toBe(201);
    let obj = res.json<Obj>();
    expect(obj.spec['reclaimPolicy']).toBe('Retain');
    for (const policy of ['Delete', 'Retain']) {
      const updated = await call('PUT', `${databases}/${obj.metadata.name}`, {
        ...obj,
        spec: { ...obj.spec, reclaimPolicy: policy },
      });
      expect(updated.status, updated.body).toBe(200);
      obj = updated.json<Obj>();
      expect(obj.spec['reclaimPolicy']).toBe(policy);
    }
  });

  it.each<[string, Record<string, unknown>, string?]>([
    ['empty instanceRef.name', { instanceRef: { name: '' } }],
    ['empty loginRole', { loginRole: '' }],
    ['uppercase database', { database: 'App' }],
    ['source Adopt', { source: 'Adopt' }],
    ['Import without credentialRef', { source: 'Import' }, 'only imported databases require an existing credentialRef'],
    [
      'Provision with credentialRef',
      { credentialRef: { mount: 'secret', path: 'a/b' } },
      'only imported databases require an existing credentialRef',
    ],
    ['reclaimPolicy Recycle', { reclaimPolicy: 'Recycle' }],
    ['tenantRef without uid', { tenantRef: { namespace: 'apps', name: 'app' } }],
  ])('AY-5: rejects %s as Invalid', async (_name, spec, message) => {
    expectInvalid(await create(databases, database(uniqueName('ay5'), spec)), message);
  });

  it('AY-7: an Import Database is created although its Instance does not exist', async () => {
    const res = await create(
      databases,
      database(uniqueName('ay7'), {
        instanceRef: { name: uniqueName('missing') },
        source: 'Import',
        credentialRef: { mount: 'secret', path: 'existing/app' },
      }),
    );
    expect(res.status, res.body).toBe(201);
  });

  it('AY-8: status is ignored on create and on plain update; a status update keeps the generation; duplicate Ready → Invalid', async () => {
    const name = uniqueName('ay8');
    const res = await create(databases, { ...database(name), status: { phase: 'Available', instanceUID: 'forged' } });
    expect(res.status, res.body).toBe(201);
    let obj = res.json<Obj>();
    expect(obj.status).toBeUndefined();
    const plain = await call('PUT', `${databases}/${name}`, { ...obj, status: { phase: 'Available' } });
    expect(plain.status, plain.body).toBe(200);
    obj = plain.json<Obj>();
    expect(obj.status).toBeUndefined();
    const generation = obj.metadata.generation;
    const ready = {
      type: 'Ready',
      status: 'True',
      reason: 'Verified',
      message: '',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: generation,
    };
    const statusUpdate = await call('PUT', `${databases}/${name}/status`, {
      ...obj,
      status: { phase: 'Available', conditions: [ready] },
    });
    expect(statusUpdate.status, statusUpdate.body).toBe(200);
    obj = statusUpdate.json<Obj>();
    expect(obj.metadata.generation).toBe(generation);
    expect(obj.status?.['phase']).toBe('Available');
    const dup = await call('PUT', `${databases}/${name}/status`, {
      ...obj,
      status: { conditions: [ready, { ...ready, status: 'False' }] },
    });
    expectInvalid(dup);
  });

  it('AY-9: an update with a stale resourceVersion gets 409; the stored tenantRef is the winner’s', async () => {
    const name = uniqueName('ay9');
    const obj = (await create(databases, database(name))).json<Obj>();
    const winner = await call('PUT', `${databases}/${name}`, {
      ...obj,
      spec: { ...obj.spec, tenantRef: { namespace: 'apps', name: 'a', uid: 'winner' } },
    });
    expect(winner.status, winner.body).toBe(200);
    const loser = await call('PUT', `${databases}/${name}`, {
      ...obj,
      spec: { ...obj.spec, tenantRef: { namespace: 'apps', name: 'b', uid: 'loser' } },
    });
    expect(loser.status).toBe(409);
    expect(loser.json<{ reason: string }>().reason).toBe('Conflict');
    const stored = (await call('GET', `${databases}/${name}`)).json<Obj>();
    expect(stored.spec['tenantRef']).toEqual({ namespace: 'apps', name: 'a', uid: 'winner' });
  });

  it('AY-10: after tenantRef or status.instanceUID the target freezes (exact message); reclaimPolicy still changes', async () => {
    const message = 'managed database target cannot change after observation or binding starts';
    const viaTenantRef = async () => {
      const name = uniqueName('ay10t');
      const obj = (
        await create(databases, database(name, { source: 'Import', credentialRef: { mount: 'secret', path: 'a/b' } }))
      ).json<Obj>();
      return (
        await call('PUT', `${databases}/${name}`, {
          ...obj,
          spec: { ...obj.spec, tenantRef: { namespace: 'apps', name: 'a', uid: 'u' } },
        })
      ).json<Obj>();
    };
    const viaInstanceUID = async () => {
      const name = uniqueName('ay10i');
      const obj = (
        await create(databases, database(name, { source: 'Import', credentialRef: { mount: 'secret', path: 'a/b' } }))
      ).json<Obj>();
      return (
        await call('PUT', `${databases}/${name}/status`, { ...obj, status: { instanceUID: 'instance-uid' } })
      ).json<Obj>();
    };
    for (const start of [viaTenantRef, viaInstanceUID]) {
      const obj = await start();
      const path = `${databases}/${obj.metadata.name}`;
      const { credentialRef: _c, ...withoutCredential } = obj.spec;
      const changes: Array<Record<string, unknown>> = [
        { ...obj.spec, instanceRef: { name: 'other' } },
        { ...obj.spec, database: 'other' },
        { ...obj.spec, loginRole: 'other' },
        { ...withoutCredential, source: 'Provision' },
        { ...obj.spec, credentialRef: { mount: 'secret', path: 'a/c' } },
      ];
      for (const spec of changes) expectInvalid(await call('PUT', path, { ...obj, spec }), message);
      const reclaim = await call('PUT', path, { ...obj, spec: { ...obj.spec, reclaimPolicy: 'Delete' } });
      expect(reclaim.status, reclaim.body).toBe(200);
    }
  });
});

describe('PostgreSQLTenant on the API server', () => {
  it('AY-6: both or neither of provision/databaseRef → Invalid with the exact message', async () => {
    const message = 'exactly one of provision and databaseRef is required';
    expectInvalid(
      await create(
        tenants(ns.name),
        tenant(uniqueName('ay6'), { provision: { instanceRef: { name: 'shared' } }, databaseRef: { name: 'x' } }),
      ),
      message,
    );
    expectInvalid(await create(tenants(ns.name), tenant(uniqueName('ay6'), {})), message);
  });

  it('AY-7: two Tenants naming the same Database are both accepted', async () => {
    for (const name of [uniqueName('ay7a'), uniqueName('ay7b')]) {
      const res = await create(tenants(ns.name), tenant(name, { databaseRef: { name: 'shared-db' } }));
      expect(res.status, res.body).toBe(201);
    }
  });

  it('AY-11: once Binding/Bound/Deleting, the target is frozen and progress cannot return; extensions and secretName stay mutable', async () => {
    const name = uniqueName('ay11');
    const path = `${tenants(ns.name)}/${name}`;
    let obj = (
      await create(tenants(ns.name), tenant(name, { provision: { instanceRef: { name: 'shared' } } }))
    ).json<Obj>();
    const before = await call('PUT', path, { ...obj, spec: { provision: { instanceRef: { name: 'other' } } } });
    expect(before.status, 'unfrozen before binding starts').toBe(200);
    obj = before.json<Obj>();
    for (const phase of ['Binding', 'Bound', 'Deleting']) {
      const statusUpdate = await call('PUT', `${path}/status`, { ...obj, status: { phase } });
      expect(statusUpdate.status, statusUpdate.body).toBe(200);
      obj = statusUpdate.json<Obj>();
      expectInvalid(
        await call('PUT', path, { ...obj, spec: { provision: { instanceRef: { name: 'third' } } } }),
        'binding target cannot change after binding starts',
      );
      expectInvalid(
        await call('PUT', path, { ...obj, spec: { databaseRef: { name: 'x' } } }),
        'binding target cannot change after binding starts',
      );
      for (const bad of [{ phase: '' }, { phase: 'Pending' }, {}]) {
        expectInvalid(
          await call('PUT', `${path}/status`, { ...obj, status: bad }),
          'binding progress cannot return to an unbound state',
        );
      }
      const mutable = await call('PUT', path, {
        ...obj,
        spec: { ...obj.spec, extensions: ['pgcrypto', phase], secretName: `s-${phase.toLowerCase()}` },
      });
      expect(mutable.status, mutable.body).toBe(200);
      obj = mutable.json<Obj>();
    }
  });
});

describe('samples', () => {
  it('AY-12: the three sample manifests are accepted (cluster-scoped names suffixed, Tenants in the test namespace)', async () => {
    const dir = join(import.meta.dirname, '../samples');
    const suffix = uniqueName('s');
    const load = (file: string) =>
      parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map(
        (d) => d.toJS() as { metadata: { name: string; namespace?: string } },
      );
    const [inst] = load('database_v1alpha1_postgresqlinstance.yaml');
    const [db] = load('database_v1alpha1_postgresqldatabase.yaml');
    const ts = load('database_v1alpha1_postgresqltenant.yaml');
    const r1 = await create(instances, { ...inst, metadata: { name: `${inst!.metadata.name}-${suffix}` } });
    expect(r1.status, r1.body).toBe(201);
    const r2 = await create(databases, { ...db, metadata: { name: `${db!.metadata.name}-${suffix}` } });
    expect(r2.status, r2.body).toBe(201);
    for (const t of ts) {
      const r = await create(tenants(ns.name), { ...t, metadata: { name: t.metadata.name, namespace: ns.name } });
      expect(r.status, r.body).toBe(201);
    }
  });
});

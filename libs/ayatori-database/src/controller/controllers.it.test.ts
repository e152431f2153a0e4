// The two controllers running on `@homelab/kube` (informers, work queues, workers) against the test bed's real
// kube-apiserver and the machine's real PostgreSQL: watches trigger rounds, Secret events reach Instances, Instance
// readiness reaches Tenants, and shutdown closes the pools after the workers. The controllers run as a ServiceAccount
// holding exactly the generated RBAC (TokenRequest token). The informers are restricted to this file's label (other
// test files share the API server); the controllers' behaviour is otherwise the production one.
import { randomBytes } from 'node:crypto';
import {
  adminQuery,
  eventually as pollUntil,
  kubeObjects,
  kubeRequest,
  testbed,
  useDatabase,
  useNamespace,
} from '@homelab/testbed/vitest';
import { ControllerMetrics, ControllerMetricsLive, layerFromToken, type ReceivedAnswer } from '@homelab/kube';
import { Cause, Context, Effect, Either, Exit, Layer, Logger, LogLevel, Scope } from 'effect';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quoteIdentifier } from '../domain/provisioning-sql.js';
import { grantManagerRbac, serviceAccountToken } from '../testing/index.js';
import { InstanceReason, SetupMessage, TenantReason } from '../domain/vocabulary.js';
import { httpCall } from '../../test/http.js';
import {
  apiVersion,
  KubernetesAdminSecretsLive,
  KubernetesBindingResourcesLive,
  KubernetesInstanceResourcesLive,
} from '../adapter/kubernetes/resources.js';
import { PostgresInstanceObserverLive } from '../adapter/postgresql/observer.js';
import { databases, installCrds, instances, tenants } from '../../test/kube-fixture.js';
import { startDatabaseControllers } from './controllers.js';

const ns = useNamespace('ayatori-ctrl');
const db = useDatabase('ay_ctrl');
const suffix = randomBytes(4).toString('hex');
const label = `ayatori-test-${suffix}`;
const manager = `ay_cmgr_${suffix}`;

interface Obj {
  metadata: { name: string; uid: string; resourceVersion: string; finalizers?: string[] };
  spec: Record<string, unknown>;
  status?: { phase?: string; conditions?: Array<{ type: string; status: string; reason: string }> };
}
/** Objects `post` creates land in `cleanup`; the file purges them after its tests. */
const { get, post, purge, created: cleanup } = kubeObjects<Obj>();
const sql = adminQuery;
const backends = async () =>
  Number(
    (await sql(`SELECT count(*)::int AS n FROM pg_catalog.pg_stat_activity WHERE usename = '${manager}'`)).rows[0].n,
  );
const ready = (o: Obj | undefined) => o?.status?.conditions?.find((c) => c.type === 'Ready');

/** Poll until `check` holds (at most `ms`); returns the elapsed time. */
const eventually = (what: string, check: () => Promise<boolean>, ms = 10_000): Promise<number> =>
  pollUntil(what, check, ms, 50);

/** What a read-only slice must leave untouched: the manager role (attributes, password) and the management database's objects. */
const backendState = async () => {
  const { postgres } = testbed();
  const c = new pg.Client({ host: postgres.host, port: postgres.port, user: postgres.user, database: db.database });
  await c.connect();
  try {
    const role = (
      await c.query(
        `SELECT rolsuper, rolcreaterole, rolcreatedb, rolcanlogin, rolpassword FROM pg_catalog.pg_authid WHERE rolname = '${manager}'`,
      )
    ).rows;
    const objects = (
      await c.query(
        `SELECT (SELECT count(*) FROM pg_catalog.pg_extension)::int AS ext, (SELECT count(*) FROM pg_catalog.pg_namespace)::int AS ns, (SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = 'public'::regnamespace)::int AS rel`,
      )
    ).rows;
    return { role, objects };
  } finally {
    await c.end();
  }
};
let stateBefore: unknown;

/**
 * A ServiceAccount bound to exactly the generated RBAC (the `manager-role` ClusterRole under a unique name and the
 * namespaced `database-management-credentials` Role), and a token for it from the TokenRequest API: the controllers
 * of this file run with that identity.
 */
const roleName = `ay-manager-role-${suffix}`;
const controllerToken = async (): Promise<string> => {
  const create = async (path: string, body: unknown) => {
    const r = await kubeRequest('POST', path, body);
    if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${r.body}`);
  };
  await grantManagerRbac({
    create,
    cleanup: rbacCleanup,
    namespace: ns.name,
    serviceAccount: 'controller-manager',
    roleName,
  });
  // RBAC reaches the authorizer quickly but not instantly: the token once the identity can list Tenants and Secrets.
  const { kube } = testbed();
  return serviceAccountToken({
    request: kubeRequest,
    getAs: async (token, path) =>
      (
        await httpCall(`${kube.server}${path}`, {
          ca: kube.caCert,
          headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
        })
      ).status,
    namespace: ns.name,
    serviceAccount: 'controller-manager',
    probes: [tenants(ns.name), `/api/v1/namespaces/${ns.name}/secrets`],
  });
};
const rbacCleanup: string[] = [];

let metricsText: () => Promise<string> = async () => '';
const logs: string[] = [];
const received: ReceivedAnswer[] = [];
const CANARY = `AYATORI-CANARY-${suffix}`;
let outer: Scope.CloseableScope;
let inner: Scope.CloseableScope;

beforeAll(async () => {
  await installCrds();
  await sql(
    `CREATE ROLE ${quoteIdentifier(manager)} LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD 'AYATORI-TEST-ONLY-${suffix}'`,
  );
  stateBefore = await backendState();
  outer = Effect.runSync(Scope.make());
  inner = Effect.runSync(Scope.make());
  // Every answer the controllers' client receives is kept as sent (AY-43 checks the Secret watch on the wire).
  const kube = layerFromToken(
    { ...testbed().kube, token: await controllerToken() },
    { onAnswer: (a) => void received.push(a) },
  );
  const services = Layer.mergeAll(
    KubernetesBindingResourcesLive,
    KubernetesInstanceResourcesLive,
    PostgresInstanceObserverLive().pipe(Layer.provide(KubernetesAdminSecretsLive(ns.name))),
    ControllerMetricsLive(),
    kube,
  ).pipe(Layer.provideMerge(kube));
  const context = await Effect.runPromise(Layer.buildWithScope(services, outer));
  metricsText = () => Effect.runPromise(Context.get(context, ControllerMetrics).render);
  // Every log line of the controllers (workers, informers, errors) is captured for the canary scan (AY-80).
  const capture = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message, cause }) => logs.push(`${JSON.stringify(message)} ${Cause.pretty(cause)}`)),
  );
  const started = await Effect.runPromise(
    startDatabaseControllers({ secretNamespace: ns.name, labelSelector: `${label}=yes` }).pipe(
      Effect.provide(context),
      Effect.provide(capture),
      Effect.provide(Logger.minimumLogLevel(LogLevel.Debug)),
      Scope.extend(inner),
    ),
  );
  expect(started.instanceController).toBe(true);
}, 120_000);

afterAll(async () => {
  await Effect.runPromise(Scope.close(inner, Exit.void)).catch(() => undefined);
  await Effect.runPromise(Scope.close(outer, Exit.void)).catch(() => undefined);
  for (const path of cleanup.reverse()) await purge(path);
  for (const path of rbacCleanup.reverse()) await kubeRequest('DELETE', path);
  await sql(`DROP ROLE IF EXISTS ${quoteIdentifier(manager)}`).catch(() => undefined);
});

describe('controllers on the real API server and PostgreSQL', () => {
  const instanceName = `ay-ctrl-${suffix}`;
  const secretName = `${instanceName}-admin`;
  const tenantName = `app${suffix}`;

  it('AY-43/AY-33: an Instance waits for its Secret; the Secret event makes it Ready, and the Instance event binds the waiting Tenant (each within 10 s)', async () => {
    await post(instances, {
      apiVersion,
      kind: 'PostgreSQLInstance',
      metadata: { name: instanceName, labels: { [label]: 'yes' } },
      spec: {
        endpoint: {
          host: 'localhost',
          hostaddr: '127.0.0.1',
          port: testbed().postgres.port,
          database: db.database,
          sslMode: 'disable',
        },
        adminCredentialRef: { name: secretName },
      },
    });
    const tenant = await post(tenants(ns.name), {
      apiVersion,
      kind: 'PostgreSQLTenant',
      metadata: { name: tenantName, namespace: ns.name, labels: { [label]: 'yes' } },
      spec: { provision: { instanceRef: { name: instanceName } } },
    });
    cleanup.push(`${databases}/tenant-${tenant.metadata.uid}`);
    await eventually(
      'Instance waits (DependencyUnavailable)',
      async () => ready(await get(`${instances}/${instanceName}`))?.reason === InstanceReason.DependencyUnavailable,
    );
    await eventually(
      'Tenant waits for the Instance',
      async () => ready(await get(`${tenants(ns.name)}/${tenantName}`))?.reason === TenantReason.DependencyUnavailable,
    );

    const secret = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secretName, namespace: ns.name },
      stringData: { username: manager, password: CANARY },
    });
    expect(secret.status).toBe(201);
    await eventually(
      'Instance Ready after the Secret event',
      async () => ready(await get(`${instances}/${instanceName}`))?.status === 'True',
    );
    await eventually(
      'Tenant Bound after the Instance event',
      async () => (await get(`${tenants(ns.name)}/${tenantName}`))?.status?.phase === 'Bound',
    );
    const bound = await get(`${tenants(ns.name)}/${tenantName}`);
    expect(ready(bound)?.reason).toBe(TenantReason.BindingComplete);
    expect(await backends()).toBeGreaterThanOrEqual(1);
  });

  it('AY-43: the Secret watch is metadata-only in the Secret namespace — every Secret list/watch answer the controllers received was PartialObjectMetadata without the password; a data-only change of the referenced Secret reaches the Instance through that watch within 10 s (unknown username → AuthenticationFailed), and restoring it makes it Ready again', async () => {
    const secretPath = `/api/v1/namespaces/${ns.name}/secrets/${secretName}`;
    const b64 = (v: string) => Buffer.from(v).toString('base64');
    const setUsername = async (username: string) => {
      const r = await kubeRequest(
        'PATCH',
        secretPath,
        { data: { username: b64(username) } },
        'application/merge-patch+json',
      );
      expect(r.status, r.body).toBe(200);
      return (r.json() as Obj).metadata.resourceVersion;
    };
    expect(ready(await get(`${instances}/${instanceName}`))?.status).toBe('True');
    const changedAt = await setUsername(`ay_nosuch_${suffix}`);
    await eventually(
      'Instance AuthenticationFailed after the data-only Secret change',
      async () => ready(await get(`${instances}/${instanceName}`))?.reason === InstanceReason.AuthenticationFailed,
    );
    await setUsername(manager);
    await eventually(
      'Instance Ready again after the Secret is restored',
      async () => ready(await get(`${instances}/${instanceName}`))?.status === 'True',
    );

    const collection = new RegExp(`^/api/v1/namespaces/${ns.name}/secrets(\\?|$)`);
    const secretReads = received.filter((a) => a.path.includes('/secrets'));
    const watchLines = secretReads.filter((a) => collection.test(a.path) && a.kind === 'line');
    const lists = secretReads.filter(
      (a) => collection.test(a.path) && a.kind === 'body' && !a.path.includes('watch=true'),
    );
    const direct = secretReads.filter((a) => a.path === secretPath);
    // only this namespace, only the collection (watch/list) and the observer's direct reads of the named Secret
    expect(secretReads.filter((a) => !collection.test(a.path) && a.path !== secretPath)).toEqual([]);
    expect(lists.length).toBeGreaterThan(0);
    for (const l of lists) {
      expect(l.accept).toBe('application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json');
      expect((JSON.parse(l.text) as { kind: string }).kind).toBe('PartialObjectMetadataList');
    }
    for (const l of watchLines) {
      expect(l.accept).toBe('application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json');
      const ev = JSON.parse(l.text) as { object: Record<string, unknown> };
      expect(Object.keys(ev.object).sort()).toEqual(['apiVersion', 'kind', 'metadata']);
      expect(ev.object['kind']).toBe('PartialObjectMetadata');
    }
    // the data-only change arrived as a MODIFIED event of the metadata watch
    expect(
      watchLines.some((l) => {
        const ev = JSON.parse(l.text) as {
          type: string;
          object: { metadata: { name?: string; resourceVersion?: string } };
        };
        return (
          ev.type === 'MODIFIED' &&
          ev.object.metadata.name === secretName &&
          ev.object.metadata.resourceVersion === changedAt
        );
      }),
    ).toBe(true);
    const leaks = (text: string) => [CANARY, b64(CANARY)].filter((c) => text.includes(c));
    expect(leaks([...lists, ...watchLines].map((a) => a.text).join('\n'))).toEqual([]);
    // the credentials do arrive — only through the observer's direct reads (the recorder would have seen them)
    expect(leaks(direct.map((a) => a.text).join('\n'))).toEqual([b64(CANARY)]);
  });

  it('AY-33: under the generated RBAC, a Tenant naming a not-yet-existing Database waits (DependencyUnavailable); creating an Available+Ready Database binds it within 10 s through the Database watch', async () => {
    const dbName = `ay-ctrl-db-${suffix}`;
    const claim = `claim-${suffix}`;
    await post(tenants(ns.name), {
      apiVersion,
      kind: 'PostgreSQLTenant',
      metadata: { name: claim, namespace: ns.name, labels: { [label]: 'yes' } },
      spec: { databaseRef: { name: dbName } },
    });
    await eventually(
      'Tenant waits for the Database',
      async () => ready(await get(`${tenants(ns.name)}/${claim}`))?.reason === TenantReason.DependencyUnavailable,
    );
    const inst = await get(`${instances}/${instanceName}`);
    const d = await post(databases, {
      apiVersion,
      kind: 'PostgreSQLDatabase',
      metadata: { name: dbName, labels: { [label]: 'yes' } },
      spec: { instanceRef: { name: instanceName }, database: 'later_app', loginRole: 'later_app', source: 'Provision' },
    });
    const started = Date.now();
    const st = await kubeRequest('PUT', `${databases}/${dbName}/status`, {
      ...d,
      status: {
        instanceUID: inst?.metadata.uid,
        phase: 'Available',
        observedGeneration: 1,
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'Available',
            message: 'test fixture',
            observedGeneration: 1,
            lastTransitionTime: '2026-01-01T00:00:00Z',
          },
        ],
      },
    });
    expect(st.status, st.body).toBe(200);
    await eventually(
      'Tenant Bound after the Database event',
      async () => (await get(`${tenants(ns.name)}/${claim}`))?.status?.phase === 'Bound',
    );
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("AY-35/AY-54: the controllers pass the drivers' requeue to the work queue (rounds counted as requeue_after by the real controller metrics)", async () => {
    const text = await metricsText();
    for (const controller of ['database-binding', 'database-instance']) {
      const line = text
        .split('\n')
        .find(
          (l) =>
            l.startsWith('controller_runtime_reconcile_total') &&
            l.includes(`controller="${controller}"`) &&
            l.includes('result="requeue_after"'),
        );
      expect(line, controller).toBeDefined();
      expect(Number(line?.split(' ').at(-1))).toBeGreaterThan(0);
    }
  });

  it('AY-47: deleting the admin Secret → the Instance is not Ready and its PostgreSQL connections are closed (within 10 s)', async () => {
    expect((await kubeRequest('DELETE', `/api/v1/namespaces/${ns.name}/secrets/${secretName}`)).status).toBe(200);
    await eventually('Instance DependencyUnavailable', async () => {
      const c = ready(await get(`${instances}/${instanceName}`));
      return c?.status === 'False' && c.reason === InstanceReason.DependencyUnavailable;
    });
    await eventually('zero backends', async () => (await backends()) === 0);
  });

  it('AY-82: shutdown stops the workers first, then closes the pools', async () => {
    await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secretName, namespace: ns.name },
      stringData: { username: manager, password: CANARY },
    });
    await eventually('Ready again', async () => ready(await get(`${instances}/${instanceName}`))?.status === 'True');
    expect(await backends()).toBeGreaterThanOrEqual(1);
    await Effect.runPromise(Scope.close(inner, Exit.void));
    // workers stopped: the pool is still held by the observer layer
    expect(await backends()).toBeGreaterThanOrEqual(1);
    await Effect.runPromise(Scope.close(outer, Exit.void));
    await eventually('pools closed', async () => (await backends()) === 0, 5_000);
  });
});

describe('AY-80', () => {
  it('AY-80: the admin password (a canary) appears in no log line, no status and no event of the whole run', async () => {
    expect(logs.length).toBeGreaterThan(5); // every round logs its outcome at debug level
    expect(logs.join('\n')).not.toContain(CANARY);
    for (const path of [
      `${instances}/${`ay-ctrl-${suffix}`}`,
      `${tenants(ns.name)}/app${suffix}`,
      `${tenants(ns.name)}/claim-${suffix}`,
    ]) {
      const o = await get(path);
      expect(JSON.stringify(o?.status ?? {})).not.toContain(CANARY);
    }
    const events = await kubeRequest('GET', `/api/v1/namespaces/${ns.name}/events`);
    expect(events.body).not.toContain(CANARY);
  });
});

describe('AY-84', () => {
  it('AY-84: a whole controller run (observations, binding, deletion of the Secret, shutdown) changed no PostgreSQL role, password or object', async () => {
    expect(await backendState()).toEqual(stateBefore);
  });
});

describe('setup (AY-53)', () => {
  it('AY-53: an empty Secret namespace disables only the Instance controller; an invalid one is a setup error', async () => {
    const scope = Effect.runSync(Scope.make());
    try {
      const kube = layerFromToken(testbed().kube);
      const services = Layer.mergeAll(
        KubernetesBindingResourcesLive,
        KubernetesInstanceResourcesLive,
        PostgresInstanceObserverLive().pipe(Layer.provide(KubernetesAdminSecretsLive('unused'))),
        ControllerMetricsLive(),
        kube,
      ).pipe(Layer.provideMerge(kube));
      const context = await Effect.runPromise(Layer.buildWithScope(services, scope));
      const off = await Effect.runPromise(
        startDatabaseControllers({ secretNamespace: '', labelSelector: `${label}=none` }).pipe(
          Effect.provide(context),
          Scope.extend(scope),
        ),
      );
      expect(off.instanceController).toBe(false);
      const bad = await Effect.runPromise(
        Effect.either(
          startDatabaseControllers({ secretNamespace: 'Not_A_Label', labelSelector: `${label}=none` }).pipe(
            Effect.provide(context),
            Scope.extend(scope),
          ),
        ),
      );
      expect(Either.isLeft(bad) && bad.left.message).toBe(SetupMessage.instanceObserverRequired);
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void));
    }
  });
});

// ayatori-database provisioning bench (issue 21 "Performance"; needs the test bed: HOMELAB_TESTBED_STATE or
// .testbed/state.json). Not part of `npm test`: run it with `npx nx run ayatori-database:bench:provision`.
// 1. Provision BENCH_TENANTS (100) Tenants on one Instance through the real controllers (`startDatabaseControllers`
//    with `reconcileTenant` and the real adapters: kube-apiserver, PostgreSQL, OpenBao), timed from the first Tenant
//    POST to all Ready, against its peer measured in the same run: a script doing the same SQL (CREATE ROLE, GRANT
//    membership, CREATE DATABASE, REVOKE/GRANT CONNECT, ALTER ROLE PASSWORD) as the same manager login and the same
//    KV v2 write (cas 0) per tenant, with the same concurrency. Goal: controllers ≤ 1.5× the peer.
// 2. Steady state: one resync round (`reconcileTenant`) of every Ready Tenant with every call of the DatabaseServer
//    port (SQL) and the CredentialStore port (KV) counted. Goal: 0 SQL and 0 KV requests per resync.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { Context, Effect, Exit, Layer, Scope } from 'effect';
import pg from 'pg';
import { ControllerMetricsLive, KubeClient, type KubeClientService, layerFromToken } from '@homelab/kube';
import {
  apiVersion,
  KubernetesAdminSecretsLive,
  KubernetesBindingResourcesLive,
  KubernetesInstanceResourcesLive,
} from '../src/adapter/kubernetes/resources.js';
import { KubernetesProvisioningResourcesLive } from '../src/adapter/kubernetes/provisioning.js';
import { OpenBaoCredentialStoreLive } from '../src/adapter/openbao/credentials.js';
import { PostgresInstanceObserverLive } from '../src/adapter/postgresql/observer.js';
import { PostgresDatabaseServerLive } from '../src/adapter/postgresql/provisioner.js';
import { customResourceDefinitions, Group, Version } from '../src/api/index.js';
import { BindingResources, CredentialStore, DatabaseServer, ProvisioningResources } from '../src/application/ports.js';
import { CryptoEntropyLive, ProvisioningSettings, reconcileTenant } from '../src/application/provisioning.js';
import { startDatabaseControllers } from '../src/controller/controllers.js';
import { provisionDatabaseStatements, quoteIdentifier, setPasswordStatement } from '../src/domain/provisioning-sql.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);
const printError = (...parts: ReadonlyArray<unknown>): void =>
  void process.stderr.write(
    `${parts.map((p) => (p instanceof Error ? (p.stack ?? p.message) : String(p))).join(' ')}\n`,
  );

const N = Number(process.env['BENCH_TENANTS'] ?? 100);
const C = Number(process.env['BENCH_CONCURRENCY'] ?? 8);
const TIMEOUT_MS = Number(process.env['BENCH_TIMEOUT_MS'] ?? 600_000);
const POLL_MS = 250;
const state = JSON.parse(
  readFileSync(
    process.env['HOMELAB_TESTBED_STATE'] ?? join(import.meta.dirname, '../../../.testbed/state.json'),
    'utf8',
  ),
) as {
  kube: { server: string; token: string; caCert: string };
  postgres: { host: string; port: number; user: string; database: string };
  openbao: { available: boolean; addr: string; token: string; kvMount: string; reason?: string };
};
if (!state.openbao.available) throw new Error(`OpenBao is unavailable on this test bed: ${state.openbao.reason}`);

const suffix = randomBytes(3).toString('hex');
const ns = `ay-bench-${suffix}`;
const label = `ayatori-bench-${suffix}`;
const manager = `ay_bmgr_${suffix}`;
const managerPassword = `AYATORI-BENCH-ONLY-${suffix}`;
const instanceName = `ay-bench-${suffix}`;
const adminSecret = `${instanceName}-admin`;
const kvMount = state.openbao.kvMount;
const kvBase = `bench/ayatori-${suffix}`;
const base = `/apis/${Group}/${Version}`;
const tenantsPath = `${base}/namespaces/${ns}/postgresqltenants`;
const ctrlName = (i: number) => `bc${suffix}_${i}`;
const peerName = (i: number) => `bp${suffix}_${i}`;

// ---- raw clients (the peer and the fixtures) -------------------------------------------------------------------

interface Obj {
  readonly metadata: { readonly name: string; readonly uid: string };
  readonly status?: { readonly conditions?: ReadonlyArray<{ readonly type: string; readonly status: string }> };
  readonly items?: ReadonlyArray<Obj>;
}
const kubeAgent = new https.Agent({ ca: state.kube.caCert, keepAlive: true, maxSockets: 64 });
const kubeOnce = (method: string, path: string, body?: unknown) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request(
      `${state.kube.server}${path}`,
      {
        method,
        agent: kubeAgent,
        headers: {
          authorization: `Bearer ${state.kube.token}`,
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
const kube = async (method: string, path: string, body?: unknown) => {
  for (;;) {
    const { status, text } = await kubeOnce(method, path, body);
    if (status === 429) {
      await sleep(500);
      continue;
    }
    return { status, json: () => JSON.parse(text) as Obj };
  }
};
const bao = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${state.openbao.addr}/v1/${path}`, {
    method,
    headers: {
      'x-vault-token': state.openbao.token,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (res.status >= 300 && res.status !== 404) throw new Error(`bao ${method} ${path}: ${res.status} ${text}`);
  return text;
};
const admin = async (text: string) => {
  const c = new pg.Client({ ...state.postgres });
  await c.connect();
  try {
    return (await c.query(text)).rows as Array<Record<string, unknown>>;
  } finally {
    await c.end();
  }
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pool = async (n: number, work: (i: number) => Promise<void>) => {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(C, n) }, async () => {
      while (next < n) await work(next++);
    }),
  );
};
const ready = (o: Obj) => (o.status?.conditions ?? []).find((c) => c.type === 'Ready')?.status === 'True';

// ---- counting ports --------------------------------------------------------------------------------------------

const calls = new Map<string, number>();
let counting = false;
// Wall time spent inside each port call (summed over concurrent calls), to show where provisioning time goes.
const spent = new Map<string, number>();
const count =
  (name: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      if (!counting) return effect;
      calls.set(name, (calls.get(name) ?? 0) + 1);
      const start = performance.now();
      return Effect.ensuring(
        effect,
        Effect.sync(() => spent.set(name, (spent.get(name) ?? 0) + performance.now() - start)),
      );
    });
/** Every method of a port counted under `<prefix>:<method>` (the Kubernetes ports: where the rest of a round goes). */
const countAll = <S extends object>(prefix: string, service: S): S =>
  Object.fromEntries(
    Object.entries(service).map(([k, f]) => [
      k,
      typeof f === 'function'
        ? (...args: unknown[]) => count(`${prefix}:${k}`)((f as (...a: unknown[]) => Effect.Effect<unknown>)(...args))
        : f,
    ]),
  ) as S;
/**
 * The Kubernetes requests themselves, by verb and kind (`api:<verb>:<Kind>`), below every adapter: what a round
 * costs the API server. Watches and discovery are not counted.
 */
const countingKube = (k: KubeClientService): KubeClientService => {
  const kindOf = (x: unknown) => String((x as { kind?: unknown }).kind ?? '?');
  const wrap = <F>(verb: string, f: F): F =>
    ((x: unknown, ...rest: unknown[]) =>
      count(`api:${verb}:${kindOf(x)}`)(
        (f as unknown as (...a: unknown[]) => Effect.Effect<unknown, unknown>)(x, ...rest),
      )) as unknown as F;
  return {
    ...k,
    get: wrap('get', k.get),
    getMetadata: wrap('get', k.getMetadata),
    create: wrap('create', k.create),
    update: wrap('update', k.update),
    updateStatus: wrap('updateStatus', k.updateStatus),
    apply: wrap('apply', k.apply),
    delete: wrap('delete', k.delete),
  };
};
const countingPorts = <R>(ctx: Context.Context<R>): Context.Context<R> => {
  const s = Context.get(ctx as Context.Context<DatabaseServer>, DatabaseServer);
  const c = Context.get(ctx as Context.Context<CredentialStore>, CredentialStore);
  const b = Context.get(ctx as Context.Context<BindingResources>, BindingResources);
  const p = Context.get(ctx as Context.Context<ProvisioningResources>, ProvisioningResources);
  return ctx.pipe(
    Context.add(BindingResources, countAll('kube', b)),
    Context.add(ProvisioningResources, countAll('kube', p)),
    Context.add(DatabaseServer, {
      ...s,
      facts: (t, n, sc) => count('sql:facts')(s.facts(t, n, sc)),
      step: (t, n, st, sc) => count(`sql:step:${st._tag}`)(s.step(t, n, st, sc)),
      setPassword: (t, n, cr) => count('sql:setPassword')(s.setPassword(t, n, cr)),
      login: (t, cr) => count('sql:login')(s.login(t, cr)),
    }),
    Context.add(CredentialStore, {
      ...c,
      read: (p) => count('kv:read')(c.read(p)),
      readVersioned: (p) => count('kv:readVersioned')(c.readVersioned(p)),
      create: (p, cr) => count('kv:create')(c.create(p, cr)),
      replace: (p, cr, v) => count('kv:replace')(c.replace(p, cr, v)),
      remove: (p) => count('kv:remove')(c.remove(p)),
    }),
  ) as Context.Context<R>;
};

// ---- fixtures --------------------------------------------------------------------------------------------------

const setup = async () => {
  const crds = customResourceDefinitions();
  for (const crd of crds) {
    const path = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`;
    const got = await kube('GET', path);
    if (got.status === 404) await kube('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
  }
  for (let i = 0; i < 200; i++) {
    const r = await kube('GET', base);
    if (r.status === 200 && JSON.stringify(r.json()).includes('postgresqltenants/status')) break;
    await sleep(50);
  }
  const r0 = await kube('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  if (r0.status !== 201) throw new Error(`namespace: ${r0.status}`);
  await admin(
    `CREATE ROLE ${quoteIdentifier(manager)} LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD '${managerPassword}'`,
  );
  await kube('POST', `/api/v1/namespaces/${ns}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: adminSecret },
    stringData: { username: manager, password: managerPassword },
  });
  const r2 = await kube('POST', `${base}/postgresqlinstances`, {
    apiVersion,
    kind: 'PostgreSQLInstance',
    metadata: { name: instanceName, labels: { [label]: 'yes' } },
    spec: {
      endpoint: { host: 'localhost', hostaddr: '127.0.0.1', port: state.postgres.port, sslMode: 'disable' },
      adminCredentialRef: { name: adminSecret },
    },
  });
  if (r2.status !== 201) throw new Error(`instance: ${r2.status}`);
};

const unfinalize = async (path: string) => {
  const o = await kube('GET', path);
  if (o.status !== 200) return;
  const obj = o.json();
  await kube('PUT', path, { ...obj, metadata: { ...obj.metadata, finalizers: [] } });
  await kube('DELETE', path);
};

const cleanup = async () => {
  const list = await kube('GET', tenantsPath);
  const items = list.status === 200 ? (list.json().items ?? []) : [];
  await pool(items.length, async (i) => {
    const t = items[i] as Obj;
    await unfinalize(`${tenantsPath}/${t.metadata.name}`);
    await unfinalize(`${base}/postgresqldatabases/tenant-${t.metadata.uid}`);
  });
  await unfinalize(`${base}/postgresqlinstances/${instanceName}`);
  await kube('DELETE', `/api/v1/namespaces/${ns}`);
  await pool(N, async (i) => {
    for (const n of [ctrlName(i), peerName(i)]) {
      await admin(`DROP DATABASE IF EXISTS ${quoteIdentifier(n)} WITH (FORCE)`).catch(() => undefined);
      await admin(`DROP ROLE IF EXISTS ${quoteIdentifier(n)}`).catch(() => undefined);
    }
  });
  await admin(`DROP ROLE IF EXISTS ${quoteIdentifier(manager)}`).catch(() => undefined);
  const keys = await bao('LIST', `${kvMount}/metadata/${kvBase}/`);
  const names = keys === '' ? [] : ((JSON.parse(keys) as { data?: { keys?: string[] } }).data?.keys ?? []);
  await pool(names.length, async (i) => {
    await bao('DELETE', `${kvMount}/metadata/${kvBase}/${names[i]}`);
  });
};

// ---- the run ---------------------------------------------------------------------------------------------------

const scope = Effect.runSync(Scope.make());
try {
  await setup();
  const kubeLayer = Layer.map(layerFromToken(state.kube, { maxSockets: 64 }), (c) =>
    Context.add(c, KubeClient, countingKube(Context.get(c, KubeClient))),
  );
  const services = Layer.mergeAll(
    KubernetesBindingResourcesLive,
    KubernetesInstanceResourcesLive,
    KubernetesProvisioningResourcesLive,
    PostgresInstanceObserverLive().pipe(Layer.provide(KubernetesAdminSecretsLive(ns))),
    PostgresDatabaseServerLive().pipe(Layer.provide(KubernetesAdminSecretsLive(ns))),
    OpenBaoCredentialStoreLive({
      address: state.openbao.addr,
      token: state.openbao.token,
      mount: kvMount,
      basePath: kvBase,
    }),
    Layer.succeed(ProvisioningSettings, {
      scope: { mount: kvMount, basePath: kvBase },
      openBaoAddress: state.openbao.addr,
    }),
    CryptoEntropyLive,
    ControllerMetricsLive(),
  ).pipe(Layer.provideMerge(kubeLayer));
  const ctx = countingPorts(await Effect.runPromise(Layer.buildWithScope(services, scope)));

  // -- peer: the same SQL and KV writes from a script, same concurrency, same manager login
  const managerPool = new pg.Pool({
    host: '127.0.0.1',
    port: state.postgres.port,
    user: manager,
    password: managerPassword,
    database: state.postgres.database,
    max: C,
  });
  const versionNum = Number(
    (await managerPool.query("SELECT pg_catalog.current_setting('server_version_num')::int AS v")).rows[0].v,
  );
  const t0 = performance.now();
  await pool(N, async (i) => {
    const names = { owner: peerName(i), database: peerName(i), manager };
    const statements = provisionDatabaseStatements(names, versionNum);
    const password = randomBytes(32).toString('base64url');
    if (statements._tag === 'Left') throw statements.left;
    const client = await managerPool.connect();
    try {
      for (const s of statements.right) await client.query(s);
      const pw = setPasswordStatement(names, password);
      if (pw._tag === 'Left') throw pw.left;
      await client.query(pw.right);
    } finally {
      client.release();
    }
    await bao('POST', `${kvMount}/data/${kvBase}/peer-${i}`, {
      options: { cas: 0 },
      data: { username: names.owner, password, database: names.database },
    });
  });
  const peerMs = performance.now() - t0;
  await managerPool.end();

  // -- the controllers: Instance Ready first (not timed), then N Tenants to Ready
  await Effect.runPromise(
    startDatabaseControllers({
      secretNamespace: ns,
      labelSelector: `${label}=yes`,
      concurrency: C,
      tenantReconcile: (namespace, name) => reconcileTenant(namespace, name).pipe(Effect.provide(ctx)),
    }).pipe(Effect.provide(ctx), Scope.extend(scope)),
  );
  const deadline = Date.now() + 60_000;
  while (!ready((await kube('GET', `${base}/postgresqlinstances/${instanceName}`)).json())) {
    if (Date.now() > deadline) throw new Error('Instance not Ready within 60 s');
    await sleep(100);
  }
  calls.clear();
  counting = true; // the same instrument on the provisioning rounds (shows it counts)
  const t1 = performance.now();
  await pool(N, async (i) => {
    const r = await kube('POST', tenantsPath, {
      apiVersion,
      kind: 'PostgreSQLTenant',
      metadata: { name: `t${i}`, labels: { [label]: 'yes' } },
      spec: { provision: { instanceRef: { name: instanceName }, database: ctrlName(i), loginRole: ctrlName(i) } },
    });
    if (r.status !== 201) throw new Error(`POST tenant: ${r.status}`);
  });
  let readyCount = 0;
  for (;;) {
    const items = (await kube('GET', tenantsPath)).json().items ?? [];
    readyCount = items.filter(ready).length;
    if (readyCount === N) break;
    if (performance.now() - t1 > TIMEOUT_MS) throw new Error(`only ${readyCount}/${N} Tenants Ready in time`);
    await sleep(POLL_MS); // a list of N Tenants costs the API server too: not faster than this
  }
  const ctrlMs = performance.now() - t1;
  counting = false;
  const provisioningCounts = new Map(calls);
  const provisioningCalls = JSON.stringify(Object.fromEntries(calls));
  const provisioningSpent = JSON.stringify(
    Object.fromEntries([...spent].map(([k, v]) => [k, Math.round(v / N)] as const)),
  );

  // -- steady state: one resync round of every Ready Tenant, with the SQL and KV ports counted
  await sleep(2_000); // let the controllers' own follow-up rounds settle
  calls.clear();
  counting = true;
  const t2 = performance.now();
  await pool(N, async (i) => {
    await Effect.runPromise(reconcileTenant(ns, `t${i}`).pipe(Effect.provide(ctx)));
  });
  const resyncMs = performance.now() - t2;
  counting = false;
  const sqlCalls = [...calls].filter(([k]) => k.startsWith('sql:')).reduce((a, [, v]) => a + v, 0);
  const kvCalls = [...calls].filter(([k]) => k.startsWith('kv:')).reduce((a, [, v]) => a + v, 0);

  const ratio = ctrlMs / peerMs;
  print(`ayatori-database provisioning bench: ${N} tenants, concurrency ${C}`);
  print(`  peer (direct SQL + KV writes):   ${peerMs.toFixed(0)} ms (${(peerMs / N).toFixed(1)} ms/tenant)`);
  print(`  controllers to all Ready:        ${ctrlMs.toFixed(0)} ms (${(ctrlMs / N).toFixed(1)} ms/tenant)`);
  print(`  ratio controllers / peer:        ${ratio.toFixed(2)}× (goal ≤ 1.5×) ${ratio <= 1.5 ? 'OK' : 'OVER'}`);
  print(`  provisioning port calls: ${provisioningCalls}`);
  const apiCalls = [...provisioningCounts].filter(([k]) => k.startsWith('api:'));
  const apiTotal = apiCalls.reduce((a, [, v]) => a + v, 0);
  print(`  Kubernetes requests per tenant:  ${(apiTotal / N).toFixed(2)} (${apiTotal} total)`);
  print(
    `  Kubernetes requests per tenant by verb/kind: ${JSON.stringify(Object.fromEntries(apiCalls.map(([k, v]) => [k, +(v / N).toFixed(2)])))}`,
  );
  print(`  provisioning port time per tenant (ms, summed): ${provisioningSpent}`);
  print(`  resync of ${N} Ready tenants:     ${resyncMs.toFixed(0)} ms`);
  print(
    `  SQL requests per resync:         ${(sqlCalls / N).toFixed(2)} (${sqlCalls} total) (goal 0) ${sqlCalls === 0 ? 'OK' : 'OVER'}`,
  );
  print(
    `  KV requests per resync:          ${(kvCalls / N).toFixed(2)} (${kvCalls} total) (goal 0) ${kvCalls === 0 ? 'OK' : 'OVER'}`,
  );
  print(`  by port call: ${JSON.stringify(Object.fromEntries(calls))}`);
} finally {
  await Effect.runPromise(Scope.close(scope, Exit.void)).catch(() => undefined);
  await cleanup().catch((e: unknown) => printError('cleanup:', e));
  kubeAgent.destroy();
}

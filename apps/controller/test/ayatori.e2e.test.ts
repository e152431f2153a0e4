// The controller app as a real process (`src/main.ts` under tsx) with the Ayatori Database module, against the test
// bed: the real kube-apiserver (Ayatori + KOS CRDs installed), the machine's PostgreSQL (a manager role created
// here), leader election through a real Lease. An Instance becomes Ready and a Tenant binds through the running
// process; /readyz and /metrics show the controllers; SIGTERM stops it cleanly (exit 0, workers before pools, Lease
// handed back). `--modules=kos` starts no Ayatori controller. The informers are restricted to this file's label
// (`--database-label-selector`): other test files share the API server.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Api, Domain } from '@homelab/ayatori-database';
import { grantManagerRbac } from '@homelab/ayatori-database/testing';
import {
  adminQuery,
  eventually as poll,
  kubeObjects,
  kubeRequest,
  testbed,
  useDatabase,
  useNamespace,
} from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { layerFromToken } from '@homelab/kube';
import { startController } from '../src/index.js';
import { instanceBody, postAdminSecret, prepareAyatoriCluster, sleep, spawnController, testConfig } from './support.js';

const { SetupMessage } = Domain;
const ns = useNamespace('ctrl-ayatori');
const db = useDatabase('ctrl_ay');
const suffix = randomBytes(4).toString('hex');
const label = `ctrl-ayatori-${suffix}`;
const manager = `ctrl_ay_mgr_${suffix}`;
const base = `/apis/${Api.Group}/${Api.Version}`;
const instances = `${base}/postgresqlinstances`;
const tenants = (namespace: string) => `${base}/namespaces/${namespace}/postgresqltenants`;
const rbacCleanup: string[] = [];
const children: ChildProcess[] = [];

interface Obj {
  metadata: { name: string; uid: string; finalizers?: string[] };
  spec?: Record<string, unknown>;
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
const eventually = (what: string, check: () => Promise<boolean>, ms = 20_000): Promise<number> =>
  poll(what, check, ms, 100);

/** `npm start` as a child process; resolves with its URL once it listens, and the output collected so far. */
const startProcess = async (args: ReadonlyArray<string>, options: { readonly waitListening?: boolean } = {}) => {
  const { child, output, exited, listening } = spawnController(args, children);
  if (options.waitListening === false) return { child, url: '', output, exited };
  let timer: NodeJS.Timeout | undefined;
  const url = await Promise.race([
    listening,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no start-up line: ${output.text}`)), 60_000);
    }),
  ]).finally(() => clearTimeout(timer));
  if (url === undefined) throw new Error(`exited before listening: ${output.text}`);
  return { child, url, output, exited };
};

beforeAll(async () => {
  await prepareAyatoriCluster();
  await sql(`CREATE ROLE "${manager}" LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD 'CTRL-TEST-ONLY-${suffix}'`);
}, 120_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const path of cleanup.reverse()) await purge(path);
  for (const path of rbacCleanup.reverse()) await kubeRequest('DELETE', path);
  await sql(`DROP ROLE IF EXISTS "${manager}"`).catch(() => undefined);
});

describe('the controller process with the Ayatori Database module', () => {
  it('default modules (kos,ayatori) with leader election: an Instance becomes Ready and a Tenant binds through the running process; /readyz and /metrics show both controllers; SIGTERM exits 0, workers before pools, Lease released', async () => {
    const lease = `ctrl-ayatori-${suffix}`;
    const proc = await startProcess([
      `--database-secret-namespace=${ns.name}`,
      `--database-label-selector=${label}=yes`,
      '--leader-elect',
      `--leader-election-namespace=${ns.name}`,
      `--leader-election-id=${lease}`,
    ]);
    await eventually('controllers running', async () =>
      proc.output.text.includes('ayatori database controllers running: database-binding, database-instance'),
    );
    const holder = (await get(`/apis/coordination.k8s.io/v1/namespaces/${ns.name}/leases/${lease}`)) as unknown as {
      spec: { holderIdentity?: string | null };
    };
    expect(holder.spec.holderIdentity).toMatch(/_[0-9a-f]{8}$/);
    expect((await fetch(`${proc.url}/readyz`)).status).toBe(200);

    const instanceName = `ctrl-ay-${suffix}`;
    await post(instances, instanceBody(instanceName, { [label]: 'yes' }, db.database));
    await postAdminSecret(ns.name, instanceName, manager, `CTRL-TEST-ONLY-${suffix}`);
    await eventually('Instance Ready', async () => ready(await get(`${instances}/${instanceName}`))?.status === 'True');
    const tenant = await post(tenants(ns.name), {
      apiVersion: `${Api.Group}/${Api.Version}`,
      kind: 'PostgreSQLTenant',
      metadata: { name: `app${suffix}`, namespace: ns.name, labels: { [label]: 'yes' } },
      spec: { provision: { instanceRef: { name: instanceName } } },
    });
    cleanup.push(`${base}/postgresqldatabases/tenant-${tenant.metadata.uid}`);
    await eventually(
      'Tenant Bound',
      async () => (await get(`${tenants(ns.name)}/app${suffix}`))?.status?.phase === 'Bound',
    );
    expect(ready(await get(`${tenants(ns.name)}/app${suffix}`))?.reason).toBe('BindingComplete');
    expect(await backends()).toBeGreaterThanOrEqual(1);

    const metrics = await (await fetch(`${proc.url}/metrics`)).text();
    for (const controller of ['database-binding', 'database-instance']) {
      const line = metrics
        .split('\n')
        .find(
          (l) =>
            l.startsWith('controller_runtime_reconcile_total') &&
            l.includes(`controller="${controller}"`) &&
            l.includes('result="requeue_after"'),
        );
      expect(Number(line?.split(' ').at(-1)), controller).toBeGreaterThan(0);
    }
    expect(metrics).toContain('kos_controlplane_requests_total');
    // the KOS module is served by the same process
    expect((await fetch(`${proc.url}/api/v1/resources/Application?namespace=${ns.name}`)).status).toBe(200);

    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
    const out = proc.output.text;
    expect(out.indexOf('ayatori database controllers stopped; closing PostgreSQL pools')).toBeGreaterThan(
      out.indexOf('shutting down'),
    );
    expect(out.indexOf('"message":"stopped"', out.indexOf('closing PostgreSQL pools'))).toBeGreaterThan(0);
    await eventually('no manager backends', async () => (await backends()) === 0, 5_000);
    const released = (await get(`/apis/coordination.k8s.io/v1/namespaces/${ns.name}/leases/${lease}`)) as unknown as {
      spec: { holderIdentity?: string | null };
    };
    expect(released.spec.holderIdentity ?? null).toBeNull();
    expect(out).not.toContain(`CTRL-TEST-ONLY-${suffix}`);
  });

  it('--modules=kos starts no Ayatori controller: no controller log line, no controller metrics, a labelled Tenant is left untouched', async () => {
    const proc = await startProcess([
      '--modules=kos',
      `--database-secret-namespace=${ns.name}`,
      `--database-label-selector=${label}=kos`,
    ]);
    await post(tenants(ns.name), {
      apiVersion: `${Api.Group}/${Api.Version}`,
      kind: 'PostgreSQLTenant',
      metadata: { name: `kosonly${suffix}`, namespace: ns.name, labels: { [label]: 'kos' } },
      spec: { databaseRef: { name: `nothing-${suffix}` } },
    });
    expect((await fetch(`${proc.url}/readyz`)).status).toBe(200);
    await sleep(3_000); // what a running binding controller would have answered within (DependencyUnavailable)
    const t = await get(`${tenants(ns.name)}/kosonly${suffix}`);
    expect(t?.status?.conditions ?? []).toHaveLength(0);
    expect(t?.metadata.finalizers ?? []).toHaveLength(0);
    const metrics = await (await fetch(`${proc.url}/metrics`)).text();
    expect(metrics).not.toContain('controller="database-binding"');
    expect(metrics).not.toContain('controller="database-instance"');
    expect(proc.output.text).not.toContain('ayatori database controllers');
    expect(proc.output.text).toContain('(modules: kos)');
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  });

  it('--modules=ayatori serves health and metrics but no KOS API', async () => {
    const proc = await startProcess(['--modules=ayatori', `--database-label-selector=${label}=none`]);
    await eventually('binding controller running', async () =>
      proc.output.text.includes('ayatori database controllers running: database-binding (Instance controller disabled'),
    );
    expect((await fetch(`${proc.url}/readyz`)).status).toBe(200);
    expect((await fetch(`${proc.url}/api/v1/resources/Application`)).status).toBe(404);
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  });

  it('leader election across two processes: the second waits as a ready standby and takes over at once when the leader stops (Lease handed back)', async () => {
    const lease = `ctrl-ayatori-ha-${suffix}`;
    const args = [
      `--modules=ayatori`,
      `--database-label-selector=${label}=ha`,
      '--leader-elect',
      `--leader-election-namespace=${ns.name}`,
      `--leader-election-id=${lease}`,
    ];
    const first = await startProcess(args);
    await eventually('first leads', async () => first.output.text.includes('ayatori database controllers running'));
    const second = await startProcess(args);
    await eventually('second waits for the Lease', async () => second.output.text.includes('waiting for the Lease'));
    expect((await fetch(`${second.url}/readyz`)).status).toBe(200); // a standby replica is ready
    await sleep(3_000); // several retry periods: the held Lease keeps it waiting
    expect(second.output.text).not.toContain('ayatori database controllers running');
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    await eventually(
      'second takes over',
      async () => second.output.text.includes('ayatori database controllers running'),
      10_000,
    );
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('an invalid --database-secret-namespace ends the process with exit 1 and the seed setup message', async () => {
    const proc = await startProcess(
      ['--modules=ayatori', '--database-secret-namespace=Not_A_Label', `--database-label-selector=${label}=none`],
      { waitListening: false },
    );
    expect(await proc.exited).toBe(1);
    expect(proc.output.text).toContain(SetupMessage.instanceObserverRequired);
  });

  it('under exactly the generated RBAC (manager ClusterRole, credentials Role, leader-election Role), the process (ServiceAccount token kubeconfig) leads, makes an Instance Ready and binds a Tenant', async () => {
    const sa = 'controller-manager';
    const roleName = `ctrl-ay-manager-${suffix}`;
    const create = async (path: string, body: unknown) => {
      const r = await kubeRequest('POST', path, body);
      if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${r.body}`);
    };
    await grantManagerRbac({ create, cleanup: rbacCleanup, namespace: ns.name, serviceAccount: sa, roleName });
    // the generated leader-election Role and RoleBinding (kubebuilder's scaffold, deploy/rbac/ayatori/leader_election_role*.yaml)
    const [leaderRole, leaderBinding] = Api.leaderElectionRole(ns.name, sa);
    await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns.name}/roles`, leaderRole);
    await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns.name}/rolebindings`, leaderBinding);
    const reply = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/serviceaccounts/${sa}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600 },
    });
    expect(reply.status).toBe(201);
    const token = (JSON.parse(reply.body) as { status: { token: string } }).status.token;
    const { kube } = testbed();
    const dir = mkdtempSync(join(tmpdir(), 'ctrl-ay-'));
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      `apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: ${kube.server}\n    certificate-authority-data: ${Buffer.from(kube.caCert).toString('base64')}\nusers:\n- name: sa\n  user:\n    token: ${token}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: sa\ncurrent-context: t\n`,
      { mode: 0o600 },
    );
    await sleep(1_000); // RBAC reaches the authorizer quickly but not instantly
    const lease = `ctrl-ayatori-rbac-${suffix}`;
    const proc = await startProcess([
      '--modules=ayatori',
      `--kubeconfig=${kubeconfig}`,
      `--database-secret-namespace=${ns.name}`,
      `--database-label-selector=${label}=rbac`,
      '--leader-elect',
      `--leader-election-namespace=${ns.name}`,
      `--leader-election-id=${lease}`,
    ]);
    try {
      await eventually('controllers running', async () =>
        proc.output.text.includes('ayatori database controllers running: database-binding, database-instance'),
      );
      const instanceName = `ctrl-ay-rbac-${suffix}`;
      await post(instances, instanceBody(instanceName, { [label]: 'rbac' }, db.database));
      await postAdminSecret(ns.name, instanceName, manager, `CTRL-TEST-ONLY-${suffix}`);
      await eventually(
        'Instance Ready',
        async () => ready(await get(`${instances}/${instanceName}`))?.status === 'True',
      );
      const tenant = await post(tenants(ns.name), {
        apiVersion: `${Api.Group}/${Api.Version}`,
        kind: 'PostgreSQLTenant',
        metadata: { name: `rbac${suffix}`, namespace: ns.name, labels: { [label]: 'rbac' } },
        spec: { provision: { instanceRef: { name: instanceName } } },
      });
      cleanup.push(`${base}/postgresqldatabases/tenant-${tenant.metadata.uid}`);
      await eventually(
        'Tenant Bound',
        async () => (await get(`${tenants(ns.name)}/rbac${suffix}`))?.status?.phase === 'Bound',
      );
      expect(proc.output.text).not.toMatch(/forbidden/i);
    } finally {
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('/readyz answers 503 naming the Ayatori module when its controllers failed (in-process, the fatal hook not exiting)', async () => {
    const fatal: string[] = [];
    const handle = await startController(
      testConfig({
        modules: new Set(['ayatori']),
        databaseSecretNamespace: 'Not_A_Label',
        databaseLabelSelector: `${label}=none`,
      }),
      {
        kube: layerFromToken(testbed().kube),
        log: () => undefined,
        onFatal: (reason) => fatal.push(reason),
      },
    );
    try {
      await eventually('fatal reported', async () => fatal.length > 0, 10_000);
      expect(fatal[0]).toContain(SetupMessage.instanceObserverRequired);
      expect(handle.ayatori?.state()).toBe('failed');
      const r = await fetch(`${handle.url}/readyz`);
      expect(r.status).toBe(503);
      expect(await r.text()).toContain('the Ayatori database controllers are failed');
      expect((await fetch(`${handle.url}/healthz`)).status).toBe(200);
    } finally {
      await handle.close();
    }
  });
});

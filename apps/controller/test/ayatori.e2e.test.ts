// The controller app as a real process (`src/main.ts` under tsx) with the Ayatori Database module, against the test
// bed: the real kube-apiserver (Ayatori + KOS CRDs installed), the machine's PostgreSQL (a manager role created
// here), leader election through a real Lease. An Instance becomes Ready and a Tenant binds through the running
// process; /readyz and /metrics show the controllers; SIGTERM stops it cleanly (exit 0, workers before pools, Lease
// handed back). `--modules=kos` starts no Ayatori controller. The informers are restricted to this file's label
// (`--database-label-selector`): other test files share the API server.
import { Api, Domain } from '@homelab/ayatori-database';
import { grantManagerRbac } from '@homelab/ayatori-database/testing';
import { eventually as poll, testbed } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { layerFromToken } from '@homelab/kube';
import { startController } from '../src/index.js';
import {
  adminSql as sql,
  ayatoriProcessFile,
  instanceBody,
  postAdminSecret,
  readyCondition as ready,
  sleep,
  spawnController,
  stopProcess,
  testConfig,
} from './support.js';

const { SetupMessage } = Domain;
const file = ayatoriProcessFile('ctrl-ayatori', { provisioning: false });
const { ns, db, suffix, label, manager, managerPassword, children, instances } = file;
const tenants = file.tenantsPath;
const base = `/apis/${Api.Group}/${Api.Version}`;
/** Objects `post` creates land in `cleanup`; the file purges them after its tests. */
const { get, post, created: cleanup } = file.objects;
const backends = async () =>
  Number(
    (await sql('SELECT count(*)::int AS n FROM pg_catalog.pg_stat_activity WHERE usename = $1', [manager]))[0]?.['n'],
  );
const eventually = (what: string, check: () => Promise<boolean>, ms = 20_000): Promise<number> =>
  poll(what, check, ms, 100);

/** `npm start` as a child process; resolves with its URL once it listens, and the output collected so far. */
const startProcess = async (args: ReadonlyArray<string>, options: { readonly waitListening?: boolean } = {}) => {
  const { child, output, exited, listening } = spawnController(args, children, { entry: file.mainEntry() });
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
    await postAdminSecret(ns.name, instanceName, manager, managerPassword);
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

    await stopProcess(proc);
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
    expect(out).not.toContain(managerPassword);
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
    await stopProcess(proc);
  });

  it('--modules=ayatori serves health and metrics but no KOS API; --database-workers is its controller’s concurrency', async () => {
    const proc = await startProcess([
      '--modules=ayatori',
      `--database-label-selector=${label}=none`,
      '--database-workers=3',
    ]);
    await eventually('binding controller running', async () =>
      proc.output.text.includes('ayatori database controllers running: database-binding (Instance controller disabled'),
    );
    expect((await fetch(`${proc.url}/readyz`)).status).toBe(200);
    expect(await (await fetch(`${proc.url}/metrics`)).text()).toContain(
      'controller_runtime_max_concurrent_reconciles{controller="database-binding"} 3',
    );
    expect((await fetch(`${proc.url}/api/v1/resources/Application`)).status).toBe(404);
    await stopProcess(proc);
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
    await stopProcess(first);
    await eventually(
      'second takes over',
      async () => second.output.text.includes('ayatori database controllers running'),
      10_000,
    );
    await stopProcess(second);
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
    const grant = file.rbacGrant(sa);
    await grantManagerRbac({ ...grant, roleName: `ctrl-ay-manager-${suffix}` });
    // the generated leader-election Role and RoleBinding (kubebuilder's scaffold, deploy/rbac/ayatori/leader_election_role*.yaml)
    const [leaderRole, leaderBinding] = Api.leaderElectionRole(ns.name, sa);
    await grant.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns.name}/roles`, leaderRole);
    await grant.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns.name}/rolebindings`, leaderBinding);
    const kubeconfig = await file.serviceAccountKubeconfig(sa, [
      tenants(),
      `/api/v1/namespaces/${ns.name}/secrets`,
      `/apis/coordination.k8s.io/v1/namespaces/${ns.name}/leases/ctrl-ayatori-rbac-${suffix}`,
    ]);
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
      await postAdminSecret(ns.name, instanceName, manager, managerPassword);
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
      await stopProcess(proc);
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

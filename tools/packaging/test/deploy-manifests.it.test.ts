// Issue 26 item 3 (decision 0283): deploy/ rendered by kustomize (built from the Go module proxy into the test bed's
// cache, like its other binaries) and applied server-side to the test bed's API server. Every object must be
// accepted: the apps' objects for real in this file's namespace (under a unique name prefix, so the cluster-scoped
// RBAC cannot collide), the shared CRDs as a server-side dry run. The rendered RBAC is then asked, through
// SubjectAccessReviews, whether the controller's ServiceAccount may do what the controller does.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { Effect } from 'effect';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBinary } from '@homelab/testbed';
import { kubeRequest, uniqueName, useNamespace } from '@homelab/testbed/vitest';

interface K8sObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string> };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly spec?: any;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly [key: string]: any;
}

const root = resolve(import.meta.dirname, '../../..');
const deploy = join(root, 'deploy');
const ns = useNamespace('deploy');
let kustomize: string;
let prefix: string;
let full: K8sObject[];
let applied: K8sObject[];
/** deploy/ with the component nsd-two-shards (decision 0485), names final as in deploy/kustomization.yaml */
let sharded: K8sObject[];
const scratch = mkdtempSync(join(tmpdir(), 'homelab-deploy-'));

const render = (dir: string): K8sObject[] =>
  parseAllDocuments(execFileSync(kustomize, ['build', dir], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }))
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);

/** A kustomization in `dir` (created) with these lines after its apiVersion and kind; kustomize takes no absolute root. */
const writeKustomization = (dir: string, lines: readonly string[]): string => {
  execFileSync('mkdir', ['-p', dir]);
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    ['apiVersion: kustomize.config.k8s.io/v1beta1', 'kind: Kustomization', ...lines, ''].join('\n'),
  );
  return dir;
};

const byKind = (objects: readonly K8sObject[], kind: string) => objects.filter((o) => o.kind === kind);
const one = (objects: readonly K8sObject[], kind: string, name: string): K8sObject => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (found === undefined) throw new Error(`${kind} ${name} is not in the rendered manifests`);
  return found;
};

/** The REST path of an object, from the API server's discovery (resource name, namespaced or not). */
const discovery = new Map<string, { resource: string; namespaced: boolean }>();
const pathOf = async (o: K8sObject): Promise<string> => {
  const base = o.apiVersion.includes('/') ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  const key = `${o.apiVersion}/${o.kind}`;
  if (!discovery.has(key)) {
    const list = (await kubeRequest('GET', base)).json() as {
      resources: Array<{ name: string; kind: string; namespaced: boolean }>;
    };
    for (const r of list.resources)
      if (!r.name.includes('/'))
        discovery.set(`${o.apiVersion}/${r.kind}`, { resource: r.name, namespaced: r.namespaced });
  }
  const d = discovery.get(key);
  if (d === undefined) throw new Error(`the API server does not serve ${key}`);
  return d.namespaced
    ? `${base}/namespaces/${o.metadata.namespace}/${d.resource}/${o.metadata.name}`
    : `${base}/${d.resource}/${o.metadata.name}`;
};

const apply = async (o: K8sObject, dryRun: boolean) =>
  kubeRequest(
    'PATCH',
    `${await pathOf(o)}?fieldManager=homelab-deploy-test&force=true${dryRun ? '&dryRun=All' : ''}`,
    JSON.stringify(o),
    'application/apply-patch+yaml',
  );

beforeAll(async () => {
  kustomize = await Effect.runPromise(ensureBinary('kustomize'));
  prefix = uniqueName('d');
  full = render(deploy);
  // The same base as a user's overlay would take it: another namespace, another prefix.
  const overlay = join(scratch, 'overlay');
  applied = render(
    writeKustomization(overlay, [
      `namespace: ${ns.name}`,
      `namePrefix: ${prefix}-`,
      'resources:',
      `  - ${relative(overlay, join(deploy, 'base'))}`,
    ]),
  );
  const shards = join(scratch, 'sharded');
  sharded = render(
    writeKustomization(shards, [
      'resources:',
      `  - ${relative(shards, join(deploy, 'base'))}`,
      'components:',
      `  - ${relative(shards, join(deploy, 'components', 'nsd-two-shards'))}`,
    ]),
  );
}, 600_000);

afterAll(async () => {
  rmSync(scratch, { recursive: true, force: true });
  // cluster-scoped objects do not go with the namespace
  for (const o of applied ?? [])
    if (o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding')
      await kubeRequest('DELETE', await pathOf(o)).catch(() => undefined);
});

describe('deploy/ (kustomize)', () => {
  it('renders the CRDs of both modules, each with an editor and a viewer role, and the apps in homelab-system', () => {
    const crdFiles = ['kos', 'ayatori'].flatMap((d) => readdirSync(join(deploy, 'crds', d)));
    const crds = byKind(full, 'CustomResourceDefinition');
    expect(crds).toHaveLength(crdFiles.length);
    const roles = new Set(byKind(full, 'ClusterRole').map((r) => r.metadata.name));
    for (const crd of crds) {
      const plural = crd.spec.names.plural as string;
      expect(roles, plural).toContain(`homelab-${plural}-editor`);
      expect(roles, plural).toContain(`homelab-${plural}-viewer`);
    }
    for (const o of full.filter(
      (x) => !['CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding', 'Namespace'].includes(x.kind),
    ))
      expect(o.metadata.namespace, `${o.kind} ${o.metadata.name}`).toBe('homelab-system');
    expect(one(full, 'Namespace', 'homelab-system')).toBeDefined();
    expect(
      byKind(full, 'Deployment')
        .map((d) => d.metadata.name)
        .sort(),
    ).toEqual(['homelab-controller', 'homelab-nsd']);
    expect(byKind(full, 'DaemonSet').map((d) => d.metadata.name)).toEqual(['homelab-ns-daemon']);
  });

  it('controller: 2 replicas under leader election, probes on the probe listener, non-root read-only, a PDB, the continue key from a Secret', () => {
    const d = one(full, 'Deployment', 'homelab-controller');
    expect(d.spec.replicas).toBe(2);
    const pod = d.spec.template.spec;
    const c = pod.containers[0];
    expect(c.args).toEqual(expect.arrayContaining(['--leader-elect', '--health-host=0.0.0.0', '--health-port=8081']));
    expect(c.ports).toEqual([{ name: 'health', containerPort: 8081 }]);
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'health' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'health' });
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    expect(c.resources.requests).toBeDefined();
    expect(c.resources.limits.memory).toBeDefined();
    const key = c.env.find((e: { name: string }) => e.name === 'KOS_CONTINUE_KEY');
    expect(key.valueFrom.secretKeyRef).toEqual({ name: 'homelab-controller-continue-key', key: 'continue-key' });
    expect(pod.serviceAccountName).toBe('homelab-controller-manager');
    const pdb = one(full, 'PodDisruptionBudget', 'homelab-controller');
    expect(pdb.spec.minAvailable).toBe(1);
    expect(d.spec.template.metadata.labels).toMatchObject(pdb.spec.selector.matchLabels);
    // the generated Ayatori bindings and the KOS binding name the account the pods run as
    const subjects = [...byKind(full, 'RoleBinding'), ...byKind(full, 'ClusterRoleBinding')].flatMap((b) => b.subjects);
    expect(subjects.length).toBeGreaterThanOrEqual(4);
    for (const s of subjects)
      expect(s).toEqual({ kind: 'ServiceAccount', name: 'homelab-controller-manager', namespace: 'homelab-system' });
  });

  it('nsd: two replicas on the authority lease (instance = pod name), probes on the probe listener, DSN and the shared key from Secrets; ns-daemon: probe listener, owner endpoints left on loopback', () => {
    const nsd = one(full, 'Deployment', 'homelab-nsd');
    expect(nsd.spec.replicas).toBe(2);
    expect(nsd.spec.strategy.type).toBe('Recreate'); // a standby is never ready while the holder lives (decision 0452)
    const pod = nsd.spec.template.spec;
    const c = pod.containers[0];
    expect(c.envFrom).toEqual([{ secretRef: { name: 'homelab-nsd-database' } }]);
    const nsdEnv = new Map((c.env as Array<{ name: string; value?: string }>).map((e) => [e.name, e]));
    expect(Number(nsdEnv.get('NSD_AUTHORITY_LEASE_MS')?.value)).toBeGreaterThanOrEqual(100);
    expect(nsdEnv.get('NSD_INSTANCE')).toEqual({
      name: 'NSD_INSTANCE',
      valueFrom: { fieldRef: { fieldPath: 'metadata.name' } },
    });
    expect(nsdEnv.get('NSD_HEALTH_PORT')).toEqual({ name: 'NSD_HEALTH_PORT', value: '7401' });
    expect(c.ports).toEqual([
      { name: 'control', containerPort: 7400 },
      { name: 'health', containerPort: 7401 },
    ]);
    // a standby does not listen on the control port: both probes go to the probe listener, up from the start
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'health' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'health' });
    const keyFile = nsdEnv.get('NSD_KEY_FILE')?.value ?? '';
    const keyMount = (c.volumeMounts as Array<{ name: string; mountPath: string }>).find((m) =>
      keyFile.startsWith(`${m.mountPath}/`),
    );
    const keyVolume = (pod.volumes as Array<{ name: string; secret?: { secretName: string } }>).find(
      (v) => v.name === keyMount?.name,
    );
    expect(keyVolume?.secret?.secretName).toBe('homelab-nsd-key');
    expect(byKind(full, 'PersistentVolumeClaim')).toEqual([]);
    expect(one(full, 'Service', 'homelab-nsd').spec.ports[0].port).toBe(7400);
    const ds = one(full, 'DaemonSet', 'homelab-ns-daemon').spec.template.spec;
    const env = Object.fromEntries(
      (ds.containers[0].env as Array<{ name: string; value?: string }>).map((e) => [e.name, e.value]),
    );
    expect(env).toMatchObject({ NS_HEALTH_HOST: '0.0.0.0', NS_HEALTH_PORT: '7411' });
    expect(env['NS_HOST']).toBeUndefined(); // the owner endpoints keep their loopback default
    expect(ds.containers[0].readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'health' });
    expect(ds.containers[0].securityContext.runAsNonRoot).toBe(true);
  });

  it('nsd in N authority shards (component nsd-two-shards): shards exactly 1..N of one N, each the base pod with its NSD_SHARD on 2 replicas, its own Service, and every ns-daemon given each shard’s Service by index', async () => {
    const base = one(full, 'Deployment', 'homelab-nsd');
    const deployments = byKind(sharded, 'Deployment').filter(
      (d) => d.spec.template.metadata.labels['app.kubernetes.io/name'] === 'nsd',
    );
    const shardOfDeployment = (d: K8sObject): string =>
      (d.spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>).find(
        (e) => e.name === 'NSD_SHARD',
      )?.value ?? 'none';
    const shards = deployments.map(shardOfDeployment).sort();
    const count = deployments.length;
    expect(count).toBeGreaterThanOrEqual(2);
    expect(shards).toEqual(Array.from({ length: count }, (_, i) => `${i + 1}/${count}`));
    const services = byKind(sharded, 'Service');
    const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
      Object.entries(selector).every(([k, v]) => labels[k] === v);
    const urls = new Map(
      (
        (
          one(sharded, 'DaemonSet', 'homelab-ns-daemon').spec.template.spec.containers[0].env as Array<{
            name: string;
            value?: string;
          }>
        ).find((e) => e.name === 'NS_NSD_URL')?.value ?? ''
      )
        .split(',')
        .map((entry) => entry.split('=') as [string, string]),
    );
    expect([...urls.keys()].sort()).toEqual(Array.from({ length: count }, (_, i) => String(i + 1)));
    /** The pod template without what makes it shard k: NSD_SHARD, the shard label in labels and anti-affinity. */
    const unsharded = (d: K8sObject) => {
      const t = structuredClone(d.spec.template);
      const c = t.spec.containers[0];
      c.env = c.env.filter((e: { name: string }) => e.name !== 'NSD_SHARD');
      delete t.metadata.labels['homelab.tsic.top/nsd-shard'];
      for (const term of t.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution)
        delete term.podAffinityTerm.labelSelector.matchLabels['homelab.tsic.top/nsd-shard'];
      return t;
    };
    const others = (d: K8sObject) => deployments.filter((x) => x !== d);
    for (const d of deployments) {
      const index = shardOfDeployment(d).split('/')[0] as string;
      const labels = d.spec.template.metadata.labels as Record<string, string>;
      // the pod of deploy/base/nsd.yaml on the authority lease (decision 0452): 2 replicas, Recreate, same template
      expect([d.spec.replicas, d.spec.strategy.type], d.metadata.name).toEqual([2, 'Recreate']);
      expect(unsharded(d), d.metadata.name).toEqual(base.spec.template);
      // its selector and anti-affinity match its own pods only, never another shard's
      expect(selects(d.spec.selector.matchLabels, labels), d.metadata.name).toBe(true);
      const anti =
        d.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm
          .labelSelector.matchLabels;
      expect(selects(anti, labels), d.metadata.name).toBe(true);
      for (const o of others(d)) {
        expect(selects(d.spec.selector.matchLabels, o.spec.template.metadata.labels), d.metadata.name).toBe(false);
        expect(selects(anti, o.spec.template.metadata.labels), d.metadata.name).toBe(false);
      }
      // exactly one Service routes to this shard's pods and to no other shard's; the daemons' list names it at k
      const mine = services.filter((x) => selects(x.spec.selector, labels));
      expect(
        mine.map((x) => x.metadata.name),
        d.metadata.name,
      ).toHaveLength(1);
      const service = mine[0] as K8sObject;
      for (const o of others(d)) expect(selects(service.spec.selector, o.spec.template.metadata.labels)).toBe(false);
      expect(urls.get(index), d.metadata.name).toBe(
        `http://${service.metadata.name}.${service.metadata.namespace}.svc:${service.spec.ports[0].port}`,
      );
    }
    // the sharded objects are accepted by the API server too (this file's namespace, the shard Deployments and
    // Services and the daemons under another prefix)
    const overlay = join(scratch, 'sharded-applied');
    writeKustomization(overlay, [
      `namespace: ${ns.name}`,
      `namePrefix: ${prefix}s-`,
      'resources:',
      `  - ${relative(overlay, join(scratch, 'sharded'))}`,
    ]);
    const refused: string[] = [];
    for (const o of render(overlay).filter((x) => ['Deployment', 'Service', 'DaemonSet'].includes(x.kind))) {
      const r = await apply(o, false);
      if (r.status !== 200 && r.status !== 201) refused.push(`${o.kind} ${o.metadata.name}: ${r.status} ${r.body}`);
    }
    expect(refused).toEqual([]);
  });

  it('every object is accepted by a server-side apply on the API server (CRDs as a dry run)', async () => {
    const refused: string[] = [];
    for (const o of byKind(full, 'CustomResourceDefinition')) {
      const r = await apply(o, true);
      if (r.status !== 200 && r.status !== 201) refused.push(`CRD ${o.metadata.name}: ${r.status} ${r.body}`);
    }
    // Namespace first (it is this file's namespace, renamed by the overlay), then the rest in rendered order.
    const ordered = [...byKind(applied, 'Namespace'), ...applied.filter((o) => o.kind !== 'Namespace')];
    expect(ordered.length).toBe(full.length - byKind(full, 'CustomResourceDefinition').length);
    for (const o of ordered) {
      const r = await apply(o, false);
      if (r.status !== 200 && r.status !== 201) refused.push(`${o.kind} ${o.metadata.name}: ${r.status} ${r.body}`);
    }
    expect(refused).toEqual([]);
    const ds = (
      await kubeRequest('GET', `/apis/apps/v1/namespaces/${ns.name}/daemonsets/${prefix}-homelab-ns-daemon`)
    ).json() as K8sObject;
    expect(ds.metadata.labels).toMatchObject({ 'app.kubernetes.io/part-of': 'homelab' });
  });

  it("the applied RBAC lets the controller's ServiceAccount do the controller's work, and no more than asked", async () => {
    const user = `system:serviceaccount:${ns.name}:${prefix}-homelab-controller-manager`;
    const may = async (attrs: Record<string, string>): Promise<boolean> => {
      const r = await kubeRequest('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${ns.name}`],
          resourceAttributes: attrs,
        },
      });
      expect(r.status, r.body).toBe(201);
      return (r.json() as { status: { allowed: boolean } }).status.allowed;
    };
    // KOS reconcilers
    expect(await may({ group: 'kos.tsic.top', resource: 'applications', verb: 'watch' })).toBe(true);
    expect(await may({ group: 'kos.tsic.top', resource: 'applications', subresource: 'status', verb: 'patch' })).toBe(
      true,
    );
    expect(await may({ group: 'apps', resource: 'deployments', verb: 'create', namespace: 'default' })).toBe(true);
    expect(await may({ group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions', verb: 'get' })).toBe(true);
    // Ayatori controllers (generated ClusterRole) and the shared leader-election Role, in its namespace only
    expect(await may({ group: 'database.ayatori.ddupan.top', resource: 'postgresqltenants', verb: 'list' })).toBe(true);
    expect(await may({ group: 'coordination.k8s.io', resource: 'leases', verb: 'update', namespace: ns.name })).toBe(
      true,
    );
    expect(await may({ group: 'coordination.k8s.io', resource: 'leases', verb: 'update', namespace: 'default' })).toBe(
      false,
    );
    // extension kinds (decision 0440, --extension-rbac=managed): the per-extension ClusterRoles are written with
    // escalate; no bind, no bindings
    for (const verb of ['create', 'patch', 'delete', 'escalate'])
      expect(await may({ group: 'rbac.authorization.k8s.io', resource: 'clusterroles', verb }), verb).toBe(true);
    expect(await may({ group: 'rbac.authorization.k8s.io', resource: 'clusterroles', verb: 'bind' })).toBe(false);
    expect(await may({ group: 'rbac.authorization.k8s.io', resource: 'clusterrolebindings', verb: 'create' })).toBe(
      false,
    );
    // nothing beyond
    expect(await may({ group: '', resource: 'nodes', verb: 'delete' })).toBe(false);
    expect(
      await may({ group: 'rbac.authorization.k8s.io', resource: 'roles', verb: 'create', namespace: 'default' }),
    ).toBe(false);
  });
});

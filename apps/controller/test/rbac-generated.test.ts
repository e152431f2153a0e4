// deploy/rbac/generated/ is exactly what the code generates (regenerate with `npm run generate:rbac -w
// @homelab/controller`, or run this test with HOMELAB_WRITE_GENERATED=1), and KOS's role covers every object class the
// controller's KOS code calls: each `{ apiVersion, kind }` literal in its sources has a rule, none is a wildcard.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Effect } from 'effect';
import { describe, expect, it } from 'vitest';
import { describeDrift, driftModeFromEnv, syncManifests } from '@homelab/crd';
import { Either } from 'effect';
import {
  AGGREGATE_TO_CONTROLLER_LABEL,
  clusterAccess,
  KERNEL_KINDS,
  KIND_INFO,
  KOS_GROUP,
  kosControllerExtensionRbacRole,
  kosControllerExtensionsRole,
  kosControllerRole,
  roleAllows,
  WRITE_TABLE,
} from '@homelab/kos-kernel';
import { generatedRbacFiles, renderExtensionRole, shippedCrds } from '../scripts/rbac.js';

const root = resolve(import.meta.dirname, '../../..');
const directory = join(root, 'deploy/rbac/generated');

/** The non-test TypeScript files under `dir`. */
const sources = (dir: string): ReadonlyArray<string> =>
  readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) return sources(p);
    return p.endsWith('.ts') && !p.endsWith('.test.ts') ? [p] : [];
  });

/** `{ apiVersion: 'g/v', kind: 'K' }` literals (the shape every KubeClient call takes), as [apiVersion, kind]. */
const calledKinds = (files: ReadonlyArray<string>): ReadonlyArray<readonly [string, string]> => {
  const found = new Map<string, readonly [string, string]>();
  for (const f of files)
    for (const m of readFileSync(f, 'utf8').matchAll(/apiVersion: '([a-z0-9./-]+)',\s*kind: '([A-Za-z]+)'/g))
      found.set(`${m[1]}|${m[2]}`, [m[1] as string, m[2] as string]);
  return [...found.values()];
};

describe('deploy/rbac/generated', () => {
  it('has no drift from the code (and no stray files)', async () => {
    const report = await Effect.runPromise(
      syncManifests({ directory, files: generatedRbacFiles(), mode: driftModeFromEnv() }),
    );
    expect(describeDrift(report)).toBe('');
    expect(report.files).toHaveLength(4);
  });

  it('one editor and one viewer role per shipped CRD', () => {
    const text = generatedRbacFiles()['editor-viewer-roles.yaml'] ?? '';
    for (const crd of shippedCrds())
      for (const suffix of ['editor', 'viewer']) expect(text).toContain(`name: ${crd.spec.names.plural}-${suffix}`);
  });

  it('KOS role: exact resource names, every kernel kind readable, status writable where the write table has a status writer and the CRD a status', () => {
    const role = kosControllerRole();
    for (const r of role.rules) {
      expect(r.resources).not.toContain('*');
      expect(r.verbs).not.toContain('*');
    }
    for (const kind of KERNEL_KINDS) {
      const { plural, status } = KIND_INFO[kind];
      for (const verb of ['get', 'list', 'watch']) expect(roleAllows(role, KOS_GROUP, plural, verb), kind).toBe(true);
      const statusWriter = WRITE_TABLE.some((e) => e.targets.includes(kind) && e.parts.includes('status'));
      expect(roleAllows(role, KOS_GROUP, `${plural}/status`, 'patch'), kind).toBe(status && statusWriter);
    }
    // what nothing in KOS calls stays out: Secrets, Pods, Nodes, RBAC
    for (const [g, r] of [
      ['', 'secrets'],
      ['', 'pods'],
      ['', 'nodes'],
      ['rbac.authorization.k8s.io', 'clusterroles'],
    ] as const)
      expect(roleAllows(role, g, r, 'get'), r).toBe(false);
  });

  it('every object class the KOS code calls has a rule in the role (Leases: the leader-election Role)', () => {
    const role = kosControllerRole();
    const extensionRbac = kosControllerExtensionRbacRole();
    const files = [
      // the role's own definition names ClusterRole: not a call
      ...sources(join(root, 'libs/kos-kernel/src')).filter((f) => !f.endsWith('/api/rbac.ts')),
      join(root, 'apps/controller/src/kos.ts'),
      join(root, 'libs/kube/src/application/leader-election.ts'),
    ];
    const called = calledKinds(files);
    expect(called.length).toBeGreaterThan(8);
    const resourceOf = (apiVersion: string, kind: string) =>
      apiVersion.startsWith(`${KOS_GROUP}/`)
        ? KIND_INFO[kind as (typeof KERNEL_KINDS)[number]]?.plural
        : clusterAccess().find((a) => a.apiVersion === apiVersion && a.kind === kind)?.resource;
    const missing = called
      .filter(([apiVersion, kind]) => !(apiVersion === 'coordination.k8s.io/v1' && kind === 'Lease'))
      .filter(([, kind]) => kind !== 'DeleteOptions') // a request body, not an object class
      .filter(([apiVersion, kind]) => {
        // the per-extension roles (decision 0440): written under the managed-mode role
        if (apiVersion === 'rbac.authorization.k8s.io/v1' && kind === 'ClusterRole')
          return !roleAllows(extensionRbac, 'rbac.authorization.k8s.io', 'clusterroles', 'patch');
        const resource = resourceOf(apiVersion, kind);
        const group = apiVersion.includes('/') ? (apiVersion.split('/')[0] ?? '') : '';
        return (
          resource === undefined ||
          !role.rules.some((r) => r.apiGroups.includes(group) && r.resources.includes(resource))
        );
      })
      .map(([a, k]) => `${a} ${k}`);
    expect(missing).toEqual([]);
  });
});

describe('the roles of extension kinds (decision 0440)', () => {
  it('kos-controller-extensions aggregates exactly the per-extension label and ships no rules of its own', () => {
    const role = kosControllerExtensionsRole();
    expect(role.rules).toEqual([]);
    expect(role.aggregationRule?.clusterRoleSelectors).toEqual([
      { matchLabels: { [AGGREGATE_TO_CONTROLLER_LABEL]: 'true' } },
    ]);
    const text = generatedRbacFiles()['kos-controller-extensions.yaml'] ?? '';
    expect(text).toContain('name: kos-controller-extensions');
  });

  it('managed mode: apply, delete and escalate on ClusterRoles only — no bind, no bindings, no reads', () => {
    const role = kosControllerExtensionRbacRole();
    expect(role.rules).toEqual([
      {
        apiGroups: ['rbac.authorization.k8s.io'],
        resources: ['clusterroles'],
        verbs: ['create', 'delete', 'escalate', 'patch'],
      },
    ]);
    // the KOS role itself holds nothing on RBAC objects
    for (const resource of ['clusterroles', 'clusterrolebindings', 'roles', 'rolebindings'])
      for (const verb of ['create', 'patch', 'escalate', 'bind'])
        expect(
          roleAllows(kosControllerRole(), 'rbac.authorization.k8s.io', resource, verb),
          `${resource} ${verb}`,
        ).toBe(false);
    const file = generatedRbacFiles()['kos-controller-extension-rbac.yaml'] ?? '';
    expect(file).toContain('kind: ClusterRoleBinding');
  });

  it('external mode: the rendered role of the sample package is the Installer’s (its group/plural, never kos.tsic.top), a Kubernetes group is refused', () => {
    const sample = readFileSync(
      join(root, 'libs/kos-kernel/extensions/first-party/kos-notes/kos-extension.json'),
      'utf8',
    );
    const rendered = renderExtensionRole(sample);
    if (Either.isLeft(rendered)) throw new Error(rendered.left.join('\n'));
    expect(rendered.right).toContain('name: kos-ext-kos-notes');
    expect(rendered.right).toContain('- notes.kos.tsic.top');
    expect(rendered.right).toContain('- notes/status');
    expect(rendered.right).toContain(`${AGGREGATE_TO_CONTROLLER_LABEL}: "true"`);
    expect(rendered.right).not.toMatch(/- kos\.tsic\.top$/m);
    const evil = JSON.parse(sample) as { declaration: { contributes: { kinds: Array<Record<string, unknown>> } } };
    evil.declaration.contributes.kinds = [
      { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'ClusterRole', plural: 'clusterroles' },
    ];
    const refused = renderExtensionRole(JSON.stringify(evil));
    expect(Either.isLeft(refused) ? refused.left.join('\n') : 'rendered').toMatch(/belongs to Kubernetes/);
  });
});

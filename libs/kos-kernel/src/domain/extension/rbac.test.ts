// The per-extension ClusterRole (decision 0440), pure: exactly the extension's own group/plural and status, the verbs
// the kernel uses, the aggregation label the shipped `kos-controller-extensions` selects; never a wildcard, the
// kernel's group or a Kubernetes group; read only for the kept kinds after uninstall.
import { describe, expect, it } from 'vitest';
import { KOS_GROUP } from '../../api/group.js';
import { checkDeclaration } from './declaration.js';
import { type ComponentFacts, loadExtensions } from './load.js';
import { AGGREGATE_TO_CONTROLLER_LABEL, extensionRole, extensionRoleOf, ProtectedGroupRefused } from './rbac.js';
import { protectedGroupProblem } from './protected-groups.js';
import { buildRegistry } from './registry.js';

const declaration = (id: string, kinds?: ReadonlyArray<Record<string, unknown>>) => ({
  id,
  version: '1.0.0',
  framework: '^1.0.0',
  contributes: {
    kinds: kinds ?? [
      { group: `${id}.example.org`, version: 'v1alpha1', kind: 'Widget', plural: 'widgets' },
      { group: `${id}.example.org`, version: 'v1alpha1', kind: 'Gadget', plural: 'gadgets', scope: 'Cluster' },
      { group: `more.${id}.example.org`, version: 'v1', kind: 'Thing', plural: 'things' },
    ],
  },
});
const component = (name: string, id: string, at: number): ComponentFacts => ({
  name,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, at)).toISOString(),
  ownership: 'managed',
  disabled: false,
  package: { _tag: 'Verified', declaration: checkDeclaration(declaration(id), []) },
});

/** Every (group, resource, verb) a role grants, as `group/resource:verb`. */
const grants = (
  rules: ReadonlyArray<{
    apiGroups: ReadonlyArray<string>;
    resources: ReadonlyArray<string>;
    verbs: ReadonlyArray<string>;
  }>,
) =>
  rules
    .flatMap((r) => r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g}/${res}:${v}`))))
    .sort();

describe('the per-extension ClusterRole', () => {
  it('grants exactly the extension’s own kinds (and their status), the kernel’s verbs, nothing of another extension', () => {
    const registry = buildRegistry(loadExtensions([component('a', 'alpha', 1), component('b', 'beta', 2)]));
    const role = extensionRoleOf(registry.kinds, 'alpha');
    expect(role.metadata.name).toBe('kos-ext-alpha');
    expect(role.metadata.labels[AGGREGATE_TO_CONTROLLER_LABEL]).toBe('true');
    expect(role.metadata.labels['kos.tsic.top/extension']).toBe('alpha');
    expect(role.metadata.labels['kos.tsic.top/managed-by']).toBe('kos');
    const verbs = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
    const status = ['get', 'patch', 'update'];
    expect(grants(role.rules)).toEqual(
      [
        ...['gadgets', 'widgets'].flatMap((p) => [
          ...verbs.map((v) => `alpha.example.org/${p}:${v}`),
          ...status.map((v) => `alpha.example.org/${p}/status:${v}`),
        ]),
        ...verbs.map((v) => `more.alpha.example.org/things:${v}`),
        ...status.map((v) => `more.alpha.example.org/things/status:${v}`),
      ].sort(),
    );
    expect(JSON.stringify(role)).not.toContain('beta');
    expect(JSON.stringify(role.rules)).not.toContain('*');
  });

  it('after uninstall: the kept kinds read only (get, list, watch), no status, no writes', () => {
    const role = extensionRole('alpha', [{ group: 'alpha.example.org', plural: 'widgets' }], 'leftovers');
    expect(grants(role.rules)).toEqual(['get', 'list', 'watch'].map((v) => `alpha.example.org/widgets:${v}`));
    expect(role.metadata.labels['kos.tsic.top/extension-role']).toBe('leftovers');
  });

  it('refuses the kernel’s group, core and built-in groups and Kubernetes’ own domains; allows a subgroup of the kernel’s', () => {
    for (const group of [
      KOS_GROUP,
      '',
      'apps',
      'batch',
      'rbac.authorization.k8s.io',
      'apiextensions.k8s.io',
      'k8s.io',
      'x.kubernetes.io',
    ])
      expect(() => extensionRole('evil', [{ group, plural: 'clusterroles' }]), group).toThrow(ProtectedGroupRefused);
    expect(protectedGroupProblem('notes.kos.tsic.top')).toBeUndefined();
    expect(protectedGroupProblem('inventory.acme.example')).toBeUndefined();
  });

  it('the declaration check already fails a kinds contribution in a Kubernetes group (only that kind of contribution)', () => {
    const checked = checkDeclaration(
      declaration('evil', [
        { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'ClusterRole', plural: 'clusterroles' },
      ]),
      [],
    );
    if (checked._tag !== 'Valid') throw new Error('the header is valid');
    expect(checked.contributions.kinds).toBeUndefined();
    expect(checked.failures.map((f) => f.kind)).toEqual(['kinds']);
    expect(checked.failures[0]?.problems.join('\n')).toMatch(/belongs to Kubernetes/);
  });
});

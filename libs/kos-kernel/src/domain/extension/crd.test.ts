// The CRDs of extension kinds (decision 0341), pure: TC-1 (object kinds only in their own API group, the kernel's
// group never), TC-110 (a disabled component's kinds leave the Registry: the control plane stops serving them).
import { describe, expect, it } from 'vitest';
import { KOS_GROUP } from '../../api/group.js';
import { checkDeclaration } from './declaration.js';
import { extensionCrd, extensionCrdsOf, KernelGroupRefused } from './crd.js';
import { type ComponentFacts, loadExtensions } from './load.js';
import { buildRegistry, type ServedKind } from './registry.js';

const declaration = (id: string) => ({
  id,
  version: '1.0.0',
  framework: '^1.0.0',
  contributes: {
    kinds: [
      { group: `${id}.example.org`, version: 'v1alpha1', kind: 'Widget', plural: 'widgets' },
      { group: `${id}.example.org`, version: 'v1alpha1', kind: 'Gadget', plural: 'gadgets', scope: 'Cluster' },
    ],
  },
});
const component = (name: string, id: string, at: number, disabled = false): ComponentFacts => ({
  name,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, at)).toISOString(),
  ownership: 'managed',
  disabled,
  package: { _tag: 'Verified', declaration: checkDeclaration(declaration(id), []) },
});

describe('extension CRDs', () => {
  it('TC-1: each activated kind gets one CRD in its own group, named plural.group, with a status subresource', () => {
    const registry = buildRegistry(loadExtensions([component('a', 'alpha', 1), component('b', 'beta', 2)]));
    const crds = extensionCrdsOf(registry.kinds, 'alpha');
    expect(crds.map((c) => c.metadata.name)).toEqual(['widgets.alpha.example.org', 'gadgets.alpha.example.org']);
    expect(crds.map((c) => c.spec.group)).toEqual(['alpha.example.org', 'alpha.example.org']);
    expect(crds.map((c) => c.spec.scope)).toEqual(['Namespaced', 'Cluster']);
    expect(crds.every((c) => c.metadata.labels['kos.tsic.top/extension'] === 'alpha')).toBe(true);
    expect(crds[0]?.spec.versions.map((v) => [v.name, v.served, v.storage])).toEqual([['v1alpha1', true, true]]);
    expect(crds.some((c) => c.spec.group === KOS_GROUP)).toBe(false);
  });

  it('TC-1: a kind claiming the kernel group never becomes a CRD (refused at load, refused again here)', () => {
    const bad = {
      ...declaration('evil'),
      contributes: { kinds: [{ group: KOS_GROUP, version: 'v1', kind: 'Application', plural: 'applications' }] },
    };
    const registry = buildRegistry(
      loadExtensions([
        {
          ...component('e', 'evil', 1),
          package: { _tag: 'Verified', declaration: checkDeclaration(bad, []) },
        },
      ]),
    );
    expect(registry.kinds).toEqual([]);
    const forged: ServedKind = {
      group: KOS_GROUP,
      version: 'v1',
      kind: 'Application',
      plural: 'applications',
      scope: 'Namespaced',
      retain: 'keep',
      source: { extension: 'evil', version: '1.0.0', component: 'e' },
    };
    expect(() => extensionCrd(forged)).toThrow(KernelGroupRefused);
  });

  it('TC-110: a disabled component serves no kind; re-enabled, the same kinds are served again', () => {
    const served = (disabled: boolean) =>
      buildRegistry(loadExtensions([component('a', 'alpha', 1, disabled)])).resolveKind(
        'alpha.example.org/v1alpha1',
        'widgets',
      );
    expect(served(true)).toBeUndefined();
    expect(served(false)?.kind).toBe('Widget');
  });
});

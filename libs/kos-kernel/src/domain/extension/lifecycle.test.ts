// The extension lifecycle's pure rules (seed 000 TC-108, TC-111, TC-113; decisions 0347–0349): the uninstall blockers
// of every kind, what counts as a capability (a self-report does not), the framework-upgrade preflight's answer.
// The cluster halves: test/extension-lifecycle.it.test.ts, test/extension-parity.it.test.ts.
import { describe, expect, it } from 'vitest';
import { missingCapabilities } from '../application/lifecycle.js';
import { type BlockerFacts, componentRefName, endpointEdges, NO_BLOCKER_FACTS, uninstallBlockers } from './blockers.js';
import { checkDeclaration } from './declaration.js';
import { frameworkPreflight } from './framework-preflight.js';
import { type ComponentFacts, loadExtensions } from './load.js';
import { buildRegistry } from './registry.js';

type Json = Record<string, unknown>;
let clock = 0;
const component = (name: string, raw: unknown, facts: Partial<ComponentFacts> = {}): ComponentFacts => ({
  name,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, clock++)).toISOString(),
  ownership: 'managed',
  disabled: false,
  package: { _tag: 'Verified', declaration: checkDeclaration(raw, []) },
  ...facts,
});
const decl = (id: string, extra: Json = {}): Json => ({
  id,
  version: '1.2.0',
  framework: '^1.0.0',
  contributes: { capabilities: [{ name: 'store' }, { name: 'search' }] },
  ...extra,
});

describe('TC-111: each uninstall blocker is listed on its own', () => {
  const result = loadExtensions([
    component('c-store', decl('store')),
    component('c-user', decl('user', { dependencies: { components: [{ id: 'store', range: '^1.0.0' }] } })),
  ]);
  const facts: BlockerFacts = {
    endpoints: [
      { namespace: 'web', name: 'site', spec: { tls: { issuerRef: { kind: 'SystemComponent', name: 'c-store' } } } },
      { namespace: 'web', name: 'login', spec: { auth: { providerRef: 'c-store' } } },
      { namespace: 'web', name: 'auto', spec: {}, status: { certificate: { issuerRef: { name: 'c-store' } } } },
      { namespace: 'web', name: 'other', spec: { tls: { issuerRef: { name: 'c-user' } } } },
      { namespace: 'web', name: 'secret', spec: { tls: { issuerRef: { kind: 'Secret', name: 'c-store' } } } },
    ],
    applications: [
      { namespace: 'apps', name: 'shop', definition: 'shop', requires: ['store/store', 'kos.volumes', 'store/search'] },
      { namespace: 'apps', name: 'plain', definition: 'plain', requires: ['kos.volumes'] },
      { namespace: 'apps', name: 'lookalike', requires: ['storefront/store'] },
    ],
    providers: [
      { name: 'store-s3', extension: 'store' },
      { name: 'unrelated', extension: 'user' },
      { name: 'unlabelled' },
    ],
  };

  it('TC-111: dependent components, then Endpoint edges, Applications and Providers, one entry each', () => {
    expect(uninstallBlockers(result, 'c-store', facts)).toEqual([
      'c-user (user) needs component store ^1.0.0',
      'endpoint web/auto references it (status.certificate.issuerRef)',
      'endpoint web/login references it (spec.auth.providerRef)',
      'endpoint web/site references it (spec.tls.issuerRef)',
      'application apps/shop requires store/search, store/store (definition shop)',
      'provider store-s3 is registered for extension store',
    ]);
  });

  it('TC-111: with every dependent gone (or being deleted itself) the gate may open', () => {
    expect(uninstallBlockers(result, 'c-store', NO_BLOCKER_FACTS, ['c-user'])).toEqual([]);
    expect(uninstallBlockers(result, 'c-user', facts)).toEqual([
      'endpoint web/other references it (spec.tls.issuerRef)',
      'provider unrelated is registered for extension user',
    ]);
  });

  it('TC-111: a bad declaration blocks only its own uninstall — nothing can depend on it', () => {
    const bad = loadExtensions([component('c-bad', { id: 'Bad!', version: 'x' })]);
    expect(uninstallBlockers(bad, 'c-bad', { ...facts, providers: [{ name: 'p', extension: 'Bad!' }] })).toEqual([]);
    // an adopted component declares nothing either
    const adopted = loadExtensions([{ name: 'c-adopted', createdAt: '', ownership: 'adopted', disabled: false }]);
    expect(uninstallBlockers(adopted, 'c-adopted', facts)).toEqual([]);
  });

  it('edges name a component by string or {name, kind: SystemComponent}; other kinds are not component edges', () => {
    expect(componentRefName('c')).toBe('c');
    expect(componentRefName({ name: 'c' })).toBe('c');
    expect(componentRefName({ kind: 'SystemComponent', name: 'c' })).toBe('c');
    expect(componentRefName({ kind: 'Secret', name: 'c' })).toBeUndefined();
    expect(componentRefName('')).toBeUndefined();
    expect(componentRefName(['c'])).toBeUndefined();
    expect(endpointEdges({ namespace: 'n', name: 'e', spec: { tls: 'x', auth: { providerRef: 'y' } } })).toEqual([
      ['spec.auth.providerRef', 'y'],
    ]);
  });
});

describe('TC-108: a self-report is not verification', () => {
  it('TC-108: only activated, verified declarations provide capabilities; claims of a name outside the own id never count', () => {
    const result = loadExtensions([
      // a verified package whose declaration claims another extension's capability, the baseline's name and a
      // "verified"/"ready" flag of its own: the other extension's name fails the capabilities kind (no "/" in a
      // name), the baseline name is projected under its own id, the flags are not part of the declaration
      component(
        'c-liar',
        decl('liar', {
          verified: true,
          status: { phase: 'Active' },
          contributes: { capabilities: [{ name: 'store/store' }] },
        }),
      ),
      component('c-shadow', decl('shadow', { contributes: { capabilities: [{ name: 'kos.volumes' }] } })),
      // a package whose digest did not match: whatever its status says elsewhere, it provides nothing
      component('c-forged', decl('store'), {
        package: { _tag: 'DigestMismatch', expected: 'a'.repeat(64), actual: 'b'.repeat(64) },
      }),
      // an adopted component carries no package: nothing it says is loaded
      { name: 'c-adopted', createdAt: '2026-01-02T00:00:00Z', ownership: 'adopted', disabled: false },
    ]);
    const available = buildRegistry(result).capabilities;
    expect(available.filter((c) => c.includes('/'))).toEqual(['shadow/kos.volumes']);
    expect(missingCapabilities(['store/store', 'kos.volumes'], available)).toEqual(['store/store']);
    expect(result.components.map((c) => [c.name, c.outcome._tag])).toEqual([
      ['c-liar', 'Active'],
      ['c-shadow', 'Active'],
      ['c-forged', 'Rejected'],
      ['c-adopted', 'Adopted'],
    ]);
  });

  it('TC-108: a missing extension capability is missing until the providing component activates, then present', () => {
    const needs = ['store/store'];
    const before = buildRegistry(loadExtensions([])).capabilities;
    expect(missingCapabilities(needs, before)).toEqual(['store/store']);
    const after = buildRegistry(loadExtensions([component('c-store', decl('store'))])).capabilities;
    expect(missingCapabilities(needs, after)).toEqual([]);
    // disabled = withdrawn: missing again
    const disabled = buildRegistry(loadExtensions([component('c-store', decl('store'), { disabled: true })]));
    expect(missingCapabilities(needs, disabled.capabilities)).toEqual(['store/store']);
  });
});

describe('TC-113: the framework-upgrade preflight answer', () => {
  it('TC-113: lists each dependent (active, disabled, pending) with its range and blocks while any remains', () => {
    const result = loadExtensions([
      component('c-old', decl('old', { framework: '^1.0.0' })),
      component('c-wide', decl('wide', { framework: '>=1.0.0 <3.0.0' })),
      component('c-off', decl('off', { framework: '~1.0.0' }), { disabled: true }),
      component('c-wait', decl('wait', { dependencies: { components: [{ id: 'absent', range: '*' }] } })),
      component('c-bad', { id: 'Bad!' }),
    ]);
    expect(frameworkPreflight(result, '2.0.0')).toEqual({
      current: '1.0.0',
      target: '2.0.0',
      blocked: true,
      dependents: [
        { component: 'c-old', extension: 'old', version: '1.2.0', framework: '^1.0.0', phase: 'Active' },
        { component: 'c-off', extension: 'off', version: '1.2.0', framework: '~1.0.0', phase: 'Disabled' },
        { component: 'c-wait', extension: 'wait', version: '1.2.0', framework: '^1.0.0', phase: 'Pending' },
      ],
    });
    expect(frameworkPreflight(result, '1.0.5')).toMatchObject({ blocked: false, dependents: [] });
    expect(frameworkPreflight(loadExtensions([]), '9.0.0')).toMatchObject({ blocked: false, dependents: [] });
  });
});

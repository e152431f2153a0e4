// The extension framework's pure rules (seed 000 §6.12; decisions 0301–0304), named after the acceptance cases they
// cover in part (the cluster half is test/extension-install.it.test.ts).
import { describe, expect, it } from 'vitest';
import { canWrite } from '../identity/access.js';
import { BASELINE_CAPABILITIES } from './baseline.js';
import { checkDeclaration, type ValidDeclaration } from './declaration.js';
import {
  type ComponentFacts,
  frameworkUpgradePreflight,
  loadExtensions,
  type LoadResult,
  type Outcome,
} from './load.js';
import { buildRegistry } from './registry.js';
import { componentStatus } from './status.js';

type Json = Record<string, unknown>;

/** A declaration with every one of the nine kinds, ids derived from `id`. */
const fullDeclaration = (id: string, extra: Json = {}): Json => ({
  id,
  version: '1.0.0',
  framework: '^1.0.0',
  contributes: {
    kinds: [
      { group: `${id}.example.org`, version: 'v1', kind: 'Widget', plural: 'widgets', objectWriters: ['Member'] },
    ],
    controllers: [{ name: 'widget', kind: 'Widget', module: 'w.mjs' }],
    capabilities: [{ name: 'widgets' }],
    pages: [
      { id: 'main', title: 'Main', path: `/${id}`, roles: ['Owner', 'Member', 'Guest'] },
      { id: 'admin', title: 'Admin', path: `/${id}/admin`, roles: ['Owner'] },
    ],
    settings: [{ id: `${id}.interval`, scope: 'cluster', type: 'number', writer: 'user' }],
    catalogueSources: [{ id: 'src', entries: [{ id: `${id}-entry`, version: '1.0.0' }] }],
    discoveryAdapters: [{ id: 'scan', categories: ['devices'] }],
    diagnosticAdapters: [{ id: 'report' }],
    preferences: { keys: [{ key: 'view', type: 'string' }] },
  },
  ...extra,
});

const valid = (raw: unknown, modules: ReadonlyArray<string> = ['w.mjs']): ValidDeclaration => {
  const d = checkDeclaration(raw, modules);
  if (d._tag !== 'Valid') throw new Error(`invalid: ${d.problems.join('; ')}`);
  return d;
};

let clock = 0;
const component = (name: string, raw: unknown, facts: Partial<ComponentFacts> = {}): ComponentFacts => ({
  name,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, clock++)).toISOString(),
  ownership: 'managed',
  disabled: false,
  package: { _tag: 'Verified', declaration: checkDeclaration(raw, ['w.mjs']) },
  ...facts,
});

const outcomeOf = (r: LoadResult, name: string): Outcome => {
  const c = r.components.find((x) => x.name === name);
  if (c === undefined) throw new Error(`no component ${name}`);
  return c.outcome;
};

const T = new Date('2026-12-05T10:00:00Z');

describe('TC-4: all nine declared kinds are visible one by one; the component status is ready', () => {
  it('TC-4: every kind of a full declaration is in the Registry with its source, and the status is Active/Healthy with ContributionsLoaded', () => {
    const r = loadExtensions([component('c-alpha', fullDeclaration('alpha'))]);
    const reg = buildRegistry(r);
    const source = { extension: 'alpha', version: '1.0.0', component: 'c-alpha' };
    expect(reg.contributions('kinds').map((k) => [k.kind, k.source])).toEqual([['Widget', source]]);
    expect(reg.contributions('controllers').map((c) => c.name)).toEqual(['widget']);
    expect(reg.contributions('capabilities').map((c) => c.name)).toEqual(['widgets']);
    expect(reg.contributions('pages').map((p) => p.id)).toEqual(['main', 'admin']);
    expect(reg.contributions('settings').map((s) => s.id)).toEqual(['alpha.interval']);
    expect(reg.contributions('catalogueSources').map((s) => s.entries.map((e) => e.id))).toEqual([['alpha-entry']]);
    expect(reg.contributions('discoveryAdapters').map((a) => a.id)).toEqual(['scan']);
    expect(reg.contributions('diagnosticAdapters').map((a) => a.id)).toEqual(['report']);
    expect(reg.contributions('preferences').map((p) => [p.keys.map((k) => k.key), p.retain])).toEqual([
      [['view'], false],
    ]);
    const { status, changed } = componentStatus(outcomeOf(r, 'c-alpha'), {}, T);
    expect(changed).toBe(true);
    expect(status.phase).toBe('Active');
    expect(status.health.state).toBe('Healthy');
    expect(status.conditions.map((c) => [c.type, c.status])).toEqual([
      ['PackageVerified', 'True'],
      ['DependenciesMet', 'True'],
      ['ContributionsLoaded', 'True'],
      ['Reconciled', 'True'],
    ]);
  });

  it('TC-4: the status is not rewritten when nothing changed (lastTransitionTime kept)', () => {
    const r = loadExtensions([component('c-alpha', fullDeclaration('alpha'))]);
    const first = componentStatus(outcomeOf(r, 'c-alpha'), {}, T).status;
    const again = componentStatus(outcomeOf(r, 'c-alpha'), first, new Date(T.getTime() + 60_000));
    expect(again.changed).toBe(false);
    expect(again.status).toEqual(first);
  });
});

describe('per-kind validation degrades only that kind (C-28)', () => {
  it('TC-4: a failing settings kind is absent, the component is Degraded, and the other eight kinds load', () => {
    const raw = fullDeclaration('beta');
    (raw['contributes'] as Json)['settings'] = [{ id: 'Bad Id', scope: 'galaxy', type: 'number', writer: 'user' }];
    const r = loadExtensions([component('c-beta', raw)]);
    const o = outcomeOf(r, 'c-beta');
    expect(o._tag).toBe('Active');
    const reg = buildRegistry(r);
    expect(reg.contributions('settings')).toEqual([]);
    expect(reg.contributions('pages').length).toBe(2);
    expect(reg.resolveKind('beta.example.org/v1', 'widgets')?.kind).toBe('Widget');
    const s = componentStatus(o, {}, T).status;
    expect(s.health.state).toBe('Degraded');
    const loaded = s.conditions.find((c) => c.type === 'ContributionsLoaded');
    expect(loaded?.status).toBe('False');
    expect(loaded?.reason).toBe('ContributionsDegraded');
    expect(loaded?.message).toMatch(/^settings: 0\.id: not an item id|^settings: /);
    expect(loaded?.message).toContain('scope');
  });

  it('a controller naming a kind the declaration does not contribute fails the controllers kind only', () => {
    const raw = fullDeclaration('gamma');
    (raw['contributes'] as Json)['controllers'] = [{ name: 'x', kind: 'Gadget', module: 'w.mjs' }];
    const d = valid(raw);
    expect(d.failures).toEqual([
      {
        kind: 'controllers',
        problems: ['controller x: kind Gadget is not an object kind this declaration contributes'],
      },
    ]);
    expect(d.contributions.kinds?.length).toBe(1);
  });

  it('a controller module missing from the package fails the controllers kind', () => {
    const d = valid(fullDeclaration('gamma'), []);
    expect(d.failures.map((f) => f.kind)).toEqual(['controllers']);
    expect(d.failures[0]?.problems).toEqual(['controller widget: module w.mjs is not in the package']);
  });

  it('a bad header invalidates the whole declaration (nothing loads) and names the field', () => {
    const d = checkDeclaration({ ...fullDeclaration('delta'), version: 'one' });
    expect(d._tag).toBe('Invalid');
    expect(d._tag === 'Invalid' && d.problems.join(' ')).toContain('version: "one" is not a semver version');
    const unknownKind = checkDeclaration({
      id: 'delta',
      version: '1.0.0',
      framework: '*',
      contributes: { themes: [] },
    });
    expect(unknownKind._tag === 'Invalid' && unknownKind.problems).toEqual([
      'contributes.themes: not one of the nine contribution kinds',
    ]);
    const r = loadExtensions([component('c-delta', { ...fullDeclaration('delta'), version: 'one' })]);
    expect(outcomeOf(r, 'c-delta')).toMatchObject({ _tag: 'Rejected', reason: 'DeclarationInvalid' });
    expect(buildRegistry(r).contributions('pages')).toEqual([]);
  });
});

describe('TC-1/TC-106: extension kinds live only in their own API group', () => {
  it('TC-106: a kind declared in kos.tsic.top fails the kinds kind (and the controllers that need it); pages carry their declared source', () => {
    const raw = fullDeclaration('epsilon');
    (raw['contributes'] as Json)['kinds'] = [
      { group: 'kos.tsic.top', version: 'v1', kind: 'Widget', plural: 'widgets' },
    ];
    const r = loadExtensions([component('c-eps', raw)]);
    const o = outcomeOf(r, 'c-eps');
    expect(o._tag === 'Active' && o.failures.map((f) => [f.kind, f.problems])).toEqual([
      ['kinds', ["Widget: the group kos.tsic.top is the kernel's; an extension kind lives in its own group"]],
      ['controllers', ['controller widget: kind Widget is not an object kind this declaration contributes']],
    ]);
    const reg = buildRegistry(r);
    expect(reg.resolveKind('kos.tsic.top/v1', 'Widget')).toBeUndefined();
    expect(reg.pagesFor('Guest').map((p) => [p.path, p.source])).toEqual([
      ['/epsilon', { extension: 'epsilon', version: '1.0.0', component: 'c-eps' }],
    ]);
  });
});

describe('TC-2: the capability baseline does not change; extension capabilities only while installed', () => {
  it('TC-2: capabilities = the 8 baseline items + the extension ones prefixed with the extension id; gone with the component', () => {
    const empty = buildRegistry(loadExtensions([]));
    expect(empty.capabilities).toEqual([...BASELINE_CAPABILITIES].sort());
    expect(empty.capabilities.length).toBe(8);
    const installed = buildRegistry(loadExtensions([component('c-alpha', fullDeclaration('alpha'))]));
    expect(installed.capabilities).toEqual([...[...BASELINE_CAPABILITIES].sort(), 'alpha/widgets']);
    const removed = buildRegistry(loadExtensions([]));
    expect(removed.capabilities).toEqual(empty.capabilities);
  });
});

describe('TC-5: undeclared and uninstalled contributions are invisible', () => {
  it('TC-5: an undeclared kind is not served, and a Pending or removed component contributes nothing', () => {
    const needsMissing = fullDeclaration('zeta', { dependencies: { components: [{ id: 'nobody', range: '*' }] } });
    const reg = buildRegistry(
      loadExtensions([component('c-alpha', fullDeclaration('alpha')), component('c-zeta', needsMissing)]),
    );
    expect(reg.resolveKind('alpha.example.org/v1', 'Gadget')).toBeUndefined();
    expect(reg.resolveKind('alpha.example.org/v2', 'Widget')).toBeUndefined();
    expect(reg.resolveKind('zeta.example.org/v1', 'Widget')).toBeUndefined();
    expect(reg.contributions('pages').map((p) => p.source.extension)).toEqual(['alpha', 'alpha']);
    expect(reg.capabilities).not.toContain('zeta/widgets');
  });
});

describe('TC-6: with a dependency missing, no contribution takes effect', () => {
  it('TC-6: the component is Pending/Unavailable, its status lists each missing item, and none of its nine kinds is visible', () => {
    const raw = fullDeclaration('eta', {
      dependencies: {
        capabilities: [
          { name: 'kos.volumes', range: '^1.0.0' },
          { name: 'theta/storage', range: '^2.0.0' },
          { name: 'kos.backup', range: '^2.0.0' },
        ],
        components: [{ id: 'theta', range: '>=2.0.0' }],
      },
    });
    const r = loadExtensions([component('c-eta', raw)]);
    const o = outcomeOf(r, 'c-eta');
    expect(o._tag === 'Pending' && o.missing).toEqual([
      'capability theta/storage ^2.0.0 (no activated component provides it)',
      'capability kos.backup ^2.0.0 (the baseline provides 1.0.0)',
      'component theta >=2.0.0 (not activated)',
    ]);
    const reg = buildRegistry(r);
    for (const k of [
      'kinds',
      'controllers',
      'capabilities',
      'pages',
      'settings',
      'catalogueSources',
      'discoveryAdapters',
      'diagnosticAdapters',
      'preferences',
    ] as const)
      expect(reg.contributions(k)).toEqual([]);
    const s = componentStatus(o, {}, T).status;
    expect(s.phase).toBe('Pending');
    expect(s.health.state).toBe('Unavailable');
    expect(s.conditions.find((c) => c.type === 'DependenciesMet')).toMatchObject({
      status: 'False',
      reason: 'DependenciesMissing',
      message:
        'capability theta/storage ^2.0.0 (no activated component provides it); capability kos.backup ^2.0.0 (the baseline provides 1.0.0); component theta >=2.0.0 (not activated)',
    });
  });

  it('TC-6: a component version outside the range is missing, naming the activated version', () => {
    const theta = { ...fullDeclaration('theta'), version: '1.5.0' };
    const iota = fullDeclaration('iota', { dependencies: { components: [{ id: 'theta', range: '^2.0.0' }] } });
    const o = outcomeOf(loadExtensions([component('c-theta', theta), component('c-iota', iota)]), 'c-iota');
    expect(o._tag === 'Pending' && o.missing).toEqual(['component theta ^2.0.0 (activated at 1.5.0)']);
  });
});

describe('activation is a fixpoint over dependencies (C-28, decision 0303)', () => {
  it('a chain declared in reverse load order activates completely; a cycle never activates', () => {
    const chain: ComponentFacts[] = [];
    for (let i = 9; i >= 0; i--)
      chain.push(
        component(
          `c-${i}`,
          fullDeclaration(
            `n${i}`,
            i === 0 ? {} : { dependencies: { capabilities: [{ name: `n${i - 1}/widgets`, range: '^1.0.0' }] } },
          ),
        ),
      );
    const cyc = [
      component('c-a', fullDeclaration('cyc-a', { dependencies: { components: [{ id: 'cyc-b', range: '*' }] } })),
      component('c-b', fullDeclaration('cyc-b', { dependencies: { components: [{ id: 'cyc-a', range: '*' }] } })),
    ];
    const r = loadExtensions([...chain, ...cyc]);
    expect(
      r.components
        .filter((c) => c.outcome._tag === 'Active')
        .map((c) => c.name)
        .sort(),
    ).toEqual(chain.map((c) => c.name).sort());
    expect(outcomeOf(r, 'c-a')._tag).toBe('Pending');
    expect(outcomeOf(r, 'c-b')._tag).toBe('Pending');
  });

  it('a capability counts only from an activated component whose capabilities kind loaded', () => {
    const provider = fullDeclaration('kappa');
    (provider['contributes'] as Json)['capabilities'] = [{ name: 'Bad Name' }];
    const consumer = fullDeclaration('lambda', {
      dependencies: { capabilities: [{ name: 'kappa/widgets', range: '*' }] },
    });
    const r = loadExtensions([component('c-kappa', provider), component('c-lambda', consumer)]);
    expect(outcomeOf(r, 'c-kappa')._tag).toBe('Active');
    expect(outcomeOf(r, 'c-lambda')._tag).toBe('Pending');
  });
});

describe('TC-108: a missing extension capability keeps a component Pending; it continues once installed', () => {
  it('TC-108: Pending without the provider, Active in the next load with it; a self-declared name never passes for another', () => {
    const consumer = fullDeclaration('mu', {
      dependencies: { capabilities: [{ name: 'nu/widgets', range: '^1.0.0' }] },
    });
    const c = component('c-mu', consumer);
    expect(outcomeOf(loadExtensions([c]), 'c-mu')._tag).toBe('Pending');
    // self-reporting: an extension cannot declare another extension's (prefixed) or a baseline name as its own
    const impostor = fullDeclaration('xi');
    (impostor['contributes'] as Json)['capabilities'] = [{ name: 'nu/widgets' }];
    const withImpostor = loadExtensions([c, component('c-xi', impostor)]);
    expect(outcomeOf(withImpostor, 'c-mu')._tag).toBe('Pending');
    const sneaky = fullDeclaration('omicron');
    (sneaky['contributes'] as Json)['capabilities'] = [{ name: 'kos.volumes' }];
    expect(buildRegistry(loadExtensions([component('c-om', sneaky)])).capabilities).toContain('omicron/kos.volumes');
    const installed = loadExtensions([c, component('c-nu', fullDeclaration('nu'))]);
    expect(outcomeOf(installed, 'c-mu')._tag).toBe('Active');
  });
});

describe('TC-3: first- and third-party contributions of the same kind load and authorize identically', () => {
  it('TC-3: two declarations differing only in id get the same outcome shape and the same page/kind authorization', () => {
    const r = loadExtensions([
      component('first', fullDeclaration('first-party')),
      component('third', fullDeclaration('acme')),
    ]);
    const a = outcomeOf(r, 'first');
    const b = outcomeOf(r, 'third');
    expect(a._tag).toBe('Active');
    expect(b._tag).toBe('Active');
    const reg = buildRegistry(r);
    const strip = (x: { source: { extension: string } }) => x.source.extension;
    expect(reg.pagesFor('Member').map(strip)).toEqual(['first-party', 'acme']);
    const member = { account: 'm', role: 'Member' as const };
    const guest = { account: 'g', role: 'Guest' as const };
    for (const apiVersion of ['first-party.example.org/v1', 'acme.example.org/v1']) {
      const k = reg.resolveKind(apiVersion, 'Widget');
      expect(k).toBeDefined();
      const target = {
        kind: 'Widget',
        extension: true,
        ...(k?.objectWriters ? { extensionWriters: k.objectWriters } : {}),
      };
      expect(canWrite(member, target).allowed).toBe(true);
      expect(canWrite(guest, target).allowed).toBe(false);
    }
  });
});

describe('TC-34: extension page writes are authorized by role and declaration', () => {
  it('TC-34: pages per session role, and an undeclared objectWriters leaves the kind to the Owner', () => {
    const raw = fullDeclaration('pi');
    (raw['contributes'] as Json)['kinds'] = [
      { group: 'pi.example.org', version: 'v1', kind: 'Widget', plural: 'widgets' },
    ];
    const reg = buildRegistry(loadExtensions([component('c-pi', raw)]));
    expect(reg.pagesFor('Owner').map((p) => p.id)).toEqual(['main', 'admin']);
    expect(reg.pagesFor('Guest').map((p) => p.id)).toEqual(['main']);
    const k = reg.resolveKind('pi.example.org/v1', 'widgets');
    expect(k?.objectWriters).toBeUndefined();
    const target = { kind: 'Widget', extension: true };
    expect(canWrite({ account: 'm', role: 'Member' }, target)).toEqual({
      allowed: false,
      reason: 'Widget is written by Owner only',
    });
    expect(canWrite({ account: 'o', role: 'Owner' }, target).allowed).toBe(true);
  });
});

describe('install rules (C-17, decision 0303)', () => {
  it('first-installed version kept per extension id: the later component is Rejected naming the keeper, whatever its name', () => {
    const older = component('zz-old', fullDeclaration('rho'));
    const newer = component('aa-new', { ...fullDeclaration('rho'), version: '2.0.0' });
    const r = loadExtensions([newer, older]);
    expect(outcomeOf(r, 'zz-old')._tag).toBe('Active');
    expect(outcomeOf(r, 'aa-new')).toEqual({
      _tag: 'Rejected',
      reason: 'DuplicateExtension',
      items: ['extension rho is already installed by component zz-old'],
    });
    expect(
      buildRegistry(r)
        .contributions('kinds')
        .map((k) => k.source.version),
    ).toEqual(['1.0.0']);
  });

  it('a component whose package does not verify holds no id; a digest mismatch is PackageVerified=False', () => {
    const broken = component('a-broken', fullDeclaration('sigma'), {
      package: { _tag: 'DigestMismatch', expected: 'a'.repeat(64), actual: 'b'.repeat(64) },
    });
    const good = component('b-good', fullDeclaration('sigma'));
    const r = loadExtensions([broken, good]);
    expect(outcomeOf(r, 'b-good')._tag).toBe('Active');
    const s = componentStatus(outcomeOf(r, 'a-broken'), {}, T).status;
    expect(s.phase).toBe('Rejected');
    expect(s.conditions.find((c) => c.type === 'PackageVerified')).toMatchObject({
      status: 'False',
      reason: 'DigestMismatch',
      message: `expected sha256 ${'a'.repeat(64)}, got ${'b'.repeat(64)}`,
    });
  });

  it('adopted components contribute nothing and satisfy no dependency', () => {
    const adopted: ComponentFacts = {
      name: 'c-adopted',
      createdAt: '2025-01-01T00:00:00Z',
      ownership: 'adopted',
      disabled: false,
    };
    const consumer = component(
      'c-tau',
      fullDeclaration('tau', { dependencies: { components: [{ id: 'c-adopted', range: '*' }] } }),
    );
    const r = loadExtensions([adopted, consumer]);
    expect(outcomeOf(r, 'c-adopted')._tag).toBe('Adopted');
    expect(outcomeOf(r, 'c-tau')._tag).toBe('Pending');
    expect(buildRegistry(r).contributions('kinds').length).toBe(0);
    expect(componentStatus(outcomeOf(r, 'c-adopted'), {}, T).status.phase).toBe('Adopted');
  });

  it('cross-source collisions: the first loaded keeps the setting and the catalogue entry, the later is Degraded with a conflict record', () => {
    const a = fullDeclaration('upsilon');
    const b = fullDeclaration('phi');
    (b['contributes'] as Json)['settings'] = [
      { id: 'upsilon.interval', scope: 'cluster', type: 'number', writer: 'user' },
    ];
    (b['contributes'] as Json)['catalogueSources'] = [
      { id: 'other', entries: [{ id: 'upsilon-entry' }, { id: 'phi-own' }] },
    ];
    const r = loadExtensions([component('c-up', a), component('c-phi', b)]);
    const o = outcomeOf(r, 'c-phi');
    expect(o._tag === 'Active' && o.conflicts).toEqual([
      { kind: 'settings', key: 'upsilon.interval', keptBy: 'c-up' },
      { kind: 'catalogueSources', key: 'upsilon-entry', keptBy: 'c-up' },
    ]);
    const reg = buildRegistry(r);
    expect(reg.contributions('settings').map((s) => s.source.component)).toEqual(['c-up']);
    expect(
      reg.contributions('catalogueSources').flatMap((s) => s.entries.map((e) => `${s.source.component}:${e.id}`)),
    ).toEqual(['c-up:upsilon-entry', 'c-phi:phi-own']);
    expect(componentStatus(o, {}, T).status.health.state).toBe('Degraded');
    expect(componentStatus(outcomeOf(r, 'c-up'), {}, T).status.health.state).toBe('Healthy');
  });
});

describe('TC-110: disable withdraws contributions; re-enable restores', () => {
  it('TC-110: a disabled component contributes nothing and satisfies no dependency; enabled again it is Active with the same contributions', () => {
    const base = component('c-chi', fullDeclaration('chi'));
    const consumer = component(
      'c-psi',
      fullDeclaration('psi', { dependencies: { components: [{ id: 'chi', range: '^1' }] } }),
    );
    const before = loadExtensions([base, consumer]);
    const disabled = loadExtensions([{ ...base, disabled: true }, consumer]);
    expect(outcomeOf(disabled, 'c-chi')._tag).toBe('Disabled');
    expect(outcomeOf(disabled, 'c-psi')._tag).toBe('Pending');
    expect(buildRegistry(disabled).contributions('settings')).toEqual([]);
    const again = loadExtensions([base, consumer]);
    expect(buildRegistry(again).contributions('settings')).toEqual(buildRegistry(before).contributions('settings'));
    expect(outcomeOf(again, 'c-psi')._tag).toBe('Active');
  });
});

describe('TC-112: an incompatible target framework version rejects the install, listing the incompatible items', () => {
  it('TC-112: framework ^2 against 1.0.0 is Rejected with the framework and the baseline dependency listed', () => {
    const raw = fullDeclaration('omega', {
      framework: '^2.0.0',
      dependencies: {
        capabilities: [
          { name: 'kos.volumes', range: '^2.0.0' },
          { name: 'kos.backup', range: '*' },
        ],
      },
    });
    const r = loadExtensions([component('c-omega', raw)]);
    expect(outcomeOf(r, 'c-omega')).toEqual({
      _tag: 'Rejected',
      reason: 'FrameworkIncompatible',
      items: [
        'framework ^2.0.0 does not include the running framework 1.0.0',
        'capability kos.volumes ^2.0.0 does not include the baseline 1.0.0',
      ],
    });
    const s = componentStatus(outcomeOf(r, 'c-omega'), {}, T).status;
    expect(s.conditions.find((c) => c.type === 'ContributionsLoaded')?.reason).toBe('FrameworkIncompatible');
    expect(buildRegistry(r).contributions('kinds')).toEqual([]);
    expect(outcomeOf(loadExtensions([component('c-omega', raw)], '2.1.0'), 'c-omega')._tag).toBe('Active');
  });
});

describe('TC-113: the framework-upgrade preflight lists the dependents and blocks while any remain', () => {
  it('TC-113: components whose framework range excludes the target are listed; none left = not blocked', () => {
    const r = loadExtensions([
      component('c-one', fullDeclaration('one', { framework: '^1.0.0' })),
      component('c-two', fullDeclaration('two', { framework: '>=1.0.0 <3.0.0' })),
    ]);
    expect(frameworkUpgradePreflight(r, '2.0.0')).toEqual({
      blocked: true,
      dependents: ['c-one (one 1.0.0: framework ^1.0.0)'],
    });
    expect(frameworkUpgradePreflight(r, '1.4.0')).toEqual({ blocked: false, dependents: [] });
    expect(
      frameworkUpgradePreflight(
        loadExtensions([component('c-two', fullDeclaration('two', { framework: '>=1.0.0 <3.0.0' }))]),
        '2.0.0',
      ).blocked,
    ).toBe(false);
  });
});

describe('range errors are declaration errors', () => {
  it('an unparsable dependency range invalidates the header', () => {
    const d = checkDeclaration(
      fullDeclaration('range', { dependencies: { components: [{ id: 'xx', range: '>=banana' }] } }),
    );
    expect(d._tag).toBe('Invalid');
    expect(d._tag === 'Invalid' && d.problems.join(' ')).toContain(
      'dependencies.components.0.range: ">=banana" is not a version or range',
    );
  });
});

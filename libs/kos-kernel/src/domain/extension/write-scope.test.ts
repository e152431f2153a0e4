// TC-109 (pure half): WriteScope.Admit over the Registry's active controllers.
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { checkDeclaration } from './declaration.js';
import { type ComponentFacts, loadExtensions } from './load.js';
import { buildRegistry } from './registry.js';
import { admitExtensionWrite, type ExtensionWrite } from './write-scope.js';

const declaration = (id: string, group: string, writeScope: unknown) => ({
  id,
  version: '1.0.0',
  framework: '^1.0.0',
  contributes: {
    kinds: [{ group, version: 'v1', kind: 'Thing', plural: 'things' }],
    controllers: [{ name: 'ctl', kind: 'Thing', module: 'm.mjs', writeScope }],
  },
});
const facts = (name: string, raw: unknown, at: string): ComponentFacts => ({
  name,
  createdAt: at,
  ownership: 'managed',
  disabled: false,
  package: { _tag: 'Verified', declaration: checkDeclaration(raw, ['m.mjs']) },
});

const registry = buildRegistry(
  loadExtensions([
    facts(
      'c-good',
      declaration('good', 'good.example.org', [
        { group: 'good.example.org', resource: 'things', verbs: ['create', 'update', 'status'] },
        { group: '', resource: 'persistentvolumeclaims', namespaces: ['good-data'], verbs: ['create', 'update'] },
        // declared, but the group is another extension's: still refused
        { group: 'other.example.org', resource: 'things', namespaces: ['apps'], verbs: ['update'] },
      ]),
      '2026-01-01T00:00:00Z',
    ),
    facts('c-other', declaration('other', 'other.example.org', []), '2026-01-01T00:00:01Z'),
  ]),
);

const write = (w: Partial<ExtensionWrite>): ExtensionWrite => ({
  extension: 'good',
  controller: 'ctl',
  group: 'good.example.org',
  resource: 'things',
  namespace: 'apps',
  name: 'a',
  verb: 'update',
  ...w,
});
const decide = (w: Partial<ExtensionWrite>) => {
  const ctx = registry.writeScopeOf('good', 'ctl');
  if (ctx === undefined) throw new Error('controller not active');
  const r = admitExtensionWrite(ctx, write(w));
  return Either.isRight(r) ? 'admitted' : r.left.message;
};

describe('TC-109: extension-controller writes outside scope are rejected; the declared scope stays writable', () => {
  it('TC-109: the declared scope is writable (own kind, PVC in the declared namespace)', () => {
    expect(decide({})).toBe('admitted');
    expect(decide({ verb: 'status' })).toBe('admitted');
    expect(decide({ group: '', resource: 'persistentvolumeclaims', namespace: 'good-data', verb: 'create' })).toBe(
      'admitted',
    );
  });

  it('TC-109: kernel objects, PVCs outside scope, another extension’s objects and undeclared verbs are rejected, naming extension, controller and object', () => {
    expect(decide({ group: 'kos.tsic.top', resource: 'applications', name: 'x' })).toBe(
      'write rejected: extension good controller ctl may not update kos.tsic.top/applications apps/x: kernel objects are written by the kernel only',
    );
    expect(decide({ group: '', resource: 'persistentvolumeclaims', namespace: 'kos-system', verb: 'create' })).toBe(
      'write rejected: extension good controller ctl may not create core/persistentvolumeclaims kos-system/a: outside the declared write scope',
    );
    expect(decide({ group: 'other.example.org' })).toBe(
      'write rejected: extension good controller ctl may not update other.example.org/things apps/a: other.example.org belongs to another extension',
    );
    expect(decide({ verb: 'delete' })).toMatch(/outside the declared write scope$/);
    expect(decide({ group: '', resource: 'secrets', namespace: 'good-data' })).toMatch(
      /outside the declared write scope$/,
    );
  });

  it('TC-109: a scope naming kos.tsic.top or a foreign resource without namespaces fails the controllers kind at load', () => {
    const d = checkDeclaration(
      declaration('bad', 'bad.example.org', [
        { group: 'kos.tsic.top', resource: 'volumes', verbs: ['update'] },
        { group: '', resource: 'persistentvolumeclaims', verbs: ['create'] },
      ]),
      ['m.mjs'],
    );
    expect(d._tag === 'Valid' && d.failures).toEqual([
      {
        kind: 'controllers',
        problems: [
          'controller ctl: the write scope names kos.tsic.top, which only the kernel writes',
          'controller ctl: the write scope on core/persistentvolumeclaims must name its namespaces',
        ],
      },
    ]);
  });

  it('TC-109: a controller that is not active has no scope at all', () => {
    expect(registry.writeScopeOf('good', 'nope')).toBeUndefined();
    expect(registry.writeScopeOf('missing', 'ctl')).toBeUndefined();
  });
});

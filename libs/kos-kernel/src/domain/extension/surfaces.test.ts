// Pages, settings and extension-object writes as the control plane decides them, pure (decisions 0344, 0345); the
// cluster half is test/extension-routes.it.test.ts.
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { checkDeclaration } from './declaration.js';
import { type ComponentFacts, loadExtensions } from './load.js';
import { controlPlaneWriteScope, desiredExtensionObject, pagesView, sameJson } from './object-writes.js';
import { buildRegistry } from './registry.js';
import { settingKeyOf, settingValueProblem, settingView, settingWriteRefusal } from './settings.js';
import { admitExtensionWrite } from './write-scope.js';

const declaration = (id: string, group: string) => ({
  id,
  version: '1.0.0',
  framework: '^1.0.0',
  contributes: {
    kinds: [{ group, version: 'v1', kind: 'Widget', plural: 'widgets', objectWriters: ['Owner', 'Member'] }],
    pages: [
      { id: 'main', title: 'Main', path: `/${id}`, roles: ['Owner', 'Member', 'Guest'] },
      {
        id: 'admin',
        title: 'Admin',
        path: `/${id}/admin`,
        roles: ['Owner', 'Member'],
        actions: [
          { id: 'reindex', roles: ['Owner'] },
          { id: 'refresh', roles: ['Owner', 'Member'] },
        ],
      },
    ],
    settings: [
      { id: `${id}.interval`, scope: 'cluster', type: 'number', default: 30, writer: 'user' },
      { id: `${id}.port`, scope: 'node', type: 'number', writer: 'user' },
      { id: `${id}.theme`, scope: 'user', type: 'string', default: 'light', writer: 'user' },
      { id: `${id}.seen`, scope: 'cluster', type: 'boolean', writer: 'extension' },
      { id: `${id}.fixed`, scope: 'cluster', type: 'string', writer: 'user', modifiable: false },
    ],
  },
});

let clock = 0;
const component = (name: string, raw: unknown, disabled = false): ComponentFacts => ({
  name,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, clock++)).toISOString(),
  ownership: 'managed',
  disabled,
  package: { _tag: 'Verified', declaration: checkDeclaration(raw) },
});

const registry = (disabled = false) =>
  buildRegistry(
    loadExtensions([
      component('c-alpha', declaration('alpha', 'alpha.example.org'), disabled),
      component('c-beta', declaration('beta', 'beta.example.org')),
    ]),
  );

const setting = (id: string) => {
  const s = registry()
    .contributions('settings')
    .find((x) => x.id === id);
  if (s === undefined) throw new Error(id);
  return s;
};

describe('TC-5 pages and settings of a component appear only while it is activated', () => {
  it('a disabled component contributes no page and no setting; the other component still does', () => {
    expect(pagesView(registry(true), 'Owner').map((p) => p.source.extension)).toEqual(['beta', 'beta']);
    expect(
      registry(true)
        .contributions('settings')
        .map((s) => s.id),
    ).not.toContain('alpha.interval');
    expect(pagesView(registry(false), 'Owner').map((p) => `${p.source.extension}:${p.id}`)).toEqual([
      'alpha:main',
      'alpha:admin',
      'beta:main',
      'beta:admin',
    ]);
  });

  it('a Guest sees only the pages declared for Guests; each page carries its declared source', () => {
    const guest = pagesView(registry(), 'Guest');
    expect(guest.map((p) => `${p.source.extension}:${p.id}`)).toEqual(['alpha:main', 'beta:main']);
    expect(guest[0]?.source).toEqual({ extension: 'alpha', version: '1.0.0', component: 'c-alpha' });
  });
});

describe('TC-34 page actions and extension-object writes by role and declaration', () => {
  it('a page lists only the actions the role may take', () => {
    const admin = (role: 'Owner' | 'Member') => pagesView(registry(), role).find((p) => p.id === 'admin');
    expect(admin('Owner')?.actions.map((a) => a.id)).toEqual(['reindex', 'refresh']);
    expect(admin('Member')?.actions.map((a) => a.id)).toEqual(['refresh']);
  });

  it('a user write is admitted in the kind’s own group and resource only, never in another extension’s', () => {
    const reg = registry();
    const widget = reg.resolveKind('alpha.example.org/v1', 'widgets');
    if (widget === undefined) throw new Error('not served');
    const ctx = controlPlaneWriteScope(reg.kinds, widget);
    const write = (group: string, resource: string) =>
      admitExtensionWrite(ctx, {
        extension: 'alpha',
        controller: 'control-plane',
        group,
        resource,
        namespace: 'ns',
        name: 'w',
        verb: 'create',
      });
    expect(Either.isRight(write('alpha.example.org', 'widgets'))).toBe(true);
    expect(Either.isLeft(write('beta.example.org', 'widgets'))).toBe(true);
    expect(Either.isLeft(write('kos.tsic.top', 'applications'))).toBe(true);
    expect(Either.isLeft(write('alpha.example.org', 'gadgets'))).toBe(true);
  });

  it('a body is checked field by field: apiVersion, status, markers, namespace', () => {
    const widget = registry().resolveKind('alpha.example.org/v1', 'Widget');
    if (widget === undefined) throw new Error('not served');
    const ok = desiredExtensionObject(
      widget,
      { apiVersion: 'alpha.example.org/v1', kind: 'Widget', metadata: { name: 'w', namespace: 'ns' }, spec: { a: 1 } },
      {},
    );
    expect(ok).toEqual({
      object: {
        apiVersion: 'alpha.example.org/v1',
        kind: 'Widget',
        name: 'w',
        namespace: 'ns',
        labels: {},
        annotations: {},
        spec: { a: 1 },
      },
    });
    const bad = desiredExtensionObject(
      widget,
      {
        apiVersion: 'alpha.example.org/v1',
        metadata: { name: 'w', labels: { 'kos.tsic.top/managed-by': 'x' } },
        status: { done: true },
      },
      {},
    );
    expect('problems' in bad && bad.problems.map((p) => p.field)).toEqual([
      'status',
      'metadata.namespace',
      'metadata.labels.kos.tsic.top/managed-by',
    ]);
    expect(sameJson({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] })).toBe(true);
    expect(sameJson({ a: 1 }, { a: 1, b: undefined })).toBe(false);
  });
});

describe('TC-7/TC-8 settings: current value, source, entry and the reasons there is none', () => {
  it('the stored value wins over the default; the entry is there for a writer, the reason for the others', () => {
    const interval = setting('alpha.interval');
    expect(settingView(interval, { account: 'o', role: 'Owner' }, undefined)).toMatchObject({
      value: 30,
      valueFrom: 'default',
      writer: 'user',
      edit: { method: 'PUT', path: '/api/v1/settings/alpha.interval' },
      source: { extension: 'alpha', component: 'c-alpha' },
    });
    expect(settingView(interval, { account: 'o', role: 'Owner' }, { found: true, value: 7 })).toMatchObject({
      value: 7,
      valueFrom: 'set',
    });
    expect(settingView(interval, { account: 'm', role: 'Member' }, undefined).notModifiable).toMatch(/only an Owner/);
    expect(settingWriteRefusal(setting('alpha.seen'), 'Owner')).toMatch(/written by the extension alpha/);
    expect(settingWriteRefusal(setting('alpha.fixed'), 'Owner')).toMatch(/not modifiable/);
    expect(settingWriteRefusal(setting('alpha.theme'), 'Member')).toBeUndefined();
    expect(settingWriteRefusal(setting('alpha.theme'), 'Guest')).toMatch(/read-only/);
  });

  it('node items need a DNS-subdomain node; user items are keyed by the caller; values follow the declared type', () => {
    expect(settingKeyOf(setting('alpha.port'), { account: 'o' })).toEqual({
      problem: 'alpha.port is a node setting: name the node',
    });
    expect(settingKeyOf(setting('alpha.port'), { account: 'o', node: 'Bad_Node' })).toEqual({
      problem: 'node "Bad_Node" is not a DNS subdomain',
    });
    expect(settingKeyOf(setting('alpha.port'), { account: 'o', node: 'node-1' })).toEqual({
      key: { id: 'alpha.port', node: 'node-1' },
    });
    expect(settingKeyOf(setting('alpha.theme'), { account: 'ann' })).toEqual({
      key: { id: 'alpha.theme', node: '', account: 'ann' },
    });
    expect(settingKeyOf(setting('alpha.interval'), { account: 'o', node: 'n' })).toHaveProperty('problem');
    expect(settingValueProblem(setting('alpha.interval'), '7')).toMatch(/takes a number/);
    expect(settingValueProblem(setting('alpha.interval'), 7)).toBeUndefined();
  });
});

import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect, Either, Schema } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { syncManifests } from '../adapter/file/manifests.js';
import { cel } from './annotations.js';
import {
  customResourceDefinition,
  customResourceDefinitionOrThrow,
  type CrdDefinition,
  type VersionDefinition,
} from './crd.js';
import { compareManifest, describeDrift } from './drift.js';
import { renderYaml } from './render.js';
import { Conditions, resource } from './resource.js';

const Spec = Schema.Struct({ size: Schema.optional(Schema.Int) });
const Status = Schema.Struct({ phase: Schema.optional(Schema.String), conditions: Schema.optional(Conditions) });
const v1 = resource({ apiVersion: 'example.test/v1', kind: 'Widget', spec: Spec, status: Status });
const v2 = resource({ apiVersion: 'example.test/v2', kind: 'Widget', spec: Spec, status: Status });

const def: CrdDefinition = {
  group: 'example.test',
  scope: 'Namespaced',
  names: { kind: 'Widget', plural: 'widgets', shortNames: ['wdg'] },
  versions: [
    { name: 'v1', schema: v1, storage: false, status: true },
    {
      name: 'v2',
      schema: v2,
      storage: true,
      status: true,
      printerColumns: [{ name: 'Phase', type: 'string', jsonPath: '.status.phase' }],
    },
  ],
};

describe('customResourceDefinition', () => {
  it('assembles names, scope, versions, subresources, printer columns and conversion None', () => {
    const crd = customResourceDefinitionOrThrow(def);
    expect(crd.metadata.name).toBe('widgets.example.test');
    expect(crd.spec.names).toEqual({
      kind: 'Widget',
      listKind: 'WidgetList',
      plural: 'widgets',
      singular: 'widget',
      shortNames: ['wdg'],
    });
    expect(crd.spec.conversion).toEqual({ strategy: 'None' });
    expect(crd.spec.versions.map((v) => [v.name, v.served, v.storage])).toEqual([
      ['v1', true, false],
      ['v2', true, true],
    ]);
    expect(crd.spec.versions[1]?.subresources).toEqual({ status: {} });
    expect(crd.spec.versions[1]?.additionalPrinterColumns).toEqual([
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
    ]);
    expect(crd.spec.versions[0]?.additionalPrinterColumns).toBeUndefined();
  });

  it('normalises the envelope: apiVersion/kind strings, metadata a bare object, spec required', () => {
    const root = customResourceDefinitionOrThrow(def).spec.versions[0]?.schema.openAPIV3Schema;
    expect(root?.properties?.['apiVersion']?.type).toBe('string');
    expect(root?.properties?.['apiVersion']?.enum).toBeUndefined();
    expect(root?.properties?.['metadata']).toEqual({ type: 'object' });
    expect(root?.required).toEqual(['spec']);
    expect(root?.properties?.['status']?.required).toBeUndefined();
  });

  it('root CEL rules piped onto the resource schema land on openAPIV3Schema', () => {
    const withRule = v2.pipe(cel('self.metadata.name.size() <= 20', 'name too long'));
    const crd = customResourceDefinitionOrThrow({
      ...def,
      versions: [{ name: 'v2', schema: withRule, storage: true, status: true }],
    });
    expect(crd.spec.versions[0]?.schema.openAPIV3Schema['x-kubernetes-validations']).toEqual([
      { rule: 'self.metadata.name.size() <= 20', message: 'name too long' },
    ]);
  });

  const reason = (d: CrdDefinition): string => {
    const r = customResourceDefinition(d);
    if (Either.isRight(r)) throw new Error('expected a refusal');
    return r.left.message;
  };

  const stored = def.versions[1] as VersionDefinition;
  it('refuses zero or two storage versions, duplicates, bad names and bad columns', () => {
    expect(reason({ ...def, versions: def.versions.map((v) => ({ ...v, storage: true })) })).toMatch(
      /exactly one storage version.*found 2/,
    );
    expect(reason({ ...def, versions: def.versions.map((v) => ({ ...v, storage: false })) })).toMatch(/found 0/);
    expect(reason({ ...def, versions: [stored, { ...stored, storage: false }] })).toMatch(/listed twice/);
    expect(reason({ ...def, names: { kind: 'Widget', plural: 'Widgets' } })).toMatch(/plural/);
    expect(reason({ ...def, names: { kind: 'widget', plural: 'widgets' } })).toMatch(/CamelCase/);
    expect(reason({ ...def, versions: [{ ...stored, name: 'version2' }] })).toMatch(/not a Kubernetes version/);
    expect(
      reason({
        ...def,
        versions: [{ ...stored, printerColumns: [{ name: 'P', type: 'string', jsonPath: 'status.phase' }] }],
      }),
    ).toMatch(/jsonPath/);
  });

  it('refuses a status subresource on a kind without a status field', () => {
    const noStatus = resource({ apiVersion: 'example.test/v2', kind: 'Widget', spec: Spec });
    expect(reason({ ...def, versions: [{ name: 'v2', schema: noStatus, storage: true, status: true }] })).toMatch(
      /without a status field/,
    );
    const crd = customResourceDefinitionOrThrow({
      ...def,
      versions: [{ name: 'v2', schema: noStatus, storage: true }],
    });
    expect(crd.spec.versions[0]?.subresources).toBeUndefined();
    expect(crd.spec.versions[0]?.schema.openAPIV3Schema.properties?.['status']).toBeUndefined();
  });

  it('reports schema errors with the CRD, version and field path', () => {
    const bad = resource({
      apiVersion: 'example.test/v2',
      kind: 'Widget',
      spec: Schema.Struct({ when: Schema.DateFromSelf }),
    });
    expect(reason({ ...def, versions: [{ name: 'v2', schema: bad, storage: true }] })).toMatch(
      /^widgets\.example\.test\/v2\.spec\.when: /,
    );
  });
});

describe('renderYaml', () => {
  it('is deterministic: key order of the input does not matter, output is byte-identical', () => {
    const a = renderYaml([{ b: 1, a: { d: [2, 1], c: 'x' } }], { header: ['generated'] });
    const b = renderYaml([{ a: { c: 'x', d: [2, 1] }, b: 1 }], { header: ['generated'] });
    expect(a).toBe(b);
    expect(a).toBe('# generated\n---\na:\n  c: x\n  d:\n  - 2\n  - 1\nb: 1\n');
  });

  it('round-trips a CRD and keeps long CEL rules on one line', () => {
    const long = `self.size() < 10 || ${'true && '.repeat(20)}true`;
    const crd = customResourceDefinitionOrThrow({
      ...def,
      versions: [{ name: 'v2', schema: v2.pipe(cel(long, 'm')), storage: true, status: true }],
    });
    const text = renderYaml([crd]);
    expect(parse(text)).toEqual(JSON.parse(JSON.stringify(crd)));
    expect(text).toContain(`rule: ${long}\n`);
    expect(renderYaml([crd])).toBe(text);
  });
});

describe('drift check', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('compareManifest: in sync, missing, drifted at the first different line', () => {
    expect(compareManifest('a.yaml', 'x\ny\n', 'x\ny\n')._tag).toBe('InSync');
    expect(compareManifest('a.yaml', 'x\ny\n', 'x\r\ny\r\n')._tag).toBe('InSync');
    expect(compareManifest('a.yaml', 'x\n', undefined)._tag).toBe('Missing');
    expect(compareManifest('a.yaml', 'x\ny\nz\n', 'x\nY\nz\n')).toEqual({
      _tag: 'Drifted',
      file: 'a.yaml',
      line: 2,
      expected: 'y',
      actual: 'Y',
    });
  });

  it('syncManifests: reports missing, writes in write mode, then detects an edit and a stray file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'crd-drift-'));
    dirs.push(dir);
    const files = { 'widgets.yaml': renderYaml([customResourceDefinitionOrThrow(def)]) };

    const first = await Effect.runPromise(syncManifests({ directory: dir, files, mode: 'check' }));
    expect(first.problems.map((p) => p._tag)).toEqual(['Missing']);

    const written = await Effect.runPromise(syncManifests({ directory: dir, files, mode: 'write' }));
    expect(written.written).toEqual(['widgets.yaml']);
    expect(await readFile(join(dir, 'widgets.yaml'), 'utf8')).toBe(files['widgets.yaml']);

    const clean = await Effect.runPromise(syncManifests({ directory: dir, files, mode: 'check' }));
    expect(clean.problems).toEqual([]);

    await writeFile(join(dir, 'widgets.yaml'), files['widgets.yaml'].replace('scope: Namespaced', 'scope: Cluster'));
    await writeFile(join(dir, 'old.yaml'), '---\n');
    const drifted = await Effect.runPromise(syncManifests({ directory: dir, files, mode: 'check' }));
    expect(drifted.problems.map((p) => p._tag)).toEqual(['Drifted', 'Stray']);
    expect(describeDrift(drifted)).toContain('generated "  scope: Namespaced" but the file has "  scope: Cluster"');
    expect(describeDrift(drifted)).toContain('old.yaml: not generated by anything');
  });
});

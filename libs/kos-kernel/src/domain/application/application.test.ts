// Pure rules of the application domain (seed 000 §5.1–§5.6): config parsing, the template engine, invalid-package
// rules, resources, the retry budget, action preconditions and the five built-in definitions.
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BUILTIN_DEFINITIONS, withDigest } from './builtin.js';
import { type ConfigSchema, normalizeConfig } from './config.js';
import { actionRefusal, afterInstallFailure, applyOrder, retryBackoffMs, uninstallStatus } from './lifecycle.js';
import { mergeResources, parseQuantity, resourceProblems, withResources } from './resources.js';
import { packageProblems, render, renderedBytes, templateVolumes } from './template.js';

const found = <T>(x: T | undefined): T => {
  if (x === undefined) throw new Error('not found');
  return x;
};
const def = (name: string) => found(BUILTIN_DEFINITIONS.find((d) => d.metadata.name === name)).spec;
const schemaOf = (name: string) => def(name)['config'] as ConfigSchema;
const renderWith = (name: string, submitted: unknown, appName = 'web', namespace = 'apps') => {
  const config = Either.getOrThrow(normalizeConfig(schemaOf(name), submitted));
  const volumes = Object.fromEntries(templateVolumes(def(name)).map((v) => [v, `${appName}-${v}`]));
  return Either.getOrThrow(render(def(name), { appName, namespace, config, volumes }));
};

describe('TC-45: the same config gives the same translation; equivalent configs are equivalent', () => {
  it('TC-45: rendering is a pure function — same input, same bytes (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...BUILTIN_DEFINITIONS.map((d) => d.metadata.name)),
        fc.stringMatching(/^[a-z][a-z0-9-]{0,20}[a-z0-9]$/),
        fc.stringMatching(/^[a-z][a-z0-9-]{0,20}[a-z0-9]$/),
        (name, app, ns) => {
          const a = renderWith(name, {}, app, ns);
          const b = renderWith(name, {}, app, ns);
          expect(renderedBytes(a)).toBe(renderedBytes(b));
          expect(a.digest).toBe(b.digest);
          for (const o of a.objects) expect(o.metadata.namespace).toBe(ns);
        },
      ),
    );
  });

  it('TC-45: an explicit default, a string numeral and key order give the same config and the same render (property)', () => {
    const schema = schemaOf('static-web');
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.string({ minLength: 1, maxLength: 20 }), (workers, title) => {
        const a = renderWith('static-web', { title, workerProcesses: workers });
        const b = renderWith('static-web', { workerProcesses: String(workers), title });
        expect(renderedBytes(a)).toBe(renderedBytes(b));
      }),
    );
    expect(normalizeConfig(schema, {})).toEqual(normalizeConfig(schema, { title: 'My homelab', workerProcesses: 1 }));
    expect(renderedBytes(renderWith('static-web', {}))).toBe(
      renderedBytes(renderWith('static-web', { title: 'My homelab', workerProcesses: '1' })),
    );
    expect(renderedBytes(renderWith('static-web', { title: 'x' }))).not.toBe(
      renderedBytes(renderWith('static-web', {})),
    );
  });

  it('typed placeholders keep the type; embedded ones interpolate text; | string converts', () => {
    const r = renderWith('n8n', { workerConcurrency: 7 });
    const worker = found(r.objects.find((o) => o.metadata.name === 'web-worker'));
    expect(JSON.stringify(worker)).toContain('--concurrency=7');
    const kuma = renderWith('uptime-kuma', { checkIntervalSeconds: 90 });
    expect(JSON.stringify(kuma)).toContain('"value":"90"');
  });

  it('out-of-range, wrong-typed, enum-violating and missing required values are refused naming the field', () => {
    const schema: ConfigSchema = {
      fields: {
        n: { type: 'integer', minimum: 1, maximum: 3 },
        m: { type: 'string', enum: ['a'] },
        r: { type: 'boolean', required: true },
      },
    };
    const left = (v: unknown) => Either.getOrThrow(Either.flip(normalizeConfig(schema, v)));
    expect(left({ n: 4, r: true })).toEqual([{ field: 'spec.config.n', message: 'must be ≤ 3 (maximum)' }]);
    expect(left({ n: 'x', r: true })[0]?.field).toBe('spec.config.n');
    expect(left({ m: 'b', r: true })[0]?.message).toContain('enum');
    expect(left({})).toEqual([{ field: 'spec.config.r', message: 'required' }]);
  });
});

describe('TC-46: volume and endpoint fields in private config are rejected', () => {
  it.each(['size', 'storagePolicy', 'storage_class', 'hostname', 'host', 'port', 'Port'])(
    'TC-46: spec.config.%s is refused naming the field',
    (key) => {
      const problems = Either.getOrThrow(Either.flip(normalizeConfig(schemaOf('static-web'), { [key]: 1 })));
      expect(problems).toHaveLength(1);
      expect(problems[0]?.field).toBe(`spec.config.${key}`);
      expect(problems[0]?.message).toMatch(/reserved: .* belongs to the (Volume|Endpoint) object/);
    },
  );
  it('TC-46: unknown keys are refused; a schema declaring a reserved key is an invalid package', () => {
    const problems = Either.getOrThrow(Either.flip(normalizeConfig(schemaOf('static-web'), { titel: 'typo' })));
    expect(problems).toEqual([
      { field: 'spec.config.titel', message: "unknown key: not declared by the definition's config schema" },
    ]);
    const bad = { ...def('static-web'), config: { fields: { port: { type: 'integer' } } } };
    expect(packageProblems(bad).map((p) => p.field)).toContain('spec.config.fields.port');
  });
});

describe('invalid packages (§5.2)', () => {
  const base = def('static-web');
  const docs = (base['template'] as { documents: unknown[] }).documents;
  const withDoc = (doc: unknown) => ({ ...base, template: { documents: [...docs, doc] } });
  it('a PersistentVolumeClaim, a storage class, volume templates, another namespace, a placeholder typo', () => {
    const cases: Array<[unknown, string]> = [
      [
        withDoc({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'x' } }),
        'spec.template.documents[3].kind',
      ],
      [
        withDoc({
          apiVersion: 'apps/v1',
          kind: 'StatefulSet',
          metadata: { name: 'x' },
          spec: { volumeClaimTemplates: [] },
        }),
        'spec.template.documents[3].spec.volumeClaimTemplates',
      ],
      [
        withDoc({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' }, data: { storageClassName: 'fast' } }),
        'spec.template.documents[3].data.storageClassName',
      ],
      [
        withDoc({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'kube-system' } }),
        'spec.template.documents[3].metadata.namespace',
      ],
      [
        withDoc({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: '{{app.nmae}}' } }),
        'spec.template.documents[3].metadata.name',
      ],
      [
        withDoc({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' }, data: { a: '{{config.titel}}' } }),
        'spec.template.documents[3].data.a',
      ],
      [{ ...base, package: { storageClass: 'fast' } }, 'spec.package.storageClass'],
    ];
    for (const [spec, field] of cases) {
      const problems = packageProblems(spec);
      expect(
        problems.map((p) => p.field),
        field,
      ).toContain(field);
      expect(Either.isLeft(render(spec, { appName: 'a', namespace: 'n', config: {}, volumes: {} }))).toBe(true);
    }
  });
  it('every built-in definition is a valid package with a content digest', () => {
    expect(BUILTIN_DEFINITIONS.map((d) => d.metadata.name)).toEqual([
      'static-web',
      'redis',
      'n8n',
      'miniflux',
      'uptime-kuma',
    ]);
    for (const d of BUILTIN_DEFINITIONS) {
      expect(packageProblems(d.spec), d.metadata.name).toEqual([]);
      const digest = (d.spec['package'] as { digest: string }).digest;
      expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(withDigest(d.spec)).toEqual(d.spec);
      const changed = withDigest({ ...d.spec, template: { documents: [] } });
      expect((changed['package'] as { digest: string }).digest).not.toBe(digest);
    }
    expect(templateVolumes(def('redis'))).toEqual(['data']);
  });
});

describe('built-in definitions: health probes', () => {
  type Container = {
    name: string;
    ports?: Array<{ name: string }>;
    readinessProbe?: Record<string, { port?: string; path?: string }>;
    livenessProbe?: Record<string, { port?: string; path?: string }> & { initialDelaySeconds?: number };
  };
  const probePort = (p: Record<string, unknown> | undefined) =>
    ((p?.['httpGet'] ?? p?.['tcpSocket']) as { port?: string } | undefined)?.port;
  it('every serving container of a built-in app is ready only when its declared port answers, and is probed for liveness after a start-up allowance', () => {
    let serving = 0;
    for (const d of BUILTIN_DEFINITIONS) {
      for (const o of renderWith(d.metadata.name, {}).objects.filter(
        (o) => o.kind === 'Deployment' || o.kind === 'StatefulSet',
      )) {
        const pod = (o as unknown as { spec: { template: { spec: { containers: Container[] } } } }).spec.template.spec;
        for (const c of pod.containers) {
          const where = `${d.metadata.name} ${o.metadata.name}/${c.name}`;
          if ((c.ports ?? []).length === 0) {
            // A process without a port (n8n's queue worker) has nothing to probe.
            expect(c.readinessProbe, where).toBeUndefined();
            continue;
          }
          serving++;
          const ports = (c.ports ?? []).map((p) => p.name);
          expect(ports, where).toContain(probePort(c.readinessProbe));
          expect(ports, where).toContain(probePort(c.livenessProbe));
          expect(c.livenessProbe?.initialDelaySeconds, where).toBeGreaterThan(0);
        }
      }
    }
    expect(serving).toBe(5);
  });
});

describe('TC-125/TC-126: resources (pure)', () => {
  it('quantities parse', () => {
    expect(parseQuantity('500m')).toBe(0.5);
    expect(parseQuantity('1Gi')).toBe(2 ** 30);
    expect(parseQuantity('1e3')).toBe(1000);
    expect(parseQuantity('lots')).toBeUndefined();
  });
  it('TC-126: a limit below its request is refused naming spec.resources.limits.<name>, also against the base request', () => {
    expect(resourceProblems({ requests: { cpu: '200m' }, limits: { cpu: '100m' } }, undefined)).toEqual([
      {
        field: 'spec.resources.limits.cpu',
        message: 'the limit 100m is below the request 200m (spec.resources.requests.cpu)',
      },
    ]);
    const base = { requests: { memory: '128Mi' }, limits: { memory: '512Mi' } };
    expect(resourceProblems({ limits: { memory: '64Mi' } }, base)[0]?.field).toBe('spec.resources.limits.memory');
    expect(resourceProblems({ limits: { memory: '256Mi' } }, base)).toEqual([]);
    expect(resourceProblems({ limits: { memory: 'lots' } }, base)[0]?.field).toBe('spec.resources.limits.memory');
  });
  it('TC-125: an override replaces only the submitted fields; every container and init container gets the result', () => {
    const merged = mergeResources({ requests: { cpu: '100m', memory: '128Mi' } }, { requests: { cpu: '250m' } });
    expect(merged).toEqual({ requests: { cpu: '250m', memory: '128Mi' } });
    const kuma = found(renderWith('uptime-kuma', {}).objects.find((o) => o.kind === 'Deployment'));
    const pod = (
      withResources(kuma, merged) as unknown as {
        spec: { template: { spec: { containers: unknown[]; initContainers: unknown[] } } };
      }
    ).spec.template.spec;
    for (const c of [...pod.containers, ...pod.initContainers])
      expect((c as { resources: unknown }).resources).toEqual(merged);
    expect(withResources(kuma, {})).toBe(kuma);
  });
});

describe('TC-55: retry budget and backoff (pure)', () => {
  it('TC-55: 10 s doubling, capped at 5 min; the 5th failure is Failed', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map(retryBackoffMs)).toEqual([10e3, 20e3, 40e3, 80e3, 160e3, 300e3, 300e3, 300e3]);
    const t0 = Date.parse('2026-12-01T00:00:00Z');
    expect(afterInstallFailure(0, t0)).toEqual({ _tag: 'Retry', retryCount: 1, nextRetryAt: '2026-12-01T00:00:10Z' });
    expect(afterInstallFailure(3, t0)).toEqual({ _tag: 'Retry', retryCount: 4, nextRetryAt: '2026-12-01T00:01:20Z' });
    expect(afterInstallFailure(4, t0)).toEqual({ _tag: 'Failed', retryCount: 5 });
  });
  it('action preconditions', () => {
    const t0 = Date.parse('2026-12-01T00:00:00Z');
    expect(actionRefusal('retry', { phase: 'Ready', deleting: false }, t0)).toMatch(/only when the app is Failed/);
    expect(actionRefusal('retry', { phase: 'Failed', deleting: false }, t0)).toBeUndefined();
    expect(actionRefusal('restart', { phase: 'Installing', deleting: false }, t0)).toMatch(/installed/);
    expect(actionRefusal('stop', { phase: 'Ready', deleting: true }, t0)).toMatch(/being uninstalled/);
    expect(actionRefusal('scale', { phase: 'Ready', deleting: false, replicas: -1 }, t0)).toMatch(/non-negative/);
    const u = uninstallStatus('2026-12-01T00:00:00Z', t0 + 9 * 60_000, ['Deployment/x']);
    expect(u.stalled).toBe(false);
    expect(actionRefusal('orphan', { phase: 'Uninstalling', deleting: true, uninstall: u }, t0 + 9 * 60_000)).toMatch(
      /10 minutes/,
    );
    expect(
      actionRefusal('orphan', { phase: 'Uninstalling', deleting: true, uninstall: u }, t0 + 10 * 60_000),
    ).toBeUndefined();
    expect(uninstallStatus('2026-12-01T00:00:00Z', t0 + 10 * 60_000, ['Deployment/x']).stalled).toBe(true);
  });
});

describe('write order of rendered objects', () => {
  it('TC-55 ConfigMaps, then Services, then workloads, each kind in render order — a refused ConfigMap stops the round before any pod could mount it', () => {
    const o = (kind: string, name: string) => ({ kind, metadata: { name } });
    const order = applyOrder([
      o('Deployment', 'web'),
      o('StatefulSet', 'db'),
      o('Deployment', 'worker'),
      o('Service', 'web'),
      o('ConfigMap', 'b'),
      o('ConfigMap', 'a'),
    ]).map((x) => `${x.kind}/${x.metadata.name}`);
    expect(order).toEqual([
      'ConfigMap/b',
      'ConfigMap/a',
      'Service/web',
      'Deployment/web',
      'StatefulSet/db',
      'Deployment/worker',
    ]);
  });
});

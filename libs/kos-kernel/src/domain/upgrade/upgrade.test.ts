// Upgrade and drift rules (seed 000 §5.7–§5.9; TC-50, TC-51, TC-52, TC-53, TC-116): pure part.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Either } from 'effect';
import { BUILTIN_DEFINITIONS } from '../application/builtin.js';
import { render } from '../application/template.js';
import type { Manifest } from '../application/template.js';
import {
  type Baseline,
  baselineConfig,
  changedPaths,
  confirmProblems,
  configDiff,
  configDrivenPaths,
  convergeObjects,
  dataFormatOf,
  declaredIrreversible,
  differencesOf,
  driftVerdict,
  hookOutcome,
  keepAt,
  observedDigestOf,
  packageDigestOf,
  preflight,
  renderDiff,
  specDigestOf,
  targetDigestOf,
  upgradeIntent,
  type UpgradeStatus,
  volumeFindings,
} from './index.js';

const staticWeb = () => {
  const d = BUILTIN_DEFINITIONS.find((x) => x.metadata.name === 'static-web');
  if (d === undefined) throw new Error('static-web is built in');
  return structuredClone(d.spec) as Record<string, unknown>;
};
const input = (config: Record<string, unknown> = { title: 'My homelab', workerProcesses: 1 }) => ({
  appName: 'web',
  namespace: 'apps',
  config: config as never,
  volumes: {},
});
const rendered = (spec = staticWeb(), config?: Record<string, unknown>) => {
  const r = render(spec, input(config));
  if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left));
  return r.right;
};
const facts = { paused: false, resources: {} };
const baselineOf = (over: Partial<Baseline> = {}): Baseline => {
  const r = rendered();
  return {
    renderDigest: r.digest,
    paused: false,
    resources: {},
    specDigest: 'sha256:old',
    packageDigest: packageDigestOf(staticWeb()),
    dataFormat: 'none',
    definition: 'static-web',
    config: { title: 'My homelab', workerProcesses: 1 },
    volumes: {},
    manifest: { objects: r.objects },
    ...over,
  };
};

describe('what counts as an upgrade request (C-34, C-32)', () => {
  it('the spec digest changes with the definition, config, volumes and namespace, never with pause/replicas/resources/policy', () => {
    const base = { definitionRef: { name: 'static-web' }, config: { title: 'a' }, volumes: { data: 'x' } };
    const d0 = specDigestOf(base, 'apps');
    expect(specDigestOf({ ...base, definitionRef: 'static-web' }, 'apps')).toBe(d0);
    for (const changed of [
      { ...base, definitionRef: { name: 'static-web-2' } },
      { ...base, config: { title: 'b' } },
      { ...base, volumes: { data: 'y' } },
      { ...base, namespace: 'other' },
    ])
      expect(specDigestOf(changed, 'apps')).not.toBe(d0);
    const facts = { ...base, paused: true, replicas: 3, resources: { limits: { cpu: '1' } }, driftPolicy: 'adopt' };
    expect(specDigestOf(facts as never, 'apps')).toBe(d0);
  });

  it('a definition update alone is not an upgrade: same spec digest as the baseline ⇒ no preflight', () => {
    const b = baselineOf({ specDigest: 'sha256:a' });
    expect(upgradeIntent(b, 'sha256:a', undefined, false)._tag).toBe('None');
    expect(upgradeIntent(undefined, 'sha256:b', undefined, false)._tag).toBe('None');
    expect(upgradeIntent(b, 'sha256:b', undefined, false)._tag).toBe('Preflight');
  });

  it('TC-51: a rolled-back target is held (no automatic retry); a new target or a retry tries again', () => {
    const b = baselineOf({ specDigest: 'sha256:a' });
    const u = { ...preflightOf(), specDigest: 'sha256:b', state: 'RolledBack' } as UpgradeStatus;
    expect(upgradeIntent(b, 'sha256:b', u, false)).toEqual({ _tag: 'Held', state: 'RolledBack' });
    expect(upgradeIntent(b, 'sha256:b', u, true)._tag).toBe('Preflight');
    expect(upgradeIntent(b, 'sha256:c', u, false)._tag).toBe('Preflight');
    const rejected = { ...u, state: 'Rejected' } as UpgradeStatus;
    expect(upgradeIntent(b, 'sha256:b', rejected, true)).toEqual({ _tag: 'Held', state: 'Rejected' });
    for (const state of ['Preflighted', 'Applied', 'HookRunning', 'RollingBack'] as const)
      expect(upgradeIntent(b, 'sha256:a', { ...u, state }, false)).toEqual({ _tag: 'Continue', state });
  });
});

const preflightOf = (spec = staticWeb(), config?: Record<string, unknown>, over: Partial<Baseline> = {}) => {
  const r = rendered(spec, config);
  return preflight({
    baseline: baselineOf(over),
    target: {
      specDigest: 'sha256:new',
      packageDigest: packageDigestOf(spec),
      ...(dataFormatOf(spec) !== undefined ? { dataFormat: dataFormatOf(spec) as string } : {}),
      definition: 'static-web-2',
      config: baselineConfig(config ?? { title: 'My homelab', workerProcesses: 1 }, []),
      volumes: {},
      objects: r.objects,
      renderDigest: targetDigestOf(r.objects, facts),
    },
    volumeFacts: {},
  });
};

describe('preflight (§5.7)', () => {
  it('config diff by field, render diff by object with field paths', () => {
    const p = preflightOf(staticWeb(), { title: 'New', workerProcesses: 1 });
    expect(p.config).toEqual([{ field: 'spec.config.title', change: 'changed', from: 'My homelab', to: 'New' }]);
    expect(p.render).toEqual([
      { change: 'update', kind: 'ConfigMap', name: 'web-content', fields: ['data["index.html"]'] },
    ]);
    expect(p.verdict).toBe('Passed');
  });

  it('render diff: create and delete by object', () => {
    const from = rendered().objects;
    const first = from[0] as Manifest;
    const extra = { ...first, metadata: { ...first.metadata, name: 'web-extra' } } as Manifest;
    expect(renderDiff(from, [...from.slice(1), extra]).map((c) => `${c.change} ${c.kind}/${c.name}`)).toEqual([
      `delete ${first.kind}/${first.metadata.name}`,
      `create ${first.kind}/web-extra`,
    ]);
  });

  it('a sensitive field shows only that it changed', () => {
    const a = baselineConfig({ password: 'one' }, ['password']);
    const b = baselineConfig({ password: 'two' }, ['password']);
    expect(JSON.stringify(a)).not.toContain('one');
    expect(configDiff(a, b)).toEqual([{ field: 'spec.config.password', change: 'changed' }]);
  });

  it('TC-52: a data-format change is irreversible and rejected — also when the declaration is removed', () => {
    const changed = staticWeb();
    (changed['package'] as Record<string, unknown>)['dataFormat'] = 'v2';
    const p = preflightOf(changed);
    expect(p.verdict).toBe('Rejected');
    expect(p.irreversible.map((i) => i.kind)).toEqual(['DataFormatChange']);
    const removed = staticWeb();
    delete (removed['package'] as Record<string, unknown>)['dataFormat'];
    expect(preflightOf(removed).irreversible.map((i) => i.kind)).toEqual(['DataFormatChange']);
  });

  it('TC-52: a dropped volume claim, a shrink and an undeterminable bound claim are irreversible; a policy change is a migration requirement', () => {
    const facts = {
      a: { claim: 'a', exists: true, bound: true, requestedSize: '5Gi' },
      b: { claim: 'b', exists: true, bound: true, requestedSize: '2Gi' },
      c: { claim: 'c', exists: true, bound: true, requestedSize: 'garbage' },
      d: {
        claim: 'd',
        exists: true,
        bound: true,
        requestedSize: '1Gi',
        desiredPolicy: 'fast',
        actualPolicy: 'standard',
      },
      e: { claim: 'e', exists: true, bound: true, requestedSize: '4Gi', desiredSize: '2Gi' },
    };
    expect(volumeFindings({ data: 'a', gone: 'z' }, { data: 'b' }, facts).irreversible.map((i) => i.kind)).toEqual([
      'VolumeClaimDeletion',
      'VolumeClaimDeletion',
      'VolumeShrink',
    ]);
    expect(volumeFindings({}, { data: 'c' }, facts).irreversible.map((i) => i.kind)).toEqual(['VolumeUndeterminable']);
    expect(volumeFindings({}, { data: 'e' }, facts).irreversible.map((i) => i.kind)).toEqual(['VolumeShrink']);
    const d = volumeFindings({ data: 'd' }, { data: 'd' }, facts);
    expect(d.irreversible).toEqual([]);
    expect(d.migrations).toEqual([
      { kind: 'VolumeMigration', volume: 'data', claim: 'd', from: 'standard', to: 'fast' },
    ]);
    // moving a volume to a bigger claim drops the old claim (irreversible) but is no shrink
    expect(volumeFindings({ data: 'b' }, { data: 'a' }, facts).irreversible.map((i) => i.kind)).toEqual([
      'VolumeClaimDeletion',
    ]);
  });

  it('no input lets an irreversible item pass (property: any data-format pair that differs is rejected)', () => {
    fc.assert(
      fc.property(fc.option(fc.string(), { nil: undefined }), fc.option(fc.string(), { nil: undefined }), (a, b) => {
        const spec = staticWeb();
        const pkg = spec['package'] as Record<string, unknown>;
        if (b === undefined) delete pkg['dataFormat'];
        else pkg['dataFormat'] = b;
        const p = preflightOf(spec, undefined, a === undefined ? { dataFormat: undefined } : { dataFormat: a });
        return (p.verdict === 'Rejected') === (a !== b);
      }),
    );
  });
});

describe('render digests (§5.7 "Digests")', () => {
  it('the target digest depends on the facts; the applied digest does not', () => {
    const r = rendered();
    const running = targetDigestOf(r.objects, facts);
    const stopped = targetDigestOf(r.objects, { paused: true, resources: {} });
    expect(stopped).not.toBe(running);
    expect(rendered().digest).toBe(r.digest);
    const deployment = convergeObjects(r.objects, { paused: true, resources: {} }).find((o) => o.kind === 'Deployment');
    expect((deployment?.['spec'] as { replicas: number }).replicas).toBe(0);
  });

  it('property: the observation of a cluster holding exactly the converged target has the target digest', () => {
    fc.assert(
      fc.property(fc.boolean(), fc.option(fc.integer({ min: 0, max: 9 }), { nil: undefined }), (paused, replicas) => {
        const f = { paused, ...(replicas !== undefined ? { replicas } : {}), resources: {} };
        const r = rendered();
        const stored = new Map(
          convergeObjects(r.objects, f).map((o) => [
            `${o.kind}/${o.metadata.name}`,
            {
              ...o,
              metadata: {
                ...o.metadata,
                uid: 'u',
                resourceVersion: '9',
                labels: { ...(o.metadata['labels'] as object), 'kos.tsic.top/managed-by': 'kos' },
              },
              status: { replicas: 1 },
            },
          ]),
        );
        return observedDigestOf(r.objects, stored, f) === targetDigestOf(r.objects, f);
      }),
    );
  });

  it('an observation that differs in one field, or misses an object, has another digest', () => {
    const r = rendered();
    const stored = new Map<string, unknown>(r.objects.map((o) => [`${o.kind}/${o.metadata.name}`, structuredClone(o)]));
    const target = targetDigestOf(r.objects, facts);
    expect(observedDigestOf(r.objects, stored, facts)).toBe(target);
    const cm = stored.get('ConfigMap/web-content') as { data: Record<string, string> };
    cm.data['index.html'] = 'changed by hand';
    expect(observedDigestOf(r.objects, stored, facts)).not.toBe(target);
    stored.delete('ConfigMap/web-content');
    expect(observedDigestOf(r.objects, stored, facts)).not.toBe(target);
  });
});

describe('drift (§5.8, TC-116)', () => {
  const r = rendered();
  const deployment = r.objects.find((o) => o.kind === 'Deployment') as Manifest;
  const configMap = r.objects.find((o) => o.kind === 'ConfigMap') as Manifest;

  it('server defaults and KOS markers are not drift; a changed image or an added container is', () => {
    const stored = structuredClone(deployment) as unknown as {
      metadata: { labels: Record<string, string> };
      spec: { progressDeadlineSeconds?: number; template: { spec: { containers: Array<Record<string, unknown>> } } };
    };
    const container = stored.spec.template.spec.containers[0] as Record<string, unknown>;
    stored.metadata.labels['kos.tsic.top/managed-by'] = 'kos';
    container['terminationMessagePath'] = '/dev/termination-log';
    stored.spec.progressDeadlineSeconds = 600;
    expect(differencesOf(deployment, stored)).toEqual([]);
    container['image'] = 'nginx:hand-edited';
    expect(differencesOf(deployment, stored)).toEqual(['spec.template.spec.containers[0].image']);
    stored.spec.template.spec.containers.push({ name: 'sidecar', image: 'busybox' });
    expect(differencesOf(deployment, stored)).toContain('spec.template.spec.containers[1]');
    expect(differencesOf(deployment, undefined)).toEqual(['(absent)']);
  });

  it('probe renders find the config-driven paths', () => {
    const driven = configDrivenPaths(staticWeb(), input(), facts);
    expect(driven.get('ConfigMap/web-content:data["index.html"]')).toBe('title');
    expect(driven.get('ConfigMap/web-content:data["nginx.conf"]')).toBe('workerProcesses');
    expect(driven.has('Deployment/web:spec.template.spec.containers[0].image')).toBe(false);
  });

  it('reconcile corrects; adopt records only the expressible differences; ignore reports only', () => {
    const driven = configDrivenPaths(staticWeb(), input(), facts);
    const diffs = [
      { object: 'ConfigMap/web-content', path: 'data["index.html"]', value: 'hand' },
      { object: 'Deployment/web', path: 'spec.template.spec.containers[0].image', value: 'nginx:x' },
    ];
    const reconcile = driftVerdict('reconcile', diffs, driven);
    expect(reconcile).toMatchObject({ writeBack: true, drifted: false, recorded: [] });
    const adopt = driftVerdict('adopt', diffs, driven);
    expect(adopt).toMatchObject({ writeBack: false, drifted: true });
    expect(adopt.recorded).toEqual([{ ...diffs[0], field: 'spec.config.title' }]);
    expect(adopt.refused).toEqual([diffs[1]]);
    const ignore = driftVerdict('ignore', diffs, driven);
    expect(ignore).toMatchObject({ writeBack: false, drifted: true, recorded: [], reported: diffs });
  });

  it('keepAt writes the external value into the desired object (adopt/ignore keep it)', () => {
    const stored = structuredClone(configMap) as unknown as { data: Record<string, string> };
    stored.data['index.html'] = 'hand';
    const kept = keepAt(configMap, stored, ['data["index.html"]']);
    expect(differencesOf(kept, stored)).toEqual([]);
    expect((configMap['data'] as Record<string, string>)['index.html']).not.toBe('hand');
  });
});

describe('paths (property)', () => {
  const json = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom<unknown>(null, true, 1, 'x', 'y'),
      fc.array(tie('value'), { maxLength: 3 }),
      fc.dictionary(
        fc.oneof(fc.constantFrom('a', 'b', 'index.html', 'x"y', 'a[0]', ''), fc.string({ maxLength: 4 })),
        tie('value'),
        { maxKeys: 3 },
      ),
    ),
  })).value;
  const obj = fc.dictionary(fc.constantFrom('data', 'spec', 'k.v'), json, { maxKeys: 3 });

  it('keepAt over every changed path turns the desired object into the stored one; pathSteps reads back each path', () => {
    fc.assert(
      fc.property(obj, obj, (desired, stored) => {
        const paths = changedPaths(desired, stored);
        const kept = keepAt(desired as unknown as Manifest, stored, paths);
        return changedPaths(kept, stored).length === 0;
      }),
      { numRuns: 300 },
    );
  });
});

describe('confirm by triple digest (§5.9, TC-53)', () => {
  it('accepted only when the record equals the observation, the requested target and the current spec digest', () => {
    const ok = { observedDigest: 'sha256:t', requestedDigest: 'sha256:t', specDigest: 'sha256:s' };
    expect(confirmProblems({ targetDigest: 'sha256:t', specDigest: 'sha256:s' }, ok)).toEqual([]);
    expect(confirmProblems({ targetDigest: 'sha256:x', specDigest: 'sha256:s' }, ok)).toEqual([
      'observation',
      'requested',
    ]);
    expect(confirmProblems({ targetDigest: 'sha256:t', specDigest: 'sha256:old' }, ok)).toEqual(['spec']);
    expect(
      confirmProblems({ targetDigest: 'sha256:t', specDigest: 'sha256:s' }, { ...ok, observedDigest: 'sha256:o' }),
    ).toEqual(['observation']);
  });

  it('property: any disagreement of the three refuses', () => {
    const d = fc.constantFrom('sha256:a', 'sha256:b');
    fc.assert(
      fc.property(d, d, d, d, d, (t, s, o, r, c) => {
        const problems = confirmProblems(
          { targetDigest: t, specDigest: s },
          { observedDigest: o, requestedDigest: r, specDigest: c },
        );
        return (problems.length === 0) === (t === o && t === r && s === c);
      }),
    );
  });

  it('the forced pause applies to an app whose upgrade was declared irreversible', () => {
    const p = preflightOf();
    expect(declaredIrreversible({ ...p, state: 'Rejected' })).toBe(false);
    const rejected = { ...p, irreversible: [{ kind: 'DataFormatChange', message: 'x' }], state: 'Rejected' };
    expect(declaredIrreversible(rejected as UpgradeStatus)).toBe(true);
  });
});

describe('hook outcome (TC-50, TC-51)', () => {
  it('Failed condition ⇒ failed; succeeded ⇒ succeeded; gone after creation ⇒ missing; no hook ⇒ none', () => {
    expect(hookOutcome(false, undefined, false)).toBe('none');
    expect(hookOutcome(true, undefined, false)).toBe('running');
    expect(hookOutcome(true, undefined, true)).toBe('missing');
    expect(hookOutcome(true, { status: {} }, true)).toBe('running');
    expect(hookOutcome(true, { status: { succeeded: 1 } }, true)).toBe('succeeded');
    expect(hookOutcome(true, { status: { failed: 1, conditions: [{ type: 'Failed', status: 'True' }] } }, true)).toBe(
      'failed',
    );
  });
});

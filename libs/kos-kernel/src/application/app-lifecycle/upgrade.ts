// The upgrade half of the application reconciler (seed 000 §5.7–§5.9, C-34; TC-50…TC-53, TC-116; decisions
// 0320–0324). `upgradeGate` runs before the install path's render for an installed app (Ready / Upgrading with a
// baseline) and either takes the whole round (a preflight, an upgrade step, a rollback, a forced pause, a confirm)
// or pins the install path to the baseline's manifest, so a catalogue update of the definition never changes
// installed objects (C-32). Every upgrade step is stored in `status.upgrade.state` before the next one is taken.
import { Context, Effect, Either, Option } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { type ConfigSchema, normalizeConfig } from '../../domain/application/config.js';
import { definitionNameOf, isoSeconds, storedReady } from '../../domain/application/lifecycle.js';
import { mergeResources, type ResourceSpec } from '../../domain/application/resources.js';
import { type Manifest, render, type Rendered, SCALABLE_KINDS } from '../../domain/application/template.js';
import { desiredVolumeSize, volumeClaimsOf } from '../../domain/application/volume.js';
import {
  type Baseline,
  baselineConfig,
  confirmProblems,
  configDrivenPaths,
  convergeObject,
  convergeObjects,
  dataFormatOf,
  declaredIrreversible,
  differencesOf,
  type DriftItem,
  driftPolicyOf,
  driftVerdict,
  type Facts,
  hookOutcome,
  isBaseline,
  keepAt,
  observedDigestOf,
  packageDigestOf,
  preflight,
  specDigestOf,
  targetDigestOf,
  type UpgradeReason,
  type UpgradeStatus,
  upgradeIntent,
  valueAt,
  type VolumeFacts,
} from '../../domain/upgrade/index.js';
import type { Condition } from '../../domain/state.js';
import { admit, type WriteRejected } from '../../domain/write-path.js';
import type { KosRound } from '../kernel.js';
import { applyDownstream, decorate, deleteDownstream, listDownstream } from './downstream.js';
import { definitionOf } from './reads.js';
import { RECORD_LABELS } from './records.js';
import { AppLifecycleConfig } from './services.js';

const API = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;

/** `pkg/app.VolumeSource`: the volume facts of one claim (PVC, bound PV, Volume). Live over the KubeClient. */
export class VolumeSource extends Context.Tag('@homelab/kos-kernel/VolumeSource')<
  VolumeSource,
  { readonly facts: (namespace: string, claim: string) => Effect.Effect<VolumeFacts, KubeError> }
>() {}

const getOrUndefined = (ref: { apiVersion: string; kind: string; namespace?: string; name: string }) =>
  Effect.flatMap(KubeClient, (c) =>
    c.get(ref).pipe(
      Effect.map((o): KubeObject | undefined => o),
      Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
    ),
  );

/** The live reading: the same-named PVC gives size and desired policy, its bound PV the actual policy. */
export const volumeFactsFromCluster = (
  namespace: string,
  claim: string,
): Effect.Effect<VolumeFacts, KubeError, KubeClient> =>
  Effect.gen(function* () {
    const pvc = yield* getOrUndefined({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace, name: claim });
    const volume = yield* getOrUndefined({ apiVersion: API, kind: 'Volume', namespace, name: claim });
    if (pvc === undefined) return { claim, exists: false, bound: false };
    const spec = (pvc['spec'] ?? {}) as {
      storageClassName?: string;
      volumeName?: string;
      resources?: { requests?: { storage?: unknown } };
    };
    const phase = (pvc['status'] as { phase?: string } | undefined)?.phase;
    const pv =
      spec.volumeName !== undefined && spec.volumeName !== ''
        ? yield* getOrUndefined({ apiVersion: 'v1', kind: 'PersistentVolume', name: spec.volumeName })
        : undefined;
    const actual = (pv?.['spec'] as { storageClassName?: string } | undefined)?.storageClassName;
    return {
      claim,
      exists: true,
      bound: phase === 'Bound' || pv !== undefined,
      ...(spec.resources?.requests?.storage !== undefined ? { requestedSize: spec.resources.requests.storage } : {}),
      ...(volume !== undefined ? { desiredSize: desiredVolumeSize(volume['spec']) } : {}),
      ...(spec.storageClassName !== undefined ? { desiredPolicy: spec.storageClassName } : {}),
      ...(actual !== undefined ? { actualPolicy: actual } : {}),
    };
  });

const volumeFacts = (namespace: string, claim: string) =>
  Effect.flatMap(Effect.serviceOption(VolumeSource), (s) =>
    Option.isSome(s) ? s.value.facts(namespace, claim) : volumeFactsFromCluster(namespace, claim),
  );

interface AppSpec {
  readonly definitionRef?: unknown;
  readonly namespace?: string;
  readonly config?: unknown;
  readonly volumes?: Readonly<Record<string, string>>;
  readonly replicas?: number;
  readonly paused?: boolean;
  readonly resources?: ResourceSpec;
}

/** What the status writer of the install path offers this module. */
export interface StatusPort<S> {
  readonly write: (app: KubeObject, status: S) => Effect.Effect<KubeObject, KubeError | WriteRejected, KubeClient>;
  readonly conditions: (
    status: S,
    now: Date,
    reconciled:
      | { readonly _tag: 'Applied'; readonly message: string }
      | { readonly _tag: 'Pending'; readonly reason: string; readonly message: string },
    extra: ReadonlyArray<Omit<Condition, 'lastTransitionTime'>>,
    drop?: ReadonlyArray<string>,
  ) => ReadonlyArray<Condition>;
}

export type Gate =
  | { readonly _tag: 'Round'; readonly round: KosRound }
  | { readonly _tag: 'Pinned'; readonly baseline: Baseline; readonly rendered: Rendered }
  | { readonly _tag: 'Render' };

type UpStatus = {
  readonly phase?: string;
  readonly conditions?: ReadonlyArray<Condition>;
  readonly resourceDefaults?: ResourceSpec;
  readonly applied?: unknown;
  readonly upgrade?: UpgradeStatus;
  readonly drift?: unknown;
  readonly health?: { readonly state?: string };
};

const UPGRADE_CONDITIONS = ['IrreversibleUpgrade', 'UpgradeRejected', 'UpgradeCompleted', 'UpgradeRolledBack'];

/** The facts the install path writes this round (pause, replicas, resources). */
export const factsOf = (app: KubeObject, resourceDefaults: ResourceSpec | undefined): Facts => {
  const spec = (app['spec'] ?? {}) as AppSpec;
  return {
    paused: spec.paused === true,
    ...(spec.replicas !== undefined ? { replicas: spec.replicas } : {}),
    resources: mergeResources(resourceDefaults ?? {}, spec.resources),
  };
};

const shapeWith = (app: KubeObject, f: Facts) => (o: Manifest) => decorate(convergeObject(o, f), app);

/** The baseline the install path stores in `status.applied` (the facts are added by the caller). */
export const baselineOf = (
  app: KubeObject,
  definitionSpec: Readonly<Record<string, unknown>>,
  config: Readonly<Record<string, unknown>>,
  volumes: Readonly<Record<string, string>>,
  rendered: Rendered,
): Omit<Baseline, keyof Facts> => {
  const spec = (app['spec'] ?? {}) as AppSpec;
  const schema = definitionSpec['config'] as ConfigSchema | undefined;
  const sensitive = Object.entries(schema?.fields ?? {})
    .filter(([, f]) => f.sensitive === true)
    .map(([k]) => k);
  const dataFormat = dataFormatOf(definitionSpec);
  return {
    renderDigest: rendered.digest,
    specDigest: specDigestOf(spec, app.metadata.namespace ?? 'default'),
    packageDigest: packageDigestOf(definitionSpec),
    ...(dataFormat !== undefined ? { dataFormat } : {}),
    definition: definitionNameOf(spec.definitionRef) ?? '',
    config: baselineConfig(config, sensitive),
    volumes,
    manifest: {
      objects: rendered.objects,
      ...(rendered.installHook !== undefined ? { installHook: rendered.installHook } : {}),
    },
  };
};

interface Target {
  readonly definitionSpec: Readonly<Record<string, unknown>>;
  readonly config: Readonly<Record<string, unknown>>;
  readonly volumes: Readonly<Record<string, string>>;
  readonly rendered: Rendered;
}

/** Read and render the target the current spec asks for (Left = a code and a message; nothing written). */
const targetOf = (app: KubeObject, namespace: string) =>
  Effect.gen(function* () {
    const spec = (app['spec'] ?? {}) as AppSpec;
    const name = definitionNameOf(spec.definitionRef);
    // a fresh read (an upgrade target is decided on the API server's answer), which also fences the cache (0350)
    const def = name === undefined ? undefined : (yield* definitionOf(name, 'fresh')).object;
    if (def === undefined)
      return Either.left({
        reason: 'DefinitionMissing' as UpgradeReason,
        message: `the ApplicationDefinition ${name ?? '(none)'} does not exist`,
      });
    const defSpec = (def['spec'] ?? {}) as Record<string, unknown>;
    const config = normalizeConfig(defSpec['config'] as ConfigSchema | undefined, spec.config);
    if (Either.isLeft(config))
      return Either.left({
        reason: 'RenderFailed' as UpgradeReason,
        message: config.left.map((p) => `${p.field}: ${p.message}`).join('; '),
      });
    const volumes = volumeClaimsOf(app.metadata.name ?? '', spec.volumes, defSpec);
    const rendered = render(defSpec, { appName: app.metadata.name ?? '', namespace, config: config.right, volumes });
    if (Either.isLeft(rendered))
      return Either.left({
        reason: 'RenderFailed' as UpgradeReason,
        message: rendered.left.map((p) => `${p.field}: ${p.message}`).join('; '),
      });
    return Either.right<Target>({ definitionSpec: defSpec, config: config.right, volumes, rendered: rendered.right });
  });

const keyOf = (o: { kind: string; metadata: { name?: string } }) => `${o.kind}/${o.metadata.name ?? ''}`;

const pinnedRender = (b: Baseline): Rendered => ({
  objects: b.manifest.objects,
  ...(b.manifest.installHook !== undefined ? { installHook: b.manifest.installHook } : {}),
  digest: b.renderDigest,
});

/** Confirm records (the control plane's one-shot `confirm` with the target digest and the spec digest). */
export const confirmRecords = (appUid: string) =>
  Effect.gen(function* () {
    const { systemNamespace } = yield* AppLifecycleConfig;
    const client = yield* KubeClient;
    const list = yield* client.list(
      { apiVersion: 'v1', kind: 'ConfigMap', namespace: systemNamespace },
      { labelSelector: `${RECORD_LABELS.appUid}=${appUid},${RECORD_LABELS.action}=confirm` },
    );
    return list.items.map((o) => {
      const data = (o['data'] ?? {}) as Record<string, string>;
      return {
        name: o.metadata.name ?? '',
        targetDigest: data['targetDigest'] ?? '',
        specDigest: data['specDigest'] ?? '',
      };
    });
  });

const deleteRecord = (name: string) =>
  Effect.gen(function* () {
    const { systemNamespace } = yield* AppLifecycleConfig;
    const d = admit({
      subject: 'application-reconciler',
      target: 'ActionRecord',
      part: 'delete',
      object: { namespace: systemNamespace, name },
    });
    if (Either.isLeft(d)) return yield* Effect.fail(d.left);
    const client = yield* KubeClient;
    yield* client
      .delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: systemNamespace, name })
      .pipe(Effect.catchTag('NotFound', () => Effect.void));
  });

/**
 * The gate. `retry` = a retry record was pending this round (it is consumed by the caller either way).
 */
export const upgradeGate = <S extends UpStatus>(
  app: KubeObject,
  status: S,
  ctx: { readonly retry: boolean; readonly nowMs: number; readonly namespace: string; readonly port: StatusPort<S> },
): Effect.Effect<Gate, KubeError | WriteRejected, KubeClient | AppLifecycleConfig> =>
  Effect.gen(function* () {
    // An app that reached Ready once keeps its baseline through Pending / Installing (a prerequisite went away):
    // a new target still goes through the preflight, and the install path stays pinned to the baseline.
    const installedOnce = isBaseline(status.applied) && status.applied.installed === true;
    if (
      !isBaseline(status.applied) ||
      (status.phase !== 'Ready' &&
        status.phase !== 'Upgrading' &&
        !(installedOnce && (status.phase === 'Pending' || status.phase === 'Installing')))
    )
      return { _tag: 'Render' } as Gate;
    const baseline = status.applied;
    const now = new Date(ctx.nowMs);
    const { port, namespace } = ctx;
    const spec = (app['spec'] ?? {}) as AppSpec;
    const specDigest = specDigestOf(spec, app.metadata.namespace ?? 'default');
    const facts = factsOf(app, status.resourceDefaults);
    const shape = shapeWith(app, facts);
    const upgrade = status.upgrade;
    const intent = upgradeIntent(baseline, specDigest, upgrade, ctx.retry);
    const round = (r: KosRound): Gate => ({ _tag: 'Round', round: r });
    const write = (s: S) => port.write(app, s);

    // --- TC-53: an app with a declared irreversible upgrade is paused on an external change -------------------
    if (declaredIrreversible(upgrade) && intent._tag === 'Held') {
      const paused = yield* externalChangeRound(app, status, baseline, specDigest, facts, ctx);
      if (paused !== undefined) return round(paused);
    }

    if (intent._tag === 'None' || intent._tag === 'Held')
      return { _tag: 'Pinned', baseline, rendered: pinnedRender(baseline) } as Gate;

    const rollBack = (reason: UpgradeReason, message: string) =>
      Effect.gen(function* () {
        yield* write({
          ...status,
          upgrade: { ...(upgrade as UpgradeStatus), state: 'RollingBack', reason, message },
        });
        return round({ state: 'active', requeueAfterMs: 0 });
      });

    if (intent._tag === 'Preflight') {
      const target = yield* targetOf(app, namespace);
      if (Either.isLeft(target)) {
        const { reason, message } = target.left;
        yield* write({
          ...status,
          upgrade: {
            fromSpecDigest: baseline.specDigest,
            specDigest,
            packageDigest: '',
            definition: definitionNameOf(spec.definitionRef) ?? '',
            renderDigest: '',
            config: [],
            render: [],
            irreversible: [],
            migrations: [],
            verdict: 'Rejected',
            state: 'Rejected',
            reason,
            message,
          } satisfies UpgradeStatus,
          conditions: port.conditions(
            status,
            now,
            { _tag: 'Pending', reason: 'UpgradeRejected', message: `${reason}: ${message}` },
            [{ type: 'UpgradeRejected', status: 'True', reason, message }],
            UPGRADE_CONDITIONS,
          ),
        });
        return round({ state: 'active', requeueAfterMs: 0 });
      }
      const t = target.right;
      const claims = [...new Set([...Object.values(baseline.volumes), ...Object.values(t.volumes)])].sort();
      const vf: Record<string, VolumeFacts> = {};
      for (const c of claims) vf[c] = yield* volumeFacts(namespace, c);
      const schema = t.definitionSpec['config'] as ConfigSchema | undefined;
      const sensitive = Object.entries(schema?.fields ?? {})
        .filter(([, f]) => f.sensitive === true)
        .map(([k]) => k);
      const p = preflight({
        baseline,
        target: {
          specDigest,
          packageDigest: packageDigestOf(t.definitionSpec),
          ...(dataFormatOf(t.definitionSpec) !== undefined
            ? { dataFormat: dataFormatOf(t.definitionSpec) as string }
            : {}),
          definition: definitionNameOf(spec.definitionRef) ?? '',
          config: baselineConfig(t.config, sensitive),
          volumes: t.volumes,
          objects: t.rendered.objects,
          renderDigest: targetDigestOf(t.rendered.objects, facts),
          ...(t.rendered.upgradeHook !== undefined ? { upgradeHook: t.rendered.upgradeHook.metadata.name } : {}),
        },
        volumeFacts: vf,
      });
      if (p.verdict === 'Rejected') {
        const message = p.irreversible.map((i) => i.message).join('; ');
        yield* write({
          ...status,
          upgrade: { ...p, state: 'Rejected', reason: 'Irreversible', message },
          conditions: port.conditions(
            status,
            now,
            { _tag: 'Pending', reason: 'UpgradeRejected', message: `irreversible upgrade refused: ${message}` },
            [
              {
                type: 'IrreversibleUpgrade',
                status: 'True',
                reason: p.irreversible[0]?.kind ?? 'Irreversible',
                message,
              },
            ],
            UPGRADE_CONDITIONS,
          ),
        });
        return round({ state: 'active', requeueAfterMs: 0 });
      }
      yield* write({
        ...status,
        phase: 'Upgrading',
        upgrade: { ...p, state: 'Preflighted', startedAt: isoSeconds(ctx.nowMs) },
        conditions: port.conditions(
          status,
          now,
          { _tag: 'Pending', reason: 'Upgrading', message: `upgrading to ${p.definition} (${p.renderDigest})` },
          [],
          UPGRADE_CONDITIONS,
        ),
      });
      return round({ state: 'active', requeueAfterMs: 0 });
    }

    // --- a running upgrade ---------------------------------------------------------------------------------------
    const u = upgrade as UpgradeStatus;
    if (u.state === 'RollingBack') {
      const keep = new Set([
        ...baseline.manifest.objects.map(keyOf),
        ...(baseline.manifest.installHook !== undefined ? [keyOf(baseline.manifest.installHook)] : []),
      ]);
      for (const o of baseline.manifest.objects) yield* applyDownstream(shape(o));
      const present = yield* listDownstream(namespace, app.metadata.uid ?? '');
      for (const o of present.filter((o) => !keep.has(keyOf(o)) && o.metadata.deletionTimestamp === undefined))
        yield* deleteDownstream({
          ...o,
          metadata: { ...o.metadata, name: o.metadata.name ?? '', namespace },
        } as Manifest);
      const message = `rolled back to ${baseline.definition} (${u.reason ?? 'HookFailed'}: ${u.message ?? ''})`;
      yield* write({
        ...status,
        phase: 'Ready',
        upgrade: { ...u, state: 'RolledBack', finishedAt: isoSeconds(ctx.nowMs) },
        conditions: port.conditions(
          status,
          now,
          { _tag: 'Applied', message },
          [{ type: 'UpgradeRolledBack', status: 'True', reason: u.reason ?? 'HookFailed', message }],
          UPGRADE_CONDITIONS,
        ),
      });
      yield* emitEvent(app, 'UpgradeRolledBack', message, ctx.nowMs, 'Warning');
      return round({ state: 'active', requeueAfterMs: 0 });
    }

    if (specDigest !== u.specDigest)
      return yield* rollBack('TargetChanged', 'the spec changed while the upgrade ran; the new target is tried next');
    const target = yield* targetOf(app, namespace);
    if (Either.isLeft(target)) return yield* rollBack(target.left.reason, target.left.message);
    const t = target.right;
    if (targetDigestOf(t.rendered.objects, facts) !== u.renderDigest && u.state === 'Preflighted')
      return yield* rollBack('TargetChanged', 'the target definition changed after the preflight');

    if (u.state === 'Preflighted') {
      const targetKeys = new Set(t.rendered.objects.map(keyOf));
      const applied = yield* Effect.either(
        Effect.gen(function* () {
          for (const o of t.rendered.objects) yield* applyDownstream(shape(o));
          for (const o of baseline.manifest.objects.filter((o) => !targetKeys.has(keyOf(o))))
            yield* deleteDownstream(shape(o));
        }),
      );
      if (Either.isLeft(applied)) {
        if (applied.left._tag === 'WriteRejected') return yield* Effect.fail(applied.left);
        return yield* rollBack('ApplyFailed', `${applied.left._tag}: ${applied.left.message}`.slice(0, 1000));
      }
      yield* write({ ...status, upgrade: { ...u, state: 'Applied' } });
      return round({ state: 'active', requeueAfterMs: 0 });
    }

    const hook = t.rendered.upgradeHook;
    if (u.state === 'Applied') {
      if (hook !== undefined) {
        // A Job left by an earlier upgrade with the same name is replaced (its template is immutable).
        const old = yield* getOrUndefined({ apiVersion: 'batch/v1', kind: 'Job', namespace, name: hook.metadata.name });
        const mark = (old?.metadata.annotations ?? {})['upgrades.kos.tsic.top/target'];
        if (old !== undefined && mark !== u.renderDigest.slice(7, 39)) yield* deleteDownstream(shape(hook));
        else
          yield* applyDownstream({
            ...shape(hook),
            metadata: {
              ...shape(hook).metadata,
              annotations: {
                ...((hook.metadata['annotations'] as Record<string, string> | undefined) ?? {}),
                'upgrades.kos.tsic.top/target': u.renderDigest.slice(7, 39),
              },
            },
          });
        if (old !== undefined && mark !== u.renderDigest.slice(7, 39))
          return round({ state: 'active', requeueAfterMs: 1000 });
      }
      yield* write({ ...status, upgrade: { ...u, state: 'HookRunning' } });
      return round({ state: 'active', requeueAfterMs: 0 });
    }

    // HookRunning
    const job =
      hook === undefined
        ? undefined
        : yield* getOrUndefined({ apiVersion: 'batch/v1', kind: 'Job', namespace, name: hook.metadata.name });
    const outcome = hookOutcome(hook !== undefined, job as { readonly status?: unknown } | undefined, true);
    if (outcome === 'failed')
      return yield* rollBack('HookFailed', `the upgrade hook Job ${hook?.metadata.name} failed`);
    if (outcome === 'missing')
      return yield* rollBack('HookJobMissing', `the upgrade hook Job ${hook?.metadata.name} is gone`);
    if (outcome === 'running') return round({ state: 'active', requeueAfterMs: 5000 });
    const waiting: string[] = [];
    for (const o of t.rendered.objects.filter((o) => SCALABLE_KINDS.includes(o.kind))) {
      const stored = yield* getOrUndefined({
        apiVersion: o.apiVersion,
        kind: o.kind,
        namespace,
        name: o.metadata.name,
      });
      if (stored === undefined || !storedReady(stored as never)) waiting.push(keyOf(o));
    }
    if (waiting.length > 0) return round({ state: 'active', requeueAfterMs: 5000 });
    if (hook !== undefined) yield* deleteDownstream(shape(hook));
    const next = baselineOf(app, t.definitionSpec, t.config, t.volumes, t.rendered);
    const message = `upgraded to ${next.definition} (${u.renderDigest})`;
    yield* write({
      ...status,
      phase: 'Ready',
      applied: { ...next, ...facts, installed: true },
      upgrade: { ...u, state: 'Completed', finishedAt: isoSeconds(ctx.nowMs) },
      conditions: port.conditions(
        status,
        now,
        { _tag: 'Applied', message },
        [{ type: 'UpgradeCompleted', status: 'True', reason: 'UpgradeCompleted', message }],
        UPGRADE_CONDITIONS,
      ),
    });
    yield* emitEvent(app, 'UpgradeCompleted', message, ctx.nowMs, 'Normal');
    return round({ state: 'active', requeueAfterMs: 0 });
  });

/** Best effort: a core Event on the Application (the status and its condition are the record). */
const emitEvent = (app: KubeObject, reason: string, message: string, nowMs: number, type: 'Normal' | 'Warning') =>
  Effect.flatMap(KubeClient, (c) =>
    c.create({
      apiVersion: 'v1',
      kind: 'Event',
      metadata: {
        name: `${(app.metadata.name ?? '').slice(0, 200)}.${nowMs.toString(36)}.${reason.toLowerCase()}`,
        namespace: app.metadata.namespace,
      },
      involvedObject: {
        apiVersion: app.apiVersion,
        kind: app.kind,
        name: app.metadata.name,
        namespace: app.metadata.namespace,
        uid: app.metadata.uid,
      },
      reason,
      message: message.slice(0, 1000),
      type,
      firstTimestamp: isoSeconds(nowMs),
      lastTimestamp: isoSeconds(nowMs),
      count: 1,
      source: { component: 'kos-application-reconciler' },
    } as unknown as KubeObject),
  ).pipe(Effect.ignore);

/**
 * TC-53: with a declared irreversible upgrade, an external change to the downstream (read per the baseline
 * manifest) pauses reconcile until a confirm whose target digest agrees three ways. undefined = no external change.
 */
const externalChangeRound = <S extends UpStatus>(
  app: KubeObject,
  status: S,
  baseline: Baseline,
  specDigest: string,
  facts: Facts,
  ctx: { readonly nowMs: number; readonly namespace: string; readonly port: StatusPort<S> },
) =>
  Effect.gen(function* () {
    const { namespace, port } = ctx;
    const u = status.upgrade as UpgradeStatus;
    const applied = {
      paused: baseline.paused,
      ...(baseline.replicas !== undefined ? { replicas: baseline.replicas } : {}),
      resources: baseline.resources,
    };
    const stored = new Map<string, unknown>();
    let changed = false;
    for (const o of baseline.manifest.objects) {
      const s = yield* getOrUndefined({ apiVersion: o.apiVersion, kind: o.kind, namespace, name: o.metadata.name });
      if (s !== undefined) stored.set(keyOf(o), s);
      if (differencesOf(convergeObject(o, applied), s).length > 0) changed = true;
    }
    const records = yield* confirmRecords(app.metadata.uid ?? '');
    if (!changed) {
      for (const r of records) yield* deleteRecord(r.name);
      return undefined;
    }
    // The target the current spec requests, observed object by object from the cluster.
    const target = yield* targetOf(app, namespace);
    const now = new Date(ctx.nowMs);
    let refusal = '';
    for (const r of records) {
      yield* deleteRecord(r.name);
      if (Either.isLeft(target)) {
        refusal = `confirm refused: ${target.left.message}`;
        continue;
      }
      const t = target.right;
      const seen = new Map<string, unknown>();
      for (const o of t.rendered.objects) {
        const s = yield* getOrUndefined({ apiVersion: o.apiVersion, kind: o.kind, namespace, name: o.metadata.name });
        if (s !== undefined) seen.set(keyOf(o), s);
      }
      const problems = confirmProblems(r, {
        observedDigest: observedDigestOf(t.rendered.objects, seen, facts),
        requestedDigest: targetDigestOf(t.rendered.objects, facts),
        specDigest,
      });
      if (problems.length > 0) {
        refusal = `confirm ${r.targetDigest} refused (invalid_digest: ${problems.join(', ')} disagree)`;
        continue;
      }
      // Accepted: the target becomes the baseline, reconcile resumes.
      const next = baselineOf(app, t.definitionSpec, t.config, t.volumes, t.rendered);
      const message = `external upgrade confirmed at ${r.targetDigest}`;
      yield* port.write(app, {
        ...status,
        phase: 'Ready',
        applied: { ...next, ...facts, installed: true },
        upgrade: { ...u, state: 'Completed', reason: 'Confirmed', message, finishedAt: isoSeconds(ctx.nowMs) },
        conditions: port.conditions(
          status,
          now,
          { _tag: 'Applied', message },
          [{ type: 'UpgradeCompleted', status: 'True', reason: 'Confirmed', message }],
          UPGRADE_CONDITIONS,
        ),
      });
      return { state: 'active', requeueAfterMs: 0 } as KosRound;
    }
    const message = `external change awaiting confirmation${refusal === '' ? '' : `; ${refusal}`}`;
    yield* port.write(app, {
      ...status,
      conditions: port.conditions(status, now, { _tag: 'Pending', reason: 'ExternalChangePending', message }, []),
    });
    return { state: 'steady' } as KosRound;
  });

/**
 * Drift under `adopt` / `ignore` (§5.8): the stored objects compared with the baseline manifest converged by the
 * facts KOS last wrote; the differing paths keep their external values in what is written. Under `reconcile` the
 * install path's own apply corrects (no extra read).
 */
export const driftOf = (
  app: KubeObject,
  baseline: Baseline,
  definitionSpec: Readonly<Record<string, unknown>> | undefined,
  objects: ReadonlyArray<Manifest>,
  namespace: string,
) =>
  Effect.gen(function* () {
    const policy = driftPolicyOf(app['spec']);
    if (policy === 'reconcile') return { objects, drift: undefined as undefined | ReturnType<typeof driftVerdict> };
    const applied = {
      paused: baseline.paused,
      ...(baseline.replicas !== undefined ? { replicas: baseline.replicas } : {}),
      resources: baseline.resources,
    };
    const byKey = new Map(convergeObjects(baseline.manifest.objects, applied).map((o) => [keyOf(o), o]));
    const out: Manifest[] = [];
    const diffs: DriftItem[] = [];
    for (const o of objects) {
      const was = byKey.get(keyOf(o));
      const stored = yield* getOrUndefined({
        apiVersion: o.apiVersion,
        kind: o.kind,
        namespace,
        name: o.metadata.name,
      });
      if (was === undefined || stored === undefined) {
        out.push(o);
        continue;
      }
      const paths = differencesOf(was, stored);
      for (const p of paths) diffs.push({ object: keyOf(o), path: p, value: valueAt(stored, p) });
      out.push(paths.length === 0 ? o : keepAt(o, stored, paths));
    }
    const spec = (app['spec'] ?? {}) as AppSpec;
    const driven =
      policy === 'adopt' && definitionSpec !== undefined && diffs.length > 0
        ? configDrivenPaths(
            definitionSpec,
            {
              appName: app.metadata.name ?? '',
              namespace,
              config: Either.getOrElse(
                normalizeConfig(definitionSpec['config'] as ConfigSchema | undefined, spec.config),
                () => ({}),
              ),
              volumes: baseline.volumes,
            },
            applied,
          )
        : new Map<string, string>();
    return { objects: out, drift: driftVerdict(policy, diffs, driven) };
  });

/** The Drifted condition's message: every difference, and under adopt which were refused for recording. */
export const driftMessage = (d: ReturnType<typeof driftVerdict>): string => {
  const list = (items: ReadonlyArray<DriftItem>) => items.map((i) => `${i.object} ${i.path}`).join(', ');
  const head = `external changes kept (${d.policy}): ${list(d.reported)}`;
  return (
    d.policy === 'adopt' && d.refused.length > 0
      ? `${head}; not expressible by the config schema, refused for recording: ${list(d.refused)}`
      : head
  ).slice(0, 2000);
};

// The application reconciler (seed 000 §5.3–§5.6, C-11/C-33/C-66/C-67; decision 0223). One round reads the
// Application afresh and moves it one step:
//   deleting            → Uninstalling: rendered objects deleted one by one (Volumes/PVCs are never rendered, so
//                         they stay), `status.uninstall` {startedAt, blockers, stalled after 10 min}; an `orphan`
//                         record abandons the blockers and writes the immutable app-orphan manifest; the gate opens.
//   prerequisites unmet → Pending with the reason (DefinitionMissing | NamespaceMissing | CapabilityMissing |
//                         VolumeMissing) on Reconciled and the `Installable` condition.
//   Pending (met)       → Installing (written alone: the *next* round renders).
//   Installing / Ready  → render, write every object into spec.namespace (replicas 0 while paused, resources into
//                         every container), `restart` recreates the workloads once; Ready once the stored
//                         Deployments are available, StatefulSets ready and the install Job succeeded. A write
//                         failure counts against the 5-try budget (10 s → 5 min), the 5th is Failed; `retry`
//                         resets it.
// Status is written only when it changes. Time comes from the Clock.
import { Clock, Effect, Either } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { canonicalJson } from '../../domain/adoption.js';
import { type ConfigSchema, type FieldProblem, normalizeConfig } from '../../domain/application/config.js';
import {
  afterInstallFailure,
  applyOrder,
  definitionNameOf,
  effectiveReplicas,
  isoSeconds,
  jobFailed,
  missingCapabilities,
  type PendingReason,
  type Phase,
  storedReady,
  UNINSTALL_FINALIZER,
  uninstallStatus,
  type UninstallStatus,
} from '../../domain/application/lifecycle.js';
import { type DefinitionUse, needsFreshDefinition } from '../../domain/application/read-fence.js';
import { isUnlimited, mergeResources, type ResourceSpec, withResources } from '../../domain/application/resources.js';
import { type Manifest, render, SCALABLE_KINDS } from '../../domain/application/template.js';
import { volumeClaimsOf } from '../../domain/application/volume.js';
import { markerKey } from '../../domain/markers.js';
import { type Condition, evaluateHealth, setCondition, setReconciled, workloadFactsOf } from '../../domain/state.js';
import { admit, type WriteRejected } from '../../domain/write-path.js';
import type { Baseline, Facts, UpgradeStatus } from '../../domain/upgrade/index.js';
import type { KosRound } from '../kernel.js';
import { applyDownstream, APP_FIELD_MANAGER, decorate, deleteDownstream, listDownstream } from './downstream.js';
import { type DefinitionRead, definitionOf, limitRangesOf } from './reads.js';
import { consumeRecord, pendingRecords } from './records.js';
import { AppLifecycleConfig, CapabilitySource } from './services.js';
import { baselineOf, driftMessage, driftOf, type Gate, upgradeGate } from './upgrade.js';

const API = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;

export interface AppStatus {
  readonly phase?: Phase;
  readonly health?: { readonly state?: string };
  readonly conditions?: ReadonlyArray<Condition>;
  readonly retryCount?: number;
  readonly nextRetryAt?: string;
  readonly uninstall?: UninstallStatus;
  readonly resources?: { readonly unlimited: boolean; readonly limitRange?: string };
  readonly resourceDefaults?: ResourceSpec;
  readonly applied?: {
    readonly renderDigest: string;
    readonly paused: boolean;
    readonly replicas?: number;
    readonly resources: ResourceSpec;
  } & Partial<Omit<Baseline, keyof Facts | 'renderDigest'>>;
  /** The upgrade's preflight and step (§5.7; `src/application/app-lifecycle/upgrade.ts`). */
  readonly upgrade?: UpgradeStatus;
  /** Differences recorded under the `adopt` drift policy (§5.8). */
  readonly drift?: unknown;
}

interface AppSpec {
  readonly definitionRef?: unknown;
  readonly namespace?: string;
  readonly config?: unknown;
  readonly volumes?: Readonly<Record<string, string>>;
  readonly replicas?: number;
  readonly paused?: boolean;
  readonly resources?: ResourceSpec;
}

/** The declared target namespace, defaulting to the Application's own. */
export const targetNamespaceOf = (app: KubeObject): string =>
  (app['spec'] as AppSpec | undefined)?.namespace ?? app.metadata.namespace ?? 'default';

const requiresOf = (def: KubeObject): ReadonlyArray<string> => {
  const r = (def['spec'] as { requires?: unknown } | undefined)?.requires;
  if (!Array.isArray(r)) return [];
  return r
    .map((x) => (typeof x === 'string' ? x : String((x as { name?: unknown })?.name ?? '')))
    .filter((x) => x !== '');
};

type Round = Effect.Effect<KosRound, KubeError | WriteRejected, KubeClient | CapabilitySource | AppLifecycleConfig>;

const admitOrDie = (request: Parameters<typeof admit>[0]) =>
  Either.match(admit(request), { onLeft: (e) => Effect.fail(e), onRight: () => Effect.void });

/** Write the whole status when it differs from the stored one (server-side apply on the status subresource). */
const writeStatus = (app: KubeObject, status: AppStatus) =>
  Effect.gen(function* () {
    const stored = (app['status'] ?? {}) as AppStatus;
    if (canonicalJson(stored) === canonicalJson(status)) return app;
    yield* admitOrDie({
      subject: 'application-reconciler',
      target: 'Application',
      part: 'status',
      object: { namespace: app.metadata.namespace ?? '', name: app.metadata.name ?? '' },
    });
    const client = yield* KubeClient;
    return yield* client.apply(
      {
        apiVersion: API,
        kind: 'Application',
        metadata: { name: app.metadata.name, namespace: app.metadata.namespace },
        status,
      } as unknown as KubeObject,
      { fieldManager: APP_FIELD_MANAGER, subresource: 'status', force: true },
    );
  });

const setFinalizers = (app: KubeObject, finalizers: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    yield* admitOrDie({
      subject: 'application-reconciler',
      target: 'Application',
      part: 'finalizers',
      object: { namespace: app.metadata.namespace ?? '', name: app.metadata.name ?? '' },
    });
    const client = yield* KubeClient;
    return yield* client.patch(
      { apiVersion: API, kind: 'Application', namespace: app.metadata.namespace ?? '', name: app.metadata.name ?? '' },
      {
        type: 'merge',
        patch: { metadata: { finalizers: [...finalizers], resourceVersion: app.metadata.resourceVersion } },
      },
      { fieldManager: APP_FIELD_MANAGER },
    );
  });

const conditionsWith = (
  status: AppStatus,
  now: Date,
  reconciled: Parameters<typeof setReconciled>[1],
  extra: ReadonlyArray<Omit<Condition, 'lastTransitionTime'>>,
  drop: ReadonlyArray<string> = [],
): ReadonlyArray<Condition> => {
  let list: ReadonlyArray<Condition> = (status.conditions ?? []).filter((c) => !drop.includes(c.type));
  list = setReconciled(list, reconciled, now).conditions;
  for (const c of extra) list = setCondition(list, c, now).conditions;
  return list;
};

/** One round for the Application `namespace/name`. */
export const reconcileApplication = (key: { readonly namespace?: string; readonly name: string }): Round =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const read = yield* client
      .get({ apiVersion: API, kind: 'Application', namespace: key.namespace ?? '', name: key.name })
      .pipe(
        Effect.map((o): KubeObject | undefined => o),
        Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
      );
    if (read === undefined) return { state: 'steady' } as KosRound;
    const nowMs = yield* Clock.currentTimeMillis;
    if (read.metadata.deletionTimestamp !== undefined) return yield* uninstallRound(read, nowMs);
    const finalized = (read.metadata.finalizers ?? []).includes(UNINSTALL_FINALIZER)
      ? Effect.succeed(read)
      : setFinalizers(read, [...(read.metadata.finalizers ?? []), UNINSTALL_FINALIZER]);
    return yield* installRound(read, finalized, nowMs);
  });

const pending = (app: KubeObject, status: AppStatus, now: Date, reason: PendingReason, message: string) =>
  Effect.as(
    writeStatus(app, {
      ...withoutRetry(status),
      phase: 'Pending',
      health: { state: 'Unknown' },
      conditions: conditionsWith(status, now, { _tag: 'Pending', reason, message }, [
        { type: 'Installable', status: 'False', reason, message },
      ]),
    }),
    { state: 'active' } as KosRound,
  );

const withoutRetry = (s: AppStatus): AppStatus => {
  const { retryCount: _r, nextRetryAt: _n, ...rest } = s;
  return rest;
};

/**
 * Nothing half-written (decision 0241): an install that cannot go on — its definition was deleted, or replaced by
 * one that no longer renders — before the app was ever Ready removes what earlier rounds of this install wrote (found
 * by the `owner-uid` marker; Volumes and their claims are never rendered, so they stay). A Ready app keeps running
 * objects: only an unfinished install is rolled back. Returns a note for the status message ('' when nothing was
 * there).
 */
const rollBackPartialInstall = (app: KubeObject, status: AppStatus, namespace: string) =>
  Effect.gen(function* () {
    if (status.phase !== 'Installing') return '';
    const written = yield* listDownstream(namespace, app.metadata.uid ?? '');
    for (const o of written.filter((o) => o.metadata.deletionTimestamp === undefined))
      yield* deleteDownstream({
        ...o,
        metadata: { ...o.metadata, name: o.metadata.name ?? '', namespace },
      } as Manifest);
    return written.length === 0
      ? ''
      : `; the unfinished install was rolled back (${written.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')} deleted)`;
  });

const absentAs =
  <A>(value: A) =>
  <B, E, R>(e: Effect.Effect<B, E, R>) =>
    e.pipe(
      Effect.map((o): B | A => o),
      Effect.catchIf(
        (x) => (x as { _tag?: string } | undefined)?._tag === 'NotFound',
        () => Effect.succeed(value),
      ),
    );

/** Did the last successful write apply exactly these inputs? (Then the stored objects are read to check drift;
 * otherwise each object is server-side applied at once, without reading it first.) */
const sameApplied = (applied: AppStatus['applied'], next: NonNullable<AppStatus['applied']>) =>
  applied !== undefined && canonicalJson(applied) === canonicalJson(next);

/**
 * How many of one round's requests are in flight at once (decision 0244). On the shared 2-core test bed, sending a
 * round's reads and object writes concurrently raised this process's CPU per installed app (≈ 18 → 24 ms) and did
 * not shorten the install (the API server is the bottleneck), so they go one after the other; a cluster where
 * latency dominates can raise it — the outcome does not depend on it.
 */
const ROUND_CONCURRENCY = 1;

/**
 * One install round. Its reads (the finalizer patch when the app has none yet, action records, definition, target
 * namespace) are made up front; what they decide is evaluated in the documented order (decision 0223).
 */
const installRound = (
  read: KubeObject,
  finalized: Effect.Effect<KubeObject, KubeError | WriteRejected, KubeClient>,
  nowMs: number,
): Round =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const now = new Date(nowMs);
    const spec = (read['spec'] ?? {}) as AppSpec;
    const status = (read['status'] ?? {}) as AppStatus;
    const defName = definitionNameOf(spec.definitionRef);
    const namespace = targetNamespaceOf(read);
    // A Failed app or one waiting for its next try reads only its records (nothing else decides its round).
    const prerequisitesRead =
      status.phase !== 'Failed' &&
      !(status.phase === 'Installing' && status.nextRetryAt !== undefined && Date.parse(status.nextRetryAt) > nowMs);
    const [app, records, defRead, nsExists] = yield* Effect.all(
      [
        finalized,
        pendingRecords(read.metadata.uid ?? ''),
        prerequisitesRead && defName !== undefined
          ? definitionOf(defName, 'cached')
          : Effect.succeed<DefinitionRead>({ object: undefined, fresh: true }),
        !prerequisitesRead
          ? Effect.succeed(false)
          : namespace === read.metadata.namespace
            ? Effect.succeed(true) // the Application itself is stored in it
            : client
                .get({ apiVersion: 'v1', kind: 'Namespace', name: namespace })
                .pipe(Effect.as(true), absentAs(false)),
      ] as const,
      { concurrency: ROUND_CONCURRENCY },
    );
    const retry = records.filter((r) => r.action === 'retry');
    const restart = records.filter((r) => r.action === 'restart');
    // Records that are not acceptable now are consumed without effect (the API checked them when it wrote them).
    for (const r of records.filter((r) => r.action === 'orphan')) yield* consumeRecord(r.name);

    if (status.phase === 'Failed') {
      if (retry.length === 0) {
        for (const r of restart) yield* consumeRecord(r.name);
        return { state: 'steady' } as KosRound;
      }
    } else if (retry.length > 0) for (const r of retry) yield* consumeRecord(r.name);

    if (retry.length > 0 && status.phase === 'Failed') {
      // The user's retry: a fresh budget, back to Installing (rendering happens in the next round).
      yield* writeStatus(app, {
        ...withoutRetry(status),
        phase: 'Installing',
        conditions: conditionsWith(
          status,
          now,
          { _tag: 'Pending', reason: 'RetryRequested', message: 'retry requested: the retry budget is reset' },
          [],
          ['InstallFailed'],
        ),
      });
      for (const r of retry) yield* consumeRecord(r.name);
      return { state: 'active', requeueAfterMs: 0 } as KosRound;
    }

    if (status.phase === 'Installing' && status.nextRetryAt !== undefined && Date.parse(status.nextRetryAt) > nowMs)
      return { state: 'active', requeueAfterMs: Date.parse(status.nextRetryAt) - nowMs } as KosRound;

    // --- upgrades (§5.7–§5.9): a step of a running upgrade, or the install path pinned to the baseline ---
    const gate: Gate = yield* upgradeGate(app, status, {
      retry: retry.length > 0,
      nowMs,
      namespace: targetNamespaceOf(app),
      port: { write: writeStatus, conditions: conditionsWith },
    });
    if (gate._tag === 'Round') return gate.round;

    // --- prerequisites (C-11, C-33) ---
    // A cached definition decides a write that freezes it or acts on its absence only once a fresh read agrees
    // (decision 0350); otherwise the round ends without writing and the next one (fenced) starts over.
    const confirmed = (use: DefinitionUse) =>
      Effect.gen(function* () {
        if (defRead.fresh || defName === undefined || !needsFreshDefinition(use)) return true;
        const fresh = yield* definitionOf(defName, 'fresh');
        return fresh.object?.metadata.resourceVersion === defRead.object?.metadata.resourceVersion;
      });
    const startOver = { state: 'active', requeueAfterMs: 0 } as KosRound;
    const def = defRead.object;
    if (def === undefined) {
      if (!(yield* confirmed('act-on-absence'))) return startOver;
      const removed = yield* rollBackPartialInstall(app, status, namespace);
      return yield* pending(
        app,
        status,
        now,
        'DefinitionMissing',
        `the ApplicationDefinition ${defName ?? '(spec.definitionRef is not set)'} does not exist${removed}`,
      );
    }
    if (!nsExists)
      return yield* pending(app, status, now, 'NamespaceMissing', `the declared namespace ${namespace} does not exist`);
    const available = yield* Effect.flatMap(CapabilitySource, (c) => c.available);
    const missing = missingCapabilities(requiresOf(def), available);
    if (missing.length > 0)
      return yield* pending(
        app,
        status,
        now,
        'CapabilityMissing',
        `required capabilities missing: ${missing.join(', ')}`,
      );
    const defSpec = def['spec'] as Record<string, unknown>;
    const volumes =
      gate._tag === 'Pinned' ? gate.baseline.volumes : volumeClaimsOf(app.metadata.name ?? '', spec.volumes, defSpec);
    const present = yield* Effect.forEach(
      Object.values(volumes),
      (claim) =>
        client.get({ apiVersion: API, kind: 'Volume', namespace, name: claim }).pipe(Effect.as(true), absentAs(false)),
      { concurrency: ROUND_CONCURRENCY },
    );
    const missingVolume = Object.entries(volumes).find((_, i) => !present[i]);
    if (missingVolume !== undefined)
      return yield* pending(
        app,
        status,
        now,
        'VolumeMissing',
        `volume ${missingVolume[0]} needs the Volume ${namespace}/${missingVolume[1]}`,
      );

    if (status.phase === undefined || status.phase === 'Pending') {
      if (status.resourceDefaults === undefined && !(yield* confirmed('freeze-resource-defaults'))) return startOver;
      yield* writeStatus(app, {
        ...withoutRetry(status),
        phase: 'Installing',
        health: { state: 'Unknown' },
        resourceDefaults: status.resourceDefaults ?? (defSpec['resources'] as ResourceSpec | undefined) ?? {},
        conditions: conditionsWith(
          status,
          now,
          { _tag: 'Pending', reason: 'Installing', message: 'prerequisites met; rendering in the next round' },
          [
            {
              type: 'Installable',
              status: 'True',
              reason: 'PrerequisitesMet',
              message: 'definition, namespace, capabilities and volumes are present',
            },
          ],
        ),
      });
      return { state: 'active', requeueAfterMs: 0 } as KosRound;
    }

    // --- render (pure) ---
    const fail = (reason: string, problems: ReadonlyArray<FieldProblem>) =>
      Effect.gen(function* () {
        const removed = yield* rollBackPartialInstall(app, status, namespace);
        const message = `${problems.map((p) => `${p.field}: ${p.message}`).join('; ')}${removed}`;
        return yield* Effect.as(
          writeStatus(app, {
            ...status,
            phase: 'Failed',
            conditions: conditionsWith(status, now, { _tag: 'Pending', reason, message }, [
              { type: 'InstallFailed', status: 'True', reason, message },
            ]),
          }),
          { state: 'steady' } as KosRound,
        );
      });
    const config = normalizeConfig(defSpec['config'] as ConfigSchema | undefined, spec.config);
    if (gate._tag !== 'Pinned' && Either.isLeft(config)) return yield* fail('InvalidConfig', config.left);
    const rendered =
      gate._tag === 'Pinned'
        ? Either.right(gate.rendered)
        : render(defSpec, {
            appName: app.metadata.name ?? '',
            namespace,
            config: Either.getOrElse(config, () => ({})),
            volumes,
          });
    if (Either.isLeft(rendered)) return yield* fail('InvalidPackage', rendered.left);
    const resourceDefaults = status.resourceDefaults ?? (defSpec['resources'] as ResourceSpec | undefined) ?? {};
    const resources = mergeResources(resourceDefaults, spec.resources);
    const paused = spec.paused === true;
    const shape = (o: Manifest): Manifest => {
      let out = withResources(decorate(o, app), resources);
      if (SCALABLE_KINDS.includes(o.kind)) {
        const renderedReplicas = (o['spec'] as { replicas?: number } | undefined)?.replicas;
        out = {
          ...out,
          spec: { ...(out['spec'] as object), replicas: effectiveReplicas(paused, spec.replicas, renderedReplicas) },
        };
      }
      return out;
    };
    const drift =
      gate._tag === 'Pinned'
        ? yield* driftOf(app, gate.baseline, defSpec, rendered.right.objects.map(shape), namespace)
        : { objects: rendered.right.objects.map(shape), drift: undefined };
    const objects = drift.objects;
    const hook = rendered.right.installHook !== undefined ? shape(rendered.right.installHook) : undefined;
    // what this round writes (with the upgrade baseline of §5.7: the stored one while pinned, else this render's)
    const applied: NonNullable<AppStatus['applied']> = {
      ...(gate._tag === 'Pinned'
        ? gate.baseline
        : Either.isRight(config)
          ? baselineOf(app, defSpec, config.right, volumes, rendered.right)
          : {}),
      renderDigest: rendered.right.digest,
      ...(status.applied?.installed === true ? { installed: true } : {}),
      paused,
      ...(spec.replicas !== undefined ? { replicas: spec.replicas } : {}),
      resources,
    };
    // Inputs unchanged since the last successful write: read each object and write only what drifted. Changed (or
    // never written): one server-side apply per object, no read first.
    const mode = sameApplied(status.applied, applied) ? 'compare' : 'apply';

    // --- write (restart: delete the workloads and recreate them once, in this round) ---
    const write = Effect.gen(function* () {
      if (restart.length > 0 && status.phase === 'Ready')
        for (const o of objects.filter((o) => SCALABLE_KINDS.includes(o.kind))) yield* deleteDownstream(o);
      // configuration before the workloads that mount it; the first refused write ends the round
      const stored = (yield* Effect.forEach(applyOrder(objects), (o) => applyDownstream(o, mode), {
        concurrency: ROUND_CONCURRENCY,
      })).map((r) => r.stored);
      let hookStored: KubeObject | undefined;
      if (hook !== undefined && status.phase === 'Installing') {
        hookStored = (yield* applyDownstream(hook, mode)).stored;
        if (jobFailed(hookStored as { status?: unknown })) {
          yield* deleteDownstream(hook);
          return yield* Effect.fail({
            _tag: 'HookFailed' as const,
            message: `the install hook Job ${hook.metadata.name} failed`,
          });
        }
      }
      return { stored, hookStored };
    });
    const outcome = yield* write.pipe(Effect.either);
    for (const r of restart) yield* consumeRecord(r.name);
    if (Either.isLeft(outcome)) {
      const e = outcome.left;
      if ((e as { _tag: string })._tag === 'WriteRejected') return yield* Effect.fail(e as WriteRejected);
      const message = `${(e as { _tag: string })._tag}: ${(e as { message?: string }).message ?? ''}`.slice(0, 1000);
      const next = afterInstallFailure(status.retryCount ?? 0, nowMs);
      if (next._tag === 'Failed') {
        yield* writeStatus(app, {
          ...withoutRetry(status),
          phase: 'Failed',
          retryCount: next.retryCount,
          conditions: conditionsWith(status, now, { _tag: 'Pending', reason: 'RetryBudgetExhausted', message }, [
            {
              type: 'InstallFailed',
              status: 'True',
              reason: 'RetryBudgetExhausted',
              message: `${next.retryCount} tries failed; last: ${message}`,
            },
          ]),
        });
        return { state: 'steady' } as KosRound;
      }
      yield* writeStatus(app, {
        ...status,
        retryCount: next.retryCount,
        nextRetryAt: next.nextRetryAt,
        conditions: conditionsWith(status, now, { _tag: 'Pending', reason: 'RetryScheduled', message }, []),
      });
      return { state: 'active', requeueAfterMs: Date.parse(next.nextRetryAt) - nowMs } as KosRound;
    }
    const { stored, hookStored } = outcome.right;

    // --- observe (stored objects only) ---
    const waiting = [...stored, ...(hookStored ? [hookStored] : [])]
      .filter((o) => !storedReady(o as never))
      .map((o) => `${o.kind}/${o.metadata.name}`);
    const installed = status.phase === 'Ready' || waiting.length === 0;
    const health = evaluateHealth({
      observed: true,
      paused,
      workloads: stored.filter((o) => SCALABLE_KINDS.includes(o.kind)).map((o) => workloadFactsOf(o as never)),
      dependencies: [],
      volumes: Object.values(volumes).map((name) => ({ name, required: true, present: true })),
      drifted: drift.drift?.drifted === true,
      capabilityShortfalls: [],
    });
    const unlimited = isUnlimited(resources);
    // The LimitRange that applies instead is named only for an unlimited app: the others need no list.
    const limitRange = unlimited
      ? (yield* limitRangesOf(namespace)).map((l) => l.metadata.name ?? '').sort()[0]
      : undefined;
    const { drift: _drift, ...withoutDrift } = status;
    const next: AppStatus = {
      ...withoutRetry(withoutDrift),
      phase: installed ? 'Ready' : 'Installing',
      health: { state: health.state },
      resourceDefaults,
      resources: { unlimited, ...(unlimited && limitRange !== undefined ? { limitRange } : {}) },
      ...(drift.drift?.policy === 'adopt' && drift.drift.drifted
        ? { drift: { recorded: drift.drift.recorded, refused: drift.drift.refused } }
        : {}),
      applied: { ...applied, ...(installed ? { installed: true } : {}) },
      conditions: conditionsWith(
        status,
        now,
        waiting.length === 0
          ? { _tag: 'Applied', message: 'every rendered object is written and observed' }
          : { _tag: 'Pending', reason: 'WaitingForWorkloads', message: `waiting for ${waiting.join(', ')}` },
        [
          paused
            ? {
                type: 'Ready',
                status: 'False',
                reason: 'Paused',
                message: 'stopped: scalable workloads are at 0 replicas',
              }
            : waiting.length === 0
              ? { type: 'Ready', status: 'True', reason: 'WorkloadsReady', message: 'all workloads are available' }
              : {
                  type: 'Ready',
                  status: 'False',
                  reason: 'WaitingForWorkloads',
                  message: `waiting for ${waiting.join(', ')}`,
                },
          ...(drift.drift?.drifted === true
            ? [
                {
                  type: 'Drifted',
                  status: 'True' as const,
                  reason: drift.drift.policy === 'adopt' ? 'DriftRecorded' : 'DriftReported',
                  message: driftMessage(drift.drift),
                },
              ]
            : []),
        ],
        ['InstallFailed', ...(drift.drift?.drifted === true ? [] : ['Drifted'])],
      ),
    };
    // Pinning the baseline (the first `installed`) freezes this render: only with a definition a fresh read agrees on.
    if (
      gate._tag !== 'Pinned' &&
      installed &&
      status.applied?.installed !== true &&
      !(yield* confirmed('pin-baseline'))
    )
      return startOver;
    yield* writeStatus(app, next);
    return { state: next.phase === 'Ready' && waiting.length === 0 ? 'steady' : 'active' } as KosRound;
  });

const uninstallRound = (app: KubeObject, nowMs: number): Round =>
  Effect.gen(function* () {
    if (!(app.metadata.finalizers ?? []).includes(UNINSTALL_FINALIZER)) return { state: 'steady' } as KosRound;
    const client = yield* KubeClient;
    const { systemNamespace } = yield* AppLifecycleConfig;
    const status = (app['status'] ?? {}) as AppStatus;
    const namespace = targetNamespaceOf(app);
    const uid = app.metadata.uid ?? '';
    const open = () =>
      setFinalizers(
        app,
        (app.metadata.finalizers ?? []).filter((f) => f !== UNINSTALL_FINALIZER),
      ).pipe(
        Effect.as({ state: 'steady' } as KosRound),
        Effect.catchTag('NotFound', () => Effect.succeed({ state: 'steady' } as KosRound)),
      );
    const records = yield* pendingRecords(uid);
    const orphan = records.find((r) => r.action === 'orphan');
    for (const r of records.filter((r) => r !== orphan)) yield* consumeRecord(r.name);
    const present = yield* listDownstream(namespace, uid);
    const blockersOf = (objects: ReadonlyArray<KubeObject>) => objects.map((o) => `${o.kind}/${o.metadata.name}`);

    if (orphan !== undefined) {
      const u = status.uninstall;
      const allowed =
        status.phase === 'Uninstalling' &&
        u !== undefined &&
        u.blockers.length > 0 &&
        nowMs - Date.parse(u.startedAt) >= 10 * 60_000;
      if (allowed) {
        // Abandon: the immutable app-orphan manifest first, then drop owner references (so the garbage collector
        // leaves the objects alone), then open the gate.
        const manifestName = `app-orphan-${(app.metadata.namespace ?? '').slice(0, 60)}-${(app.metadata.name ?? '').slice(0, 100)}-${uid.slice(0, 8)}`;
        yield* admitOrDie({
          subject: 'application-reconciler',
          target: 'OrphanManifest',
          part: 'create',
          object: { namespace: systemNamespace, name: manifestName },
        });
        yield* client
          .create({
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: {
              name: manifestName,
              namespace: systemNamespace,
              labels: { 'orphans.kos.tsic.top/app-uid': uid, 'orphans.kos.tsic.top/app-name': app.metadata.name ?? '' },
            },
            immutable: true,
            data: {
              'manifest.json': canonicalJson({
                application: {
                  apiVersion: API,
                  kind: 'Application',
                  namespace: app.metadata.namespace,
                  name: app.metadata.name,
                  uid,
                },
                namespace,
                abandonedAt: isoSeconds(nowMs),
                requestedBy: orphan.requestedBy,
                uninstallStartedAt: u.startedAt,
                objects: present.map((o) => ({
                  apiVersion: o.apiVersion,
                  kind: o.kind,
                  name: o.metadata.name,
                  uid: o.metadata.uid,
                })),
              }),
            },
          } as KubeObject)
          .pipe(Effect.catchTag('AlreadyExists', () => Effect.void));
        for (const o of present)
          if ((o.metadata.ownerReferences ?? []).length > 0)
            yield* client
              .patch(
                { apiVersion: o.apiVersion, kind: o.kind, namespace, name: o.metadata.name ?? '' },
                { type: 'json', patch: [{ op: 'remove', path: '/metadata/ownerReferences' }] },
                { fieldManager: APP_FIELD_MANAGER },
              )
              .pipe(Effect.catchTag('NotFound', () => Effect.void));
        yield* consumeRecord(orphan.name);
        return yield* open();
      }
      yield* consumeRecord(orphan.name);
    }

    // Delete what is left, one by one (already-deleting objects are waiting for their own finalizers).
    for (const o of present.filter((o) => o.metadata.deletionTimestamp === undefined))
      yield* deleteDownstream({
        ...o,
        metadata: { ...o.metadata, name: o.metadata.name ?? '', namespace },
      } as Manifest);
    const remaining = yield* listDownstream(namespace, uid);
    if (remaining.length === 0) return yield* open();
    const uninstall = uninstallStatus(status.uninstall?.startedAt ?? isoSeconds(nowMs), nowMs, blockersOf(remaining));
    const message = `waiting for ${uninstall.blockers.join(', ')} to be deleted${uninstall.stalled ? ' (stalled: orphan is now accepted)' : ''}`;
    yield* writeStatus(app, {
      ...withoutRetry(status),
      phase: 'Uninstalling',
      uninstall,
      conditions: conditionsWith(
        status,
        new Date(nowMs),
        { _tag: 'Pending', reason: uninstall.stalled ? 'UninstallStalled' : 'UninstallBlocked', message },
        [],
      ),
    });
    return { state: 'active' } as KosRound;
  });

/** Who owns the rendered objects: a marker selector the tests and the orphan manifest use. */
export const renderedBy = (uid: string) => `${markerKey('owner-uid')}=${uid}`;

// The two controllers of the Database module (seed: controller/binding_setup.go, instance_setup.go) on
// `@homelab/kube`'s informer / work queue / reconcile loop. Watches only enqueue keys (the pure mapping functions of
// `application/mapping.ts`); every round re-reads through the API (the use-case drivers). A Database event at a
// version this process wrote itself does not wake its bound Tenant again (decision 0380). Requeue: the drivers' own
// answer (30 s recheck, 1 ms retry-soon, none for a missing object); failures go back rate-limited.
//
// The admin-Secret watch is metadata-only and limited to the Secret namespace (seed: `WatchesMetadata(&Secret{})`
// with the cache's `ByObject` namespace): the server sends PartialObjectMetadata, so no Secret `data` ever enters
// this process through the watch — the credentials are read only by the observer, directly from the API (AY-43).
//
// `@homelab/kube` gap worked around here:
// - `WatchSource.toKeys` is synchronous while informer caches are read through Effects: the cached Tenants and
//   Databases are mirrored into plain Maps by handlers, and `toKeys` reads the mirrors.
import { Cause, type Duration, Effect, Option, type Scope } from 'effect';
import {
  type ControllerMetrics,
  type InformerEvent,
  KubeClient,
  type KubeObject,
  makeInformer,
  makeMetadataInformer,
  startController,
} from '@homelab/kube';
import { reconcileBinding } from '../application/binding.js';
import { reconcileInstance } from '../application/instance.js';
import {
  instancesForSecret,
  instancesWokenByReference,
  type TenantFacts,
  tenantsForInstance,
  tenantsWokenByDatabase,
} from '../application/mapping.js';
import type { BindingResources, InstanceObserver, InstanceResources } from '../application/ports.js';
import { ControllerNames, DatabaseSource, RotateAnnotation, SetupMessage } from '../domain/vocabulary.js';
import { apiVersion, Kinds } from '../adapter/kubernetes/resources.js';
import { snapshotsFor } from '../adapter/kubernetes/snapshots.js';

export interface DatabaseControllersOptions {
  /** The namespace of the Instances' admin Secrets; empty disables only the Instance controller (AY-53). */
  readonly secretNamespace: string;
  /** Workers per controller. Default 1. */
  readonly concurrency?: number;
  /** Restrict the informers (tests share one API server); production watches everything. */
  readonly labelSelector?: string;
  /**
   * The Tenant round with provisioning on (issue 21: `reconcileTenant` with its ports provided). Absent: the seed
   * slice's `reconcileBinding` (Bound ≠ Ready, DeletionPending).
   */
  readonly tenantReconcile?: (
    namespace: string,
    name: string,
  ) => Effect.Effect<{ readonly requeueAfter: Option.Option<Duration.Duration> }, unknown>;
  /**
   * The Database round with provisioning on (issue 21, decision 0311: `reconcileImport` with its ports provided): a
   * third controller, `database-import`, keyed by Database, also woken by its Instance. Absent: not started.
   */
  readonly databaseReconcile?: (
    name: string,
  ) => Effect.Effect<{ readonly requeueAfter: Option.Option<Duration.Duration> }, unknown>;
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

const rec = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : {};
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

const tenantFacts = (o: KubeObject): TenantFacts => {
  const spec = rec(o['spec']);
  const provision = spec['provision'] === undefined ? undefined : rec(spec['provision']);
  return {
    namespace: str(o.metadata.namespace),
    name: str(o.metadata.name),
    uid: str(o.metadata.uid),
    provisionInstance: provision ? str(rec(provision['instanceRef'])['name']) : undefined,
    existingDatabase: spec['databaseRef'] === undefined ? undefined : str(rec(spec['databaseRef'])['name']),
  };
};

/** Skip our own status-only writes: an Updated event with the same generation and deletion state. */
const specOrDeletionChanged = (e: InformerEvent<KubeObject>): boolean =>
  e.type !== 'Updated' ||
  e.old.metadata.generation !== e.object.metadata.generation ||
  e.old.metadata.deletionTimestamp !== e.object.metadata.deletionTimestamp;

/** The Tenant's rotate annotation changed (metadata only, no new generation): a rotation request (decision 0233). */
const rotationRequested = (e: InformerEvent<KubeObject>): boolean =>
  e.type === 'Updated' &&
  e.old.metadata.annotations?.[RotateAnnotation] !== e.object.metadata.annotations?.[RotateAnnotation];

const requeue = (after: Option.Option<Duration.Duration>) =>
  Option.match(after, { onNone: () => undefined, onSome: (d) => ({ requeueAfter: d }) });

/**
 * A failed round, logged without secrets: the error's tag and its fixed code/message (ports carry no server bodies,
 * driver messages or credentials); defects and interruptions only by kind.
 */
const logFailure =
  (controller: string) =>
  (key: string, cause: Cause.Cause<unknown>): Effect.Effect<void> => {
    const failure = Cause.failureOption(cause);
    const what = Option.match(failure, {
      onNone: () => (Cause.isInterruptedOnly(cause) ? 'interrupted' : 'defect'),
      onSome: (e) => {
        const r = rec(e);
        return [str(r['_tag']), str(r['code']), str(r['message'])].filter((x) => x !== '').join(' ');
      },
    });
    return Effect.logWarning(`${controller} ${key}: round failed: ${what}`);
  };

export class ControllerSetupError extends Error {
  readonly _tag = 'ControllerSetupError';
}

/**
 * Start the binding controller and (with a valid Secret namespace) the Instance controller in the current scope.
 * Closing the scope stops informers and workers; pools belong to the `InstanceObserver` layer, which is built
 * outside this scope and therefore released after the workers stopped (AY-82).
 */
export const startDatabaseControllers = (
  options: DatabaseControllersOptions,
): Effect.Effect<
  { readonly instanceController: boolean },
  ControllerSetupError,
  KubeClient | ControllerMetrics | Scope.Scope | BindingResources | InstanceResources | InstanceObserver
> =>
  Effect.gen(function* () {
    const instanceEnabled = options.secretNamespace !== '';
    if (instanceEnabled && !DNS1123_LABEL.test(options.secretNamespace)) {
      return yield* Effect.fail(new ControllerSetupError(SetupMessage.instanceObserverRequired));
    }
    const informerOptions = options.labelSelector === undefined ? {} : { labelSelector: options.labelSelector };
    const tenants = yield* makeInformer({ apiVersion, kind: Kinds.tenant }, informerOptions);
    const databases = yield* makeInformer({ apiVersion, kind: Kinds.database }, informerOptions);
    const instances = yield* makeInformer({ apiVersion, kind: Kinds.instance }, informerOptions);

    // Synchronous mirrors of the caches for the key mappings.
    const tenantMirror = new Map<string, TenantFacts>();
    const databaseInstance = new Map<string, string>();
    const instanceSecret = new Map<string, string>();
    const instanceDeleting = new Set<string>();
    yield* tenants.addHandler((e) =>
      Effect.sync(() => {
        const key = `${str(e.object.metadata.namespace)}/${str(e.object.metadata.name)}`;
        if (e.type === 'Deleted') tenantMirror.delete(key);
        else tenantMirror.set(key, tenantFacts(e.object));
      }),
    );
    yield* databases.addHandler((e) =>
      Effect.sync(() => {
        const name = str(e.object.metadata.name);
        if (e.type === 'Deleted') databaseInstance.delete(name);
        else databaseInstance.set(name, str(rec(rec(e.object['spec'])['instanceRef'])['name']));
      }),
    );
    yield* instances.addHandler((e) =>
      Effect.sync(() => {
        const name = str(e.object.metadata.name);
        if (e.type === 'Deleted') instanceSecret.delete(name);
        else instanceSecret.set(name, str(rec(rec(e.object['spec'])['adminCredentialRef'])['name']));
        if (e.type !== 'Deleted' && e.object.metadata.deletionTimestamp !== undefined) instanceDeleting.add(name);
        else instanceDeleting.delete(name);
      }),
    );
    const tenantKeys = (keys: ReadonlyArray<{ namespace: string; name: string }>) =>
      keys.map((k) => `${k.namespace}/${k.name}`);
    // A provisioned Database's event at a resourceVersion this process's own write produced does not wake the Tenant
    // it is bound to: only that Tenant's round writes such a Database, and it went on from exactly that state
    // (decision 0380). Every other Tenant naming the Database is still woken, the bound Tenant for any change made by
    // someone else, and an imported Database's Tenant always (the import controller writes those).
    const snapshots = snapshotsFor(yield* KubeClient);
    const databaseTenantKeys = (d: KubeObject) => {
      const spec = rec(d['spec']);
      const bound = rec(spec['tenantRef']);
      return tenantKeys(
        tenantsWokenByDatabase(
          {
            name: str(d.metadata.name),
            provisioned: str(spec['source']) === DatabaseSource.Provision,
            tenantRef:
              bound['name'] === undefined
                ? undefined
                : { namespace: str(bound['namespace']), name: str(bound['name']) },
            ownWrite: snapshots.ownWrite(Kinds.database, d),
          },
          [...tenantMirror.values()],
        ),
      );
    };

    yield* startController({
      name: ControllerNames.binding,
      informer: tenants,
      predicate: (e) => specOrDeletionChanged(e) || rotationRequested(e),
      concurrency: options.concurrency ?? 1,
      watches: [
        {
          informer: databases,
          toKeys: databaseTenantKeys,
        },
        {
          informer: instances,
          toKeys: (i) =>
            tenantKeys(
              tenantsForInstance(str(i.metadata.name), [...tenantMirror.values()], (db) => databaseInstance.get(db)),
            ),
        },
      ],
      onError: logFailure(ControllerNames.binding),
      reconcile: (request) =>
        options.tenantReconcile !== undefined
          ? options
              .tenantReconcile(request.namespace ?? '', request.name)
              .pipe(Effect.map(({ requeueAfter }) => requeue(requeueAfter)))
          : reconcileBinding(request.namespace ?? '', request.name).pipe(
              Effect.tap(({ result }) =>
                Effect.logDebug(
                  `${ControllerNames.binding} ${request.key}: ${result.status ? `${result.status.phase || '-'} ${result.status.reason}` : result.retrySoon ? 'retry soon' : 'nothing to present'}`,
                ),
              ),
              Effect.map(({ requeueAfter }) => requeue(requeueAfter)),
            ),
    });

    const databaseReconcile = options.databaseReconcile;
    if (databaseReconcile !== undefined) {
      yield* startController({
        name: ControllerNames.import,
        informer: databases,
        predicate: specOrDeletionChanged,
        concurrency: options.concurrency ?? 1,
        watches: [
          {
            informer: instances,
            toKeys: (i) =>
              [...databaseInstance.entries()]
                .filter(([, instance]) => instance === str(i.metadata.name))
                .map(([database]) => database),
          },
        ],
        onError: logFailure(ControllerNames.import),
        reconcile: (request) =>
          databaseReconcile(request.name).pipe(Effect.map(({ requeueAfter }) => requeue(requeueAfter))),
      });
    }

    if (!instanceEnabled) return { instanceController: false };
    const secrets = yield* makeMetadataInformer({
      apiVersion: 'v1',
      kind: 'Secret',
      namespace: options.secretNamespace,
    });
    yield* startController({
      name: ControllerNames.instance,
      informer: instances,
      predicate: specOrDeletionChanged,
      concurrency: options.concurrency ?? 1,
      watches: [
        {
          informer: secrets,
          toKeys: (s) =>
            instancesForSecret(
              { namespace: str(s.metadata.namespace), name: str(s.metadata.name) },
              options.secretNamespace,
              [...instanceSecret.entries()].map(([name, adminSecret]) => ({ name, adminSecret })),
            ),
        },
        // References matter only to a deleting Instance (InstanceInUse until none is left): a Tenant or Database
        // event wakes its Instance only while that Instance is being deleted (decision 0380). The deletion itself
        // wakes the Instance (predicate), and that round lists the references from the API.
        {
          informer: databases,
          toKeys: (d) =>
            instancesWokenByReference(
              { kind: 'Database', instanceRef: str(rec(rec(d['spec'])['instanceRef'])['name']) },
              instanceDeleting,
            ),
        },
        {
          informer: tenants,
          toKeys: (t) =>
            instancesWokenByReference(
              { kind: 'Tenant', provisionInstance: tenantFacts(t).provisionInstance },
              instanceDeleting,
            ),
        },
      ],
      onError: logFailure(ControllerNames.instance),
      reconcile: (request) =>
        reconcileInstance(request.name).pipe(
          Effect.tap(({ result }) =>
            Effect.logDebug(
              `${ControllerNames.instance} ${request.key}: ${result._tag === 'Outcome' ? `${result.outcome.presentation.phase} ${result.outcome.presentation.reason}` : 'gone'}`,
            ),
          ),
          Effect.map(({ requeueAfter }) => requeue(requeueAfter)),
        ),
    });
    return { instanceController: true };
  });

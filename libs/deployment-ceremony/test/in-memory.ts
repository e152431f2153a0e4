/**
 * In-memory stand-ins for the ceremony's ports.
 *
 * They stand in ONLY for unit tests of the ordering logic of the application layer (what is read, checked, written
 * and in which order, and what a crash at any step leaves behind). They model the few Kubernetes behaviours that
 * logic depends on (UID/resourceVersion preconditions, 404/409 answers, finalizers holding an object in
 * terminating, resourceVersion CAS on the Head) in the simplest way, and back NO claim about Kubernetes itself:
 * the real adapter is tested against the real kube-apiserver of the test bed.
 */
import { type Context, Data, Effect, Layer, Option } from 'effect';
import { FIELD_MANAGER, type HeadRef } from '../src/api/identity.js';
import type { DeleteOptions } from '../src/api/retirement.js';
import type { ApiResource } from '../src/domain/discovery.js';
import type { FileStat } from '../src/domain/guards.js';
import type { LiveObject } from '../src/domain/target-checks.js';
import {
  DeleteRefused,
  HeadWriteConflict,
  KubernetesCluster,
  OperatorHost,
  ReceiptExists,
  ReceiptStore,
  type ResourceRef,
  type StoredHead,
} from '../src/application/ports.js';

/** The defect a simulated process crash raises (the in-flight request may or may not have taken effect). */
export class SimulatedCrash extends Data.TaggedError('SimulatedCrash')<{
  readonly step: number;
  readonly when: 'before' | 'after';
}> {}

/**
 * InMemoryFaultPlan (unit tests of the ordering logic only; backs no claim about Kubernetes): numbers every port
 * call (cluster and receipt store) from 1 and crashes the "process" at one
 * chosen call — before it takes effect, or after it took effect with its response lost.
 */
export class InMemoryFaultPlan {
  step = 0;
  crashAt: { readonly step: number; readonly when: 'before' | 'after' } | undefined = undefined;
  /** Another actor's action run just before the port call with this number (a concurrent writer). */
  interleave: { readonly step: number; readonly action: () => void } | undefined = undefined;

  /** Wrap one port call. */
  around<A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> {
    return Effect.suspend(() => {
      this.step += 1;
      const step = this.step;
      const other = this.interleave;
      if (other !== undefined && other.step === step) {
        this.interleave = undefined;
        other.action();
      }
      const crash = this.crashAt;
      if (crash !== undefined && crash.step === step) {
        this.crashAt = undefined;
        if (crash.when === 'before') return Effect.die(new SimulatedCrash({ step, when: 'before' }));
        return Effect.flatMap(Effect.exit(effect), () => Effect.die(new SimulatedCrash({ step, when: 'after' })));
      }
      return effect;
    });
  }
}

interface StoredObject {
  uid: string;
  resourceVersion: string;
  body: Record<string, unknown>;
  finalizers: Array<string>;
  deletionTimestamp?: string;
  managedFields: LiveObject['managedFields'];
}

export interface RecordedRequest {
  readonly op:
    | 'get'
    | 'discover'
    | 'delete'
    | 'apply'
    | 'readHead'
    | 'createHead'
    | 'replaceHead'
    | 'clusterUid'
    | 'headNamespaceExists'
    | 'createHeadNamespace';
  readonly ref?: ResourceRef | HeadRef;
  readonly options?: DeleteOptions;
}

const objectKey = (ref: ResourceRef) => `${ref.group}/${ref.plural}/${ref.namespace ?? ''}/${ref.name}`;
const headKey = (ref: HeadRef) => `${ref.namespace}/${ref.name}`;

const fieldsV1Of = (body: unknown): unknown => {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return {};
  return Object.fromEntries(
    Object.entries(body)
      .filter(([k]) => k !== 'apiVersion' && k !== 'kind')
      .map(([k, v]) => [`f:${k}`, fieldsV1Of(v)]),
  );
};

export const DEFAULT_DISCOVERY: Readonly<Record<string, ReadonlyArray<ApiResource>>> = {
  '/v1': [
    { name: 'configmaps', kind: 'ConfigMap', namespaced: true },
    { name: 'secrets', kind: 'Secret', namespaced: true },
    { name: 'serviceaccounts', kind: 'ServiceAccount', namespaced: true },
    { name: 'persistentvolumeclaims', kind: 'PersistentVolumeClaim', namespaced: true },
    { name: 'services', kind: 'Service', namespaced: true },
    { name: 'namespaces', kind: 'Namespace', namespaced: false },
    { name: 'pods', kind: 'Pod', namespaced: true },
    { name: 'pods/log', kind: 'Pod', namespaced: true },
  ],
  'apps/v1': [
    { name: 'deployments', kind: 'Deployment', namespaced: true },
    { name: 'deployments/scale', kind: 'Scale', namespaced: true },
  ],
  'rbac.authorization.k8s.io/v1': [{ name: 'clusterroles', kind: 'ClusterRole', namespaced: false }],
};

/**
 * InMemoryCluster: an in-memory KubernetesCluster. It stands in only for unit tests of the ordering logic of the
 * application layer and backs no claim about Kubernetes. One global resourceVersion counter, UIDs `uid-<n>`,
 * every request recorded.
 */
export class InMemoryCluster {
  readonly objects = new Map<string, StoredObject>();
  readonly heads = new Map<string, StoredHead>();
  readonly requests: Array<RecordedRequest> = [];
  /** UIDs whose object was actually removed, in order (a finalizer delays the removal). */
  readonly removedUids: Array<string> = [];
  /** Successful Head writes, in order. */
  readonly headWrites: Array<{ readonly op: 'create' | 'replace'; readonly resourceVersion: string }> = [];
  discovery: Record<string, ReadonlyArray<ApiResource>> = { ...DEFAULT_DISCOVERY };
  kubeSystemUid = 'cluster-uid-1';
  /** Namespaces that do not exist (every other namespace does). */
  readonly missingNamespaces = new Set<string>();
  private rv = 100;
  private uidCounter = 0;

  readonly faults: InMemoryFaultPlan;
  constructor(faults: InMemoryFaultPlan = new InMemoryFaultPlan()) {
    this.faults = faults;
  }

  nextRv(): string {
    this.rv += 1;
    return String(this.rv);
  }

  private live(o: StoredObject): LiveObject {
    const metadata = {
      ...(o.body['metadata'] as Record<string, unknown>),
      uid: o.uid,
      resourceVersion: o.resourceVersion,
      ...(o.deletionTimestamp === undefined ? {} : { deletionTimestamp: o.deletionTimestamp }),
      ...(o.finalizers.length === 0 ? {} : { finalizers: [...o.finalizers] }),
      managedFields: o.managedFields,
    };
    return {
      uid: o.uid,
      resourceVersion: o.resourceVersion,
      ...(o.deletionTimestamp === undefined ? {} : { deletionTimestamp: o.deletionTimestamp }),
      finalizers: [...o.finalizers],
      managedFields: o.managedFields,
      body: { ...o.body, metadata },
    };
  }

  // --- what other actors do between runs (test helpers, not port operations) ---

  /** Create or replace an object as a server-side apply by `manager` would. */
  put(ref: ResourceRef, body: Record<string, unknown>, manager = FIELD_MANAGER): StoredObject {
    const key = objectKey(ref);
    const existing = this.objects.get(key);
    const stored: StoredObject = {
      uid: existing?.uid ?? `uid-${++this.uidCounter}`,
      resourceVersion: this.nextRv(),
      body: structuredClone(body),
      finalizers: existing?.finalizers ?? [],
      managedFields: [
        {
          manager,
          operation: 'Apply',
          apiVersion: String(body['apiVersion']),
          fieldsType: 'FieldsV1',
          fieldsV1: fieldsV1Of(body),
        },
      ],
    };
    this.objects.set(key, stored);
    return stored;
  }
  /** Delete and re-create under the same name: a new UID. */
  replace(ref: ResourceRef): void {
    const o = this.objects.get(objectKey(ref))!;
    this.objects.delete(objectKey(ref));
    this.put(ref, o.body);
  }
  /** Another writer changes the object (new resourceVersion, and optionally a field). */
  touch(ref: ResourceRef, mutate: (body: Record<string, unknown>) => void = () => undefined, manager?: string): void {
    const o = this.objects.get(objectKey(ref))!;
    mutate(o.body);
    o.resourceVersion = this.nextRv();
    if (manager !== undefined) o.managedFields = [{ manager, operation: 'Update', fieldsV1: fieldsV1Of(o.body) }];
  }
  addFinalizer(ref: ResourceRef, finalizer: string): void {
    const o = this.objects.get(objectKey(ref))!;
    o.finalizers.push(finalizer);
    o.resourceVersion = this.nextRv();
  }
  /** A controller releases the finalizers; a terminating object then disappears. */
  releaseFinalizers(ref: ResourceRef): void {
    const key = objectKey(ref);
    const o = this.objects.get(key)!;
    o.finalizers = [];
    if (o.deletionTimestamp !== undefined) {
      this.objects.delete(key);
      this.removedUids.push(o.uid);
    } else {
      o.resourceVersion = this.nextRv();
    }
  }
  stored(ref: ResourceRef): StoredObject | undefined {
    return this.objects.get(objectKey(ref));
  }
  /** Another writer changes the Head (bumps its resourceVersion). */
  touchHead(ref: HeadRef): void {
    const h = this.heads.get(headKey(ref))!;
    this.heads.set(headKey(ref), { ...h, resourceVersion: this.nextRv() });
  }

  // --- the port ---

  private record(r: RecordedRequest) {
    this.requests.push(r);
  }

  get service(): Context.Tag.Service<typeof KubernetesCluster> {
    return {
      clusterUid: this.faults.around(
        Effect.sync(() => {
          this.record({ op: 'clusterUid' });
          return this.kubeSystemUid;
        }),
      ),
      discover: (group, version) =>
        this.faults.around(
          Effect.sync(() => {
            this.record({ op: 'discover' });
            return this.discovery[`${group}/${version}`] ?? [];
          }),
        ),
      get: (ref) =>
        this.faults.around(
          Effect.sync(() => {
            this.record({ op: 'get', ref });
            const o = this.objects.get(objectKey(ref));
            return o === undefined ? Option.none() : Option.some(this.live(o));
          }),
        ),
      delete: (ref, options) =>
        this.faults.around(
          Effect.suspend(() => {
            this.record({ op: 'delete', ref, options });
            const key = objectKey(ref);
            const o = this.objects.get(key);
            if (o === undefined)
              return Effect.fail(new DeleteRefused({ status: 404, reason: 'NotFound', message: 'not found' }));
            if (o.uid !== options.preconditions.uid) {
              return Effect.fail(
                new DeleteRefused({
                  status: 409,
                  reason: 'Conflict',
                  message: `Precondition failed: UID in precondition: ${options.preconditions.uid}, UID in object meta: ${o.uid}`,
                }),
              );
            }
            if (o.resourceVersion !== options.preconditions.resourceVersion) {
              return Effect.fail(
                new DeleteRefused({ status: 409, reason: 'Conflict', message: 'Precondition failed: ResourceVersion' }),
              );
            }
            if (options.dryRun !== undefined) return Effect.void;
            if (o.finalizers.length > 0) {
              if (o.deletionTimestamp === undefined) {
                o.deletionTimestamp = '2026-01-01T00:00:00Z';
                o.resourceVersion = this.nextRv();
              }
              return Effect.void;
            }
            this.objects.delete(key);
            this.removedUids.push(o.uid);
            return Effect.void;
          }),
        ),
      apply: (ref, body) =>
        this.faults.around(
          Effect.sync(() => {
            this.record({ op: 'apply', ref });
            return this.live(this.put(ref, body as Record<string, unknown>));
          }),
        ),
      headNamespaceExists: (ref) =>
        this.faults.around(
          Effect.sync(() => {
            this.record({ op: 'headNamespaceExists', ref });
            return !this.missingNamespaces.has(ref.namespace);
          }),
        ),
      createHeadNamespace: (ref) =>
        this.faults.around(
          Effect.sync(() => {
            this.record({ op: 'createHeadNamespace', ref });
            this.missingNamespaces.delete(ref.namespace);
          }),
        ),
      readHead: (ref) =>
        this.faults.around(
          Effect.sync(() => {
            this.record({ op: 'readHead', ref });
            return Option.fromNullable(this.heads.get(headKey(ref)));
          }),
        ),
      createHead: (ref, data) =>
        this.faults.around(
          Effect.suspend(() => {
            this.record({ op: 'createHead', ref });
            if (this.heads.has(headKey(ref))) return Effect.fail(new HeadWriteConflict({ message: 'AlreadyExists' }));
            const stored = { resourceVersion: this.nextRv(), data: { ...data } };
            this.heads.set(headKey(ref), stored);
            this.headWrites.push({ op: 'create', resourceVersion: stored.resourceVersion });
            return Effect.succeed(stored);
          }),
        ),
      replaceHead: (ref, expected, data) =>
        this.faults.around(
          Effect.suspend(() => {
            this.record({ op: 'replaceHead', ref });
            const current = this.heads.get(headKey(ref));
            if (current === undefined || current.resourceVersion !== expected) {
              return Effect.fail(new HeadWriteConflict({ message: `resourceVersion ${expected} is stale` }));
            }
            const stored = { resourceVersion: this.nextRv(), data: { ...data } };
            this.heads.set(headKey(ref), stored);
            this.headWrites.push({ op: 'replace', resourceVersion: stored.resourceVersion });
            return Effect.succeed(stored);
          }),
        ),
    };
  }

  get layer(): Layer.Layer<KubernetesCluster> {
    return Layer.succeed(KubernetesCluster, this.service);
  }
}

/**
 * InMemoryReceiptStore: a create-exclusive map of receipts. It stands in only for unit tests of the ordering logic
 * and backs no claim about Kubernetes or a file system. It shares the fault plan so a crash can hit the receipt write.
 */
export class InMemoryReceiptStore {
  readonly files = new Map<string, string>();
  writes = 0;
  readonly faults: InMemoryFaultPlan;
  constructor(faults: InMemoryFaultPlan = new InMemoryFaultPlan()) {
    this.faults = faults;
  }
  get service(): Context.Tag.Service<typeof ReceiptStore> {
    return {
      createExclusive: (key, bytes) =>
        this.faults.around(
          Effect.suspend(() => {
            if (this.files.has(key)) return Effect.fail(new ReceiptExists({ key }));
            this.files.set(key, bytes);
            this.writes += 1;
            return Effect.void;
          }),
        ),
      read: (key) => this.faults.around(Effect.sync(() => Option.fromNullable(this.files.get(key)))),
    };
  }
  get layer(): Layer.Layer<ReceiptStore> {
    return Layer.succeed(ReceiptStore, this.service);
  }
}

/**
 * InMemoryOperatorHost: a fixed kubeconfig stat and caller uid. It stands in only for unit tests of the ordering
 * logic and backs no claim about Kubernetes or the operating system.
 */
export class InMemoryOperatorHost {
  stat: FileStat = { isFile: true, uid: 1000, mode: 0o600 };
  callerUid = 1000;
  get service(): Context.Tag.Service<typeof OperatorHost> {
    return {
      kubeconfig: Effect.sync(() => ({ path: '/home/op/.kube/qinglong', stat: this.stat })),
      callerUid: Effect.sync(() => this.callerUid),
    };
  }
  get layer(): Layer.Layer<OperatorHost> {
    return Layer.succeed(OperatorHost, this.service);
  }
}

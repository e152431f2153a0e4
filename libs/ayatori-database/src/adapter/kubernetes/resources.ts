// The Kubernetes side of the use cases over `@homelab/kube` (seed: adapter/kubernetes/{binding,instance}_resources.go
// and *_mapping.go). Reads go to the API server directly (never a cache). Every write is conditioned on the
// snapshot the use case decided on and sent at that snapshot's UID and resourceVersion, so any change since is a 409
// from the server. The object written is the one this process last read or wrote at exactly that resourceVersion
// (`snapshots.ts`, decision 0380); only when it does not hold that version is the object re-read and, if its UID or
// resourceVersion differs from the snapshot, the write refused with a synthetic 409 (`StaleSnapshotMessage`). Status is written only when it
// differs semantically. Created Databases carry no ownerReferences (a Tenant's deletion never cascades).
// Errors become `KubernetesError` with a fixed message (kind, name, class) — never a server body.
import { Clock, Effect, Layer } from 'effect';
import { type KubeClientService, KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { Group, Version } from '../../api/common.js';
import type * as Binding from '../../domain/binding.js';
import { jsonEqual } from '@homelab/kube/conditions';
import { type Condition, currentReady } from '../../domain/conditions.js';
import type { ObservationTarget, TLSMode } from '../../domain/instance.js';
import { type AdditionalSecretKey, AdditionalSecretKeys } from '../../domain/credential-location.js';
import {
  presentInstanceStatus,
  presentTenantStatus,
  type InstanceStatusValue,
  type TenantStatusValue,
  type TenantPresentation,
} from '../../domain/presentation.js';
import { DatabaseSource, Finalizers, RotateAnnotation, StaleSnapshotMessage } from '../../domain/vocabulary.js';
import { snapshotsFor } from './snapshots.js';
import type { BindingDatabase, BindingTenant, SecretFact } from '../../application/ports.js';
import {
  AdminSecrets,
  BindingResources,
  type InstanceOutcome,
  type InstanceRecord,
  InstanceResources,
  KubernetesError,
} from '../../application/ports.js';

export const apiVersion = `${Group}/${Version}`;
export const Kinds = {
  instance: 'PostgreSQLInstance',
  database: 'PostgreSQLDatabase',
  tenant: 'PostgreSQLTenant',
} as const;

type Obj = KubeObject;

// ---- error mapping -------------------------------------------------------------------------------------------

const codeOf = (e: KubeError): KubernetesError['code'] => {
  switch (e._tag) {
    case 'Conflict':
    case 'AlreadyExists':
      return 'Conflict';
    case 'NotFound':
      return 'NotFound';
    case 'Forbidden':
    case 'Unauthorized':
      return 'Forbidden';
    case 'Invalid':
      return 'Invalid';
    case 'Unavailable':
      return 'Unavailable';
    case 'Timeout':
      return 'Timeout';
    default:
      return 'Other';
  }
};

/** A typed, body-free error: `<verb> <kind> <name>: <class>`. */
export const kubernetesError = (verb: string, kind: string, name: string) => (e: KubeError) =>
  new KubernetesError({ code: codeOf(e), message: `${verb} ${kind} ${name}: ${e._tag}` });

const stale = (kind: 'binding' | 'instance') =>
  new KubernetesError({ code: 'Conflict', message: StaleSnapshotMessage[kind] });

// ---- field access --------------------------------------------------------------------------------------------

export const rec = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : {};
export const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const spec = (o: Obj) => rec(o['spec']);
const status = (o: Obj) => rec(o['status']);
const deleting = (o: Obj) => o.metadata.deletionTimestamp !== undefined;
const conditions = (o: Obj) => status(o)['conditions'] as ReadonlyArray<Condition> | undefined;
/** The stored Ready condition's reason, whatever its generation ('' = none). */
export const readyReasonOf = (o: Obj): string =>
  str((Array.isArray(conditions(o)) ? (conditions(o) ?? []) : []).find((c) => c?.type === 'Ready')?.reason);
const hasFinalizer = (o: Obj, f: string) => (o.metadata.finalizers ?? []).includes(f);
const withFinalizer = (o: Obj, f: string): Obj => ({
  ...o,
  metadata: { ...o.metadata, finalizers: [...(o.metadata.finalizers ?? []), f] },
});
const withoutFinalizer = (o: Obj, f: string): Obj => ({
  ...o,
  metadata: { ...o.metadata, finalizers: (o.metadata.finalizers ?? []).filter((x) => x !== f) },
});

// ---- mapping (seed: binding_mapping.go, instance_mapping.go) -------------------------------------------------

export const bindingTenant = (o: Obj): BindingTenant => {
  const s = spec(o);
  const provision = s['provision'] === undefined ? undefined : rec(s['provision']);
  const databaseRef = s['databaseRef'] === undefined ? undefined : rec(s['databaseRef']);
  const bound = status(o)['databaseRef'] === undefined ? undefined : rec(status(o)['databaseRef']);
  return {
    identity: { namespace: str(o.metadata.namespace), name: str(o.metadata.name), uid: str(o.metadata.uid) },
    request: {
      ...(provision
        ? {
            provision: {
              instance: str(rec(provision['instanceRef'])['name']),
              database: str(provision['database']),
              loginRole: str(provision['loginRole']),
            },
          }
        : {}),
      ...(databaseRef ? { existingDatabase: str(databaseRef['name']) } : {}),
    },
    phase: str(status(o)['phase']),
    deleting: deleting(o),
    ...(bound ? { database: { name: str(bound['name']), uid: str(bound['uid']) } } : {}),
    revision: str(o.metadata.resourceVersion),
    generation: o.metadata.generation ?? 0,
    ...(Array.isArray(s['extensions'])
      ? { extensions: (s['extensions'] as unknown[]).filter((x): x is string => typeof x === 'string') }
      : {}),
    ...(str(s['secretName']) !== '' ? { secretName: str(s['secretName']) } : {}),
    ...(Array.isArray(s['additionalSecretKeys'])
      ? {
          additionalSecretKeys: (s['additionalSecretKeys'] as unknown[]).filter(
            (x): x is AdditionalSecretKey =>
              typeof x === 'string' && (AdditionalSecretKeys as ReadonlyArray<string>).includes(x),
          ),
        }
      : {}),
    ...(currentReady(o.metadata.generation ?? 0, conditions(o)) && str(status(o)['secretName']) !== ''
      ? { delivered: str(status(o)['secretName']) }
      : {}),
    ...(str(o.metadata.annotations?.[RotateAnnotation]) !== ''
      ? { rotation: str(o.metadata.annotations?.[RotateAnnotation]) }
      : {}),
    readyReason: readyReasonOf(o),
  };
};

export const bindingDatabase = (o: Obj): BindingDatabase => {
  const s = spec(o);
  const tenantRef = s['tenantRef'] === undefined ? undefined : rec(s['tenantRef']);
  return {
    identity: { name: str(o.metadata.name), uid: str(o.metadata.uid) },
    instance: str(rec(s['instanceRef'])['name']),
    instanceUID: str(status(o)['instanceUID']),
    name: str(s['database']),
    loginRole: str(s['loginRole']),
    source: str(s['source']),
    ...(tenantRef
      ? { tenant: { namespace: str(tenantRef['namespace']), name: str(tenantRef['name']), uid: str(tenantRef['uid']) } }
      : {}),
    phase: str(status(o)['phase']),
    deleting: deleting(o),
    ready: currentReady(o.metadata.generation ?? 0, conditions(o)),
    revision: str(o.metadata.resourceVersion),
  };
};

export const bindingInstance = (o: Obj): Binding.Instance => ({
  identity: { name: str(o.metadata.name), uid: str(o.metadata.uid) },
  deleting: deleting(o),
  ready: currentReady(o.metadata.generation ?? 0, conditions(o)),
});

/** The Instance record; the domain validates the target (an invalid one is a round error, never a connection). */
export const instanceRecord = (o: Obj): InstanceRecord => {
  const s = spec(o);
  const endpoint = rec(s['endpoint']);
  const ref = rec(s['adminCredentialRef']);
  const target: ObservationTarget = {
    uid: str(o.metadata.uid),
    name: str(o.metadata.name),
    revision: o.metadata.generation ?? 0,
    endpoint: {
      host: str(endpoint['host']),
      hostAddr: str(endpoint['hostaddr']),
      port: typeof endpoint['port'] === 'number' ? endpoint['port'] : 5432,
      managementDatabase: str(endpoint['database']) || 'postgres',
      tlsMode: (str(endpoint['sslMode']) || 'verify-full') as TLSMode,
    },
    credential: {
      name: str(ref['name']),
      usernameKey: str(ref['usernameKey']) || 'username',
      passwordKey: str(ref['passwordKey']) || 'password',
    },
  };
  return { target, revision: str(o.metadata.resourceVersion), deleting: deleting(o) };
};

// ---- binding resources ---------------------------------------------------------------------------------------

const omitEmptyPhase = <S extends { readonly phase?: string | undefined }>(s: S): S => {
  if (s.phase !== '') return s;
  const { phase: _omitted, ...rest } = s;
  return rest as S;
};

export const now = Effect.map(Clock.currentTimeMillis, (ms) =>
  new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z'),
);

/** Read directly (the API reader); `undefined` for NotFound. What was read is kept as the object's snapshot. */
export const readOptional = (kube: KubeClientService, kind: string, name: string, namespace?: string) =>
  kube.get({ apiVersion, kind, name, ...(namespace === undefined ? {} : { namespace }) }).pipe(
    Effect.map((o): Obj | undefined => snapshotsFor(kube).remember(kind, o)),
    Effect.catchTag('NotFound', () =>
      Effect.sync(() => {
        snapshotsFor(kube).forget(kind, name, namespace);
        return undefined;
      }),
    ),
    Effect.mapError(kubernetesError('get', kind, name)),
  );

/** What our own write stored (the read-back), kept as the object's snapshot and marked as our write. */
export const keepWritten =
  (kube: KubeClientService, kind: string) =>
  <A extends Obj>(o: A): A =>
    snapshotsFor(kube).remember(kind, o, true) as A;

/** Objects `atVersion` answered from the hold (not re-read): a branch that writes nothing must confirm them. */
const fromHold = new WeakSet<Obj>();

const reread = (
  kube: KubeClientService,
  which: 'binding' | 'instance',
  kind: string,
  name: string,
  uid: string,
  revision: string,
  namespace?: string,
) =>
  kube.get({ apiVersion, kind, name, ...(namespace === undefined ? {} : { namespace }) }).pipe(
    Effect.tap((o) => Effect.sync(() => snapshotsFor(kube).remember(kind, o))),
    Effect.mapError(kubernetesError('get', kind, name)),
    Effect.filterOrFail(
      (o) => o.metadata.uid === uid && o.metadata.resourceVersion === revision,
      () => stale(which),
    ),
  );

/**
 * The object at the snapshot's UID and resourceVersion, to be written at that version (seed `tenantAtVersion` /
 * `databaseAtVersion`). Held from this process's own read or write at exactly that version: no GET — the write
 * carries the version, so a change since is the server's 409 (decision 0380). Otherwise re-read and insist on both.
 * A branch that then writes nothing passes the object through `unwritten`, which re-reads a held one: a stale
 * snapshot is still a 409 even when there was nothing to write (the seed's order: check, then maybe write).
 */
export const atVersion = (
  kube: KubeClientService,
  which: 'binding' | 'instance',
  kind: string,
  name: string,
  uid: string,
  revision: string,
  namespace?: string,
): Effect.Effect<Obj, KubernetesError> => {
  const held = snapshotsFor(kube).at(kind, name, uid, revision, namespace);
  if (held === undefined) return reread(kube, which, kind, name, uid, revision, namespace);
  fromHold.add(held);
  return Effect.succeed(held);
};

/** Nothing is written at `o`: a held object is confirmed by the seed's re-read (synthetic 409 when stale). */
export const unwritten = (
  kube: KubeClientService,
  which: 'binding' | 'instance',
  kind: string,
  o: Obj,
): Effect.Effect<Obj, KubernetesError> =>
  fromHold.has(o)
    ? reread(
        kube,
        which,
        kind,
        str(o.metadata.name),
        str(o.metadata.uid),
        str(o.metadata.resourceVersion),
        o.metadata.namespace,
      )
    : Effect.succeed(o);

const presentTenant = (kube: KubeClientService, o: Obj, result: TenantPresentation) =>
  Effect.gen(function* () {
    const previous = o['status'] as TenantStatusValue | undefined;
    const presented = presentTenantStatus(previous, o.metadata.generation ?? 0, result, yield* now);
    // Go's omitempty: an empty phase is not stored (a Tenant refused before binding keeps no phase).
    const status = omitEmptyPhase(presented.status);
    if (jsonEqual(previous ?? {}, status)) return yield* unwritten(kube, 'binding', Kinds.tenant, o);
    return yield* kube
      .updateStatus({ ...o, status })
      .pipe(
        Effect.map(keepWritten(kube, Kinds.tenant)),
        Effect.mapError(kubernetesError('update status of', Kinds.tenant, str(o.metadata.name))),
      );
  });

export const makeBindingResources = (kube: KubeClientService): BindingResources['Type'] => ({
  tenant: (namespace, name) =>
    Effect.map(readOptional(kube, Kinds.tenant, name, namespace), (o) => (o ? bindingTenant(o) : undefined)),
  database: (name) => Effect.map(readOptional(kube, Kinds.database, name), (o) => (o ? bindingDatabase(o) : undefined)),
  instance: (name) => Effect.map(readOptional(kube, Kinds.instance, name), (o) => (o ? bindingInstance(o) : undefined)),
  beginBinding: (tenant, checkpoint) =>
    Effect.gen(function* () {
      const { namespace, name, uid } = tenant.identity;
      let o = yield* atVersion(kube, 'binding', Kinds.tenant, name, uid, tenant.revision, namespace);
      if (!hasFinalizer(o, Finalizers.tenant)) {
        o = yield* kube
          .update(withFinalizer(o, Finalizers.tenant))
          .pipe(
            Effect.map(keepWritten(kube, Kinds.tenant)),
            Effect.mapError(kubernetesError('update', Kinds.tenant, name)),
          );
      }
      if (checkpoint !== undefined) o = yield* presentTenant(kube, o, checkpoint);
      else o = yield* unwritten(kube, 'binding', Kinds.tenant, o);
      return bindingTenant(o);
    }),
  createDatabase: (target, tenant) =>
    Effect.gen(function* () {
      const provision = target.provision;
      if (provision === undefined)
        return yield* new KubernetesError({
          code: 'Invalid',
          message: `create ${Kinds.database} ${target.name}: not a dynamic target`,
        });
      const created = yield* kube
        .create<Obj>({
          apiVersion,
          kind: Kinds.database,
          metadata: { name: target.name, finalizers: [Finalizers.database] },
          spec: {
            instanceRef: { name: provision.instance },
            database: provision.database,
            loginRole: provision.loginRole,
            source: DatabaseSource.Provision,
            reclaimPolicy: 'Retain',
            tenantRef: { namespace: tenant.namespace, name: tenant.name, uid: tenant.uid },
          },
        })
        .pipe(
          Effect.map(keepWritten(kube, Kinds.database)),
          Effect.mapError(kubernetesError('create', Kinds.database, target.name)),
        );
      return bindingDatabase(created);
    }),
  recordInstance: (database, instanceUID) =>
    Effect.gen(function* () {
      const { name, uid } = database.identity;
      const o = yield* atVersion(kube, 'binding', Kinds.database, name, uid, database.revision);
      const written = yield* kube
        .updateStatus({ ...o, status: { ...status(o), instanceUID } })
        .pipe(
          Effect.map(keepWritten(kube, Kinds.database)),
          Effect.mapError(kubernetesError('update status of', Kinds.database, name)),
        );
      return bindingDatabase(written);
    }),
  bindDatabase: (database, tenant) =>
    Effect.gen(function* () {
      const { name, uid } = database.identity;
      let o = yield* atVersion(kube, 'binding', Kinds.database, name, uid, database.revision);
      const wanted = { namespace: tenant.namespace, name: tenant.name, uid: tenant.uid };
      const current = spec(o)['tenantRef'] === undefined ? undefined : rec(spec(o)['tenantRef']);
      let changed = false;
      if (!hasFinalizer(o, Finalizers.database)) {
        o = withFinalizer(o, Finalizers.database);
        changed = true;
      }
      if (
        current === undefined ||
        current['namespace'] !== wanted.namespace ||
        current['name'] !== wanted.name ||
        current['uid'] !== wanted.uid
      ) {
        o = { ...o, spec: { ...spec(o), tenantRef: wanted } };
        changed = true;
      }
      if (changed)
        o = yield* kube
          .update(o)
          .pipe(
            Effect.map(keepWritten(kube, Kinds.database)),
            Effect.mapError(kubernetesError('update', Kinds.database, name)),
          );
      return bindingDatabase(o);
    }),
  present: (tenant, result) =>
    atVersion(
      kube,
      'binding',
      Kinds.tenant,
      tenant.identity.name,
      tenant.identity.uid,
      tenant.revision,
      tenant.identity.namespace,
    ).pipe(
      Effect.map((o): Obj | undefined => o),
      Effect.catchIf(
        (e) => e.code === 'NotFound',
        () => Effect.succeed(undefined),
      ),
      Effect.flatMap((o) => (o === undefined ? Effect.void : Effect.asVoid(presentTenant(kube, o, result)))),
      // Gone since the held version: nothing to present (as when the re-read finds nothing).
      Effect.catchIf(
        (e) => e.code === 'NotFound',
        () => Effect.void,
      ),
    ),
});

// ---- instance resources --------------------------------------------------------------------------------------

export const makeInstanceResources = (kube: KubeClientService): InstanceResources['Type'] => {
  const instanceAt = (record: InstanceRecord) =>
    atVersion(kube, 'instance', Kinds.instance, record.target.name, record.target.uid, record.revision);
  return {
    load: (name) => Effect.map(readOptional(kube, Kinds.instance, name), (o) => (o ? instanceRecord(o) : undefined)),
    protect: (record) =>
      Effect.gen(function* () {
        const o = yield* instanceAt(record);
        if (hasFinalizer(o, Finalizers.instance))
          return instanceRecord(yield* unwritten(kube, 'instance', Kinds.instance, o));
        const written = yield* kube
          .update(withFinalizer(o, Finalizers.instance))
          .pipe(
            Effect.map(keepWritten(kube, Kinds.instance)),
            Effect.mapError(kubernetesError('update', Kinds.instance, record.target.name)),
          );
        return instanceRecord(written);
      }),
    references: (name) =>
      Effect.gen(function* () {
        const databases = yield* kube
          .listAll({ apiVersion, kind: Kinds.database })
          .pipe(Effect.mapError(kubernetesError('list', Kinds.database, '*')));
        const database = databases.items.find((d) => str(rec(spec(d)['instanceRef'])['name']) === name);
        if (database !== undefined) return `Database/${str(database.metadata.name)}`;
        const tenants = yield* kube
          .listAll({ apiVersion, kind: Kinds.tenant })
          .pipe(Effect.mapError(kubernetesError('list', Kinds.tenant, '*')));
        const tenant = tenants.items.find(
          (t) =>
            spec(t)['provision'] !== undefined && str(rec(rec(spec(t)['provision'])['instanceRef'])['name']) === name,
        );
        return tenant === undefined
          ? undefined
          : `Tenant/${str(tenant.metadata.namespace)}/${str(tenant.metadata.name)}`;
      }),
    present: (record, outcome: InstanceOutcome) =>
      Effect.gen(function* () {
        const found = yield* instanceAt(record).pipe(
          Effect.map((o): Obj | undefined => o),
          Effect.catchIf(
            (e) => e.code === 'NotFound',
            () => Effect.succeed(undefined),
          ),
        );
        if (found === undefined) return;
        let o = found;
        const presented = presentInstanceStatus(
          o['status'] as InstanceStatusValue | undefined,
          o.metadata.generation ?? 0,
          outcome.presentation,
          yield* now,
        );
        if (presented.changed) {
          o = yield* kube
            .updateStatus({ ...o, status: presented.status })
            .pipe(
              Effect.map(keepWritten(kube, Kinds.instance)),
              Effect.mapError(kubernetesError('update status of', Kinds.instance, record.target.name)),
            );
        } else if (!(outcome.removeProtection && hasFinalizer(o, Finalizers.instance)))
          yield* unwritten(kube, 'instance', Kinds.instance, o);
        if (outcome.removeProtection && hasFinalizer(o, Finalizers.instance)) {
          yield* kube
            .update(withoutFinalizer(o, Finalizers.instance))
            .pipe(
              Effect.map(keepWritten(kube, Kinds.instance)),
              Effect.mapError(kubernetesError('update', Kinds.instance, record.target.name)),
            );
        }
      }).pipe(
        // Gone since the held version: nothing to present (as when the re-read finds nothing).
        Effect.catchIf(
          (e) => e.code === 'NotFound',
          () => Effect.void,
        ),
      ),
  };
};

// ---- admin Secrets -------------------------------------------------------------------------------------------

const decode = (data: unknown): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(rec(data)))
    if (typeof v === 'string') out[k] = Buffer.from(v, 'base64').toString('utf8');
  return out;
};

/** The admin Secret, read directly in the controller namespace only: Found (decoded), Missing, or Unreadable. */
export const makeAdminSecrets = (kube: KubeClientService, namespace: string): AdminSecrets['Type'] => ({
  read: (name) =>
    kube.get({ apiVersion: 'v1', kind: 'Secret', namespace, name }).pipe(
      Effect.map((o): SecretFact => ({ _tag: 'Found', data: decode(o['data']) })),
      Effect.catchAll((e) =>
        Effect.succeed<SecretFact>(e._tag === 'NotFound' ? { _tag: 'Missing' } : { _tag: 'Unreadable' }),
      ),
    ),
});

// ---- layers --------------------------------------------------------------------------------------------------

export const KubernetesBindingResourcesLive = Layer.effect(
  BindingResources,
  Effect.map(KubeClient, makeBindingResources),
);
export const KubernetesInstanceResourcesLive = Layer.effect(
  InstanceResources,
  Effect.map(KubeClient, makeInstanceResources),
);
export const KubernetesAdminSecretsLive = (namespace: string) =>
  Layer.effect(
    AdminSecrets,
    Effect.map(KubeClient, (kube) => makeAdminSecrets(kube, namespace)),
  );

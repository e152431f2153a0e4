// Writing and reading an application's rendered downstream objects (write-table subject `application-reconciler`,
// target `Downstream`): server-side apply under `kos-application-reconciler`, ownership markers `managed-by` /
// `owner-uid` on every object, an owner reference to the Application when it lives in the same namespace (the
// garbage collector only honours same-namespace owners; decision 0225), nothing sent when the stored object already
// holds every applied value.
import { Effect, Either } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import type { Manifest } from '../../domain/application/template.js';
import { markerKey } from '../../domain/markers.js';
import { decideApply } from '../../domain/reconcile.js';
import { admit, fieldManagerOf, type WriteRejected } from '../../domain/write-path.js';

export const APP_SUBJECT = 'application-reconciler' as const;
export const APP_FIELD_MANAGER = fieldManagerOf(APP_SUBJECT);

/** The kinds an app can render (template kinds + the install hook's Job), in uninstall order. */
export const DOWNSTREAM_KINDS: ReadonlyArray<{ readonly apiVersion: string; readonly kind: string }> = [
  { apiVersion: 'apps/v1', kind: 'Deployment' },
  { apiVersion: 'apps/v1', kind: 'StatefulSet' },
  { apiVersion: 'batch/v1', kind: 'Job' },
  { apiVersion: 'v1', kind: 'Service' },
  { apiVersion: 'v1', kind: 'ConfigMap' },
];

export const ownerUidSelector = (uid: string) => `${markerKey('owner-uid')}=${uid}`;

/** Markers (and the owner reference when allowed) on one rendered object. */
export const decorate = (object: Manifest, app: KubeObject): Manifest => {
  const sameNamespace = app.metadata.namespace === object.metadata.namespace;
  const meta = object.metadata as Record<string, unknown>;
  return {
    ...object,
    metadata: {
      ...meta,
      name: object.metadata.name,
      namespace: object.metadata.namespace,
      labels: {
        ...((meta['labels'] as Record<string, string> | undefined) ?? {}),
        [markerKey('managed-by')]: 'kos',
        [markerKey('owner-uid')]: app.metadata.uid ?? '',
      },
      ...(sameNamespace
        ? {
            ownerReferences: [
              {
                apiVersion: app.apiVersion,
                kind: app.kind,
                name: app.metadata.name ?? '',
                uid: app.metadata.uid ?? '',
                controller: true,
                blockOwnerDeletion: true,
              },
            ],
          }
        : {}),
    },
  };
};

const refOf = (o: { apiVersion: string; kind: string; metadata: { name?: string; namespace?: string } }) => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  name: o.metadata.name ?? '',
  ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
});

const admitted = (o: Manifest, part: 'create' | 'delete') =>
  Either.match(
    admit({
      subject: APP_SUBJECT,
      target: 'Downstream',
      part,
      object: { namespace: o.metadata.namespace, name: o.metadata.name },
    }),
    { onLeft: (e) => Effect.fail(e), onRight: () => Effect.void },
  );

const managesByApply = (o: KubeObject): boolean =>
  (o.metadata.managedFields ?? []).some((m) => {
    const e = m as { manager?: string; operation?: string };
    return e.manager === APP_FIELD_MANAGER && e.operation === 'Apply';
  });

/**
 * Apply one downstream object; `written` says whether a write was sent. `compare` (the default) reads the stored
 * object first and sends nothing when it already holds every applied value (a no-op round writes nothing);
 * `apply` sends the server-side apply at once (the desired state changed: a read first would only cost a request).
 */
export const applyDownstream = (
  object: Manifest,
  mode: 'compare' | 'apply' = 'compare',
): Effect.Effect<{ readonly stored: KubeObject; readonly written: boolean }, KubeError | WriteRejected, KubeClient> =>
  Effect.gen(function* () {
    yield* admitted(object, 'create');
    const client = yield* KubeClient;
    if (mode === 'apply')
      return {
        stored: yield* client.apply(object as unknown as KubeObject, { fieldManager: APP_FIELD_MANAGER, force: true }),
        written: true,
      };
    const stored = yield* client.get(refOf(object)).pipe(
      Effect.map((o): KubeObject | undefined => o),
      Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
    );
    const { apiVersion: _a, kind: _k, metadata, ...body } = object;
    const comparable = {
      ...body,
      metadata: {
        labels: metadata['labels'],
        ...(metadata['ownerReferences'] ? { ownerReferences: metadata['ownerReferences'] } : {}),
      },
    };
    if (
      stored !== undefined &&
      stored.metadata.deletionTimestamp === undefined &&
      managesByApply(stored) &&
      decideApply(stored, comparable)._tag === 'NoWrite'
    )
      return { stored, written: false };
    const applied = yield* client.apply(object as unknown as KubeObject, {
      fieldManager: APP_FIELD_MANAGER,
      force: true,
    });
    return { stored: applied, written: true };
  });

/** Delete one downstream object (background propagation); NotFound = already gone. */
export const deleteDownstream = (object: Manifest): Effect.Effect<void, KubeError | WriteRejected, KubeClient> =>
  Effect.gen(function* () {
    yield* admitted(object, 'delete');
    const client = yield* KubeClient;
    yield* client
      .delete(refOf(object), { propagationPolicy: 'Background' })
      .pipe(Effect.catchTag('NotFound', () => Effect.void));
  });

/** Every stored object KOS rendered for the app (by the `owner-uid` marker) in its declared namespace. */
export const listDownstream = (
  namespace: string,
  appUid: string,
): Effect.Effect<ReadonlyArray<KubeObject>, KubeError, KubeClient> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const lists = yield* Effect.forEach(DOWNSTREAM_KINDS, (k) =>
      client
        .list({ ...k, namespace }, { labelSelector: ownerUidSelector(appUid) })
        .pipe(Effect.map((l) => l.items.map((o) => ({ ...o, apiVersion: k.apiVersion, kind: k.kind })))),
    );
    return lists.flat();
  });

// One-shot action records (seed 000 §3.4; decision 0224): the control plane writes an immutable ConfigMap in the
// system namespace, labelled with the target app's uid and the action; the application reconciler reads it in its
// next round, acts once, and deletes it. Carrier of `restart`, `retry` and `orphan` (stop/start/scale are spec
// writes). The name is `<action>-<app uid>-<request time, base 36>`: the same action for the same app within one
// millisecond is one record (AlreadyExists converges on it); no randomness is needed.
import { Clock, Effect } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { type AppAction } from '../../domain/application/lifecycle.js';
import { admit, type WriteRejected } from '../../domain/write-path.js';
import { RECORD_APP_UID_LABEL, recordConsumed, recordObjectsOf } from './reads.js';
import { AppLifecycleConfig } from './services.js';

export const RECORD_LABELS = {
  action: 'actions.kos.tsic.top/action',
  appUid: RECORD_APP_UID_LABEL,
  appName: 'actions.kos.tsic.top/app-name',
  appNamespace: 'actions.kos.tsic.top/app-namespace',
} as const;

export interface ActionRecord {
  readonly name: string;
  readonly action: AppAction;
  readonly requestedBy: string;
}

const fromEither = <A, E>(e: { _tag: 'Left'; left: E } | { _tag: 'Right'; right: A }) =>
  e._tag === 'Left' ? Effect.fail(e.left) : Effect.succeed(e.right);

/** Write one record (the control plane's `create` of an ActionRecord). */
export const writeActionRecord = (
  app: KubeObject,
  action: AppAction | 'confirm',
  requestedBy: string,
  reason?: string,
  extra: Readonly<Record<string, string>> = {},
): Effect.Effect<KubeObject, KubeError | WriteRejected, KubeClient | AppLifecycleConfig> =>
  Effect.gen(function* () {
    const { systemNamespace } = yield* AppLifecycleConfig;
    const now = yield* Clock.currentTimeMillis;
    const name = `${action}-${app.metadata.uid ?? ''}-${now.toString(36)}`;
    yield* fromEither(
      admit({
        subject: 'control-plane',
        target: 'ActionRecord',
        part: 'create',
        object: { namespace: systemNamespace, name },
      }),
    );
    const client = yield* KubeClient;
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', namespace: systemNamespace, name };
    return yield* client
      .create({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name,
          namespace: systemNamespace,
          labels: {
            [RECORD_LABELS.action]: action,
            [RECORD_LABELS.appUid]: app.metadata.uid ?? '',
            [RECORD_LABELS.appName]: app.metadata.name ?? '',
            [RECORD_LABELS.appNamespace]: app.metadata.namespace ?? '',
          },
        },
        immutable: true,
        data: { ...extra, action, requestedBy, ...(reason !== undefined ? { reason } : {}) },
      } as KubeObject)
      .pipe(Effect.catchTag('AlreadyExists', () => client.get(ref)));
  });

/** The records waiting for one app (by uid), oldest first (from the records cache when one is provided, 0350). */
export const pendingRecords = (
  appUid: string,
): Effect.Effect<ReadonlyArray<ActionRecord>, KubeError, KubeClient | AppLifecycleConfig> =>
  Effect.map(recordObjectsOf(appUid), (items) =>
    [...items]
      .sort((a, b) => (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? ''))
      .map((o) => ({
        name: o.metadata.name ?? '',
        action: (o.metadata.labels?.[RECORD_LABELS.action] ?? '') as AppAction,
        requestedBy: ((o['data'] as Record<string, string> | undefined)?.['requestedBy'] ?? '') as string,
      })),
  );

/** Consume a record: the reconciler deletes it after acting (absent already = consumed). */
export const consumeRecord = (
  name: string,
): Effect.Effect<void, KubeError | WriteRejected, KubeClient | AppLifecycleConfig> =>
  Effect.gen(function* () {
    const { systemNamespace } = yield* AppLifecycleConfig;
    yield* fromEither(
      admit({
        subject: 'application-reconciler',
        target: 'ActionRecord',
        part: 'delete',
        object: { namespace: systemNamespace, name },
      }),
    );
    const client = yield* KubeClient;
    yield* client
      .delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: systemNamespace, name })
      .pipe(Effect.catchTag('NotFound', () => Effect.void));
    // the records cache must never show it again (its DELETED event may still be on the way)
    yield* recordConsumed(name);
  });

// Finalizer, status and condition helpers for reconcilers: optimistic concurrency everywhere, and no write when
// nothing changed (a no-op round leaves resourceVersion untouched).
import { Effect } from 'effect';
import type { KubeObject } from '../api/objects.js';
import { jsonEqual } from '../domain/conditions.js';
import type { KubeError } from '../domain/errors.js';
import { KubeClient } from './kube-client.js';

export type StatusWrite<A> = { readonly written: boolean; readonly object: A };

/**
 * Replace `.status` through the status subresource only if it differs from the object's current status.
 * Uses the object's resourceVersion (Conflict if it is stale).
 */
export const updateStatusIfChanged = <A extends KubeObject>(
  object: A,
  status: unknown,
): Effect.Effect<StatusWrite<A>, KubeError, KubeClient> =>
  jsonEqual(object['status'], status)
    ? Effect.succeed({ written: false, object })
    : Effect.flatMap(KubeClient, (c) =>
        Effect.map(c.updateStatus({ ...object, status }), (o) => ({ written: true, object: o })),
      );

export const hasFinalizer = (o: KubeObject, finalizer: string): boolean =>
  (o.metadata.finalizers ?? []).includes(finalizer);

const finalizerPatch = <A extends KubeObject>(
  o: A,
  finalizers: ReadonlyArray<string>,
): Effect.Effect<A, KubeError, KubeClient> =>
  Effect.flatMap(KubeClient, (c) =>
    c.patch<A>(
      {
        apiVersion: o.apiVersion,
        kind: o.kind,
        name: o.metadata.name ?? '',
        ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
      },
      // resourceVersion in a merge patch is a precondition: a stale object ⇒ Conflict, never a lost finalizer.
      { type: 'merge', patch: { metadata: { finalizers, resourceVersion: o.metadata.resourceVersion } } },
    ),
  );

/** Add a finalizer (no write if present). */
export const ensureFinalizer = <A extends KubeObject>(
  o: A,
  finalizer: string,
): Effect.Effect<StatusWrite<A>, KubeError, KubeClient> =>
  hasFinalizer(o, finalizer)
    ? Effect.succeed({ written: false, object: o })
    : Effect.map(finalizerPatch(o, [...(o.metadata.finalizers ?? []), finalizer]), (object) => ({
        written: true,
        object,
      }));

/** Remove a finalizer (no write if absent). */
export const removeFinalizer = <A extends KubeObject>(
  o: A,
  finalizer: string,
): Effect.Effect<StatusWrite<A>, KubeError, KubeClient> =>
  !hasFinalizer(o, finalizer)
    ? Effect.succeed({ written: false, object: o })
    : Effect.map(
        finalizerPatch(
          o,
          (o.metadata.finalizers ?? []).filter((f) => f !== finalizer),
        ),
        (object) => ({ written: true, object }),
      );

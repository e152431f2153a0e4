// Finalizer, status and condition helpers for reconcilers: optimistic concurrency everywhere, and no write when
// nothing changed (a no-op round leaves resourceVersion untouched).
import { Effect } from 'effect';
import type { Condition, KubeObject } from '../api/objects.js';
import type { KubeError } from '../domain/errors.js';
import { KubeClient } from './kube-client.js';

/** Structural equality of JSON values (key order ignored). */
export const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a))
    return a.length === (b as Array<unknown>).length && a.every((x, i) => jsonEqual(x, (b as Array<unknown>)[i]));
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  return (
    ka.length === kb.length &&
    ka.every((k) => jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  );
};

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

/**
 * Set a condition in a list (metav1.Condition rules): lastTransitionTime changes only when `status` changes;
 * observedGeneration is recorded. `now` is an RFC 3339 time supplied by the caller (no clock reads here).
 */
export const setCondition = (
  conditions: ReadonlyArray<Condition> | undefined,
  next: Omit<Condition, 'lastTransitionTime'> & { readonly lastTransitionTime?: string },
  now: string,
): ReadonlyArray<Condition> => {
  const list = conditions ?? [];
  const existing = list.find((c) => c.type === next.type);
  const lastTransitionTime =
    existing && existing.status === next.status ? existing.lastTransitionTime : (next.lastTransitionTime ?? now);
  const merged: Condition = { ...next, lastTransitionTime };
  return existing ? list.map((c) => (c.type === next.type ? merged : c)) : [...list, merged];
};

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

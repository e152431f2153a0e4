// Writes through the write path: every write is admitted by the table first (a rejection never reaches the API
// server), then sent as server-side apply under the subject's own field manager, or as an explicit update with
// resourceVersion. A second writer of the same field set gets the API server's 409 with the current object
// (@homelab/kube's Conflict carries it). Nothing is sent when the applied fields already hold those values.
import { Effect } from 'effect';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { decideApply } from '../domain/reconcile.js';
import { admit, type Part, type Subject, type Target, type WriteRejected } from '../domain/write-path.js';

/** The field paths an applied object sets within a part (leaves; arrays count as one field). */
export const fieldsOf = (part: Part, object: KubeObject): ReadonlyArray<string> => {
  if (part === 'markers') {
    return [...Object.keys(object.metadata.labels ?? {}), ...Object.keys(object.metadata.annotations ?? {})].sort();
  }
  if (part !== 'spec' && part !== 'status') return [];
  const out: string[] = [];
  const walk = (value: unknown, path: string): void => {
    if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0) {
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) walk(v, `${path}.${k}`);
    } else out.push(path);
  };
  walk(object[part], part);
  return out.sort();
};

export interface WriteAs {
  readonly subject: Subject;
  /** The account or instance within the subject class (its own field manager). */
  readonly actor?: string;
  readonly target: Target;
  readonly part: Extract<Part, 'spec' | 'status' | 'markers'>;
  readonly object: KubeObject;
}

export type WriteOutcome =
  | { readonly _tag: 'Written'; readonly object: KubeObject }
  | { readonly _tag: 'Unchanged'; readonly object: KubeObject };

const refOf = (o: KubeObject) => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  name: o.metadata.name ?? '',
  ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
});

const managesByApply = (o: KubeObject, fieldManager: string): boolean =>
  (o.metadata.managedFields ?? []).some((m) => {
    const entry = m as { manager?: string; operation?: string };
    return entry.manager === fieldManager && entry.operation === 'Apply';
  });

const admitted = (w: WriteAs) =>
  Effect.suspend(() => {
    const decision = admit({
      subject: w.subject,
      target: w.target,
      part: w.part,
      object: {
        name: w.object.metadata.name ?? '',
        ...(w.object.metadata.namespace !== undefined ? { namespace: w.object.metadata.namespace } : {}),
      },
      fields: fieldsOf(w.part, w.object),
      ...(w.actor !== undefined ? { actor: w.actor } : {}),
    });
    return decision._tag === 'Left' ? Effect.fail(decision.left) : Effect.succeed(decision.right);
  });

/**
 * Server-side apply as `subject` (after admission). When the stored object already holds every applied value,
 * nothing is sent (`Unchanged`: no resourceVersion bump, TC-26).
 */
export const applyAs = (w: WriteAs): Effect.Effect<WriteOutcome, WriteRejected | KubeError, KubeClient> =>
  Effect.gen(function* () {
    const { fieldManager } = yield* admitted(w);
    const client = yield* KubeClient;
    const stored = yield* client.get(refOf(w.object)).pipe(
      Effect.map((o): KubeObject | undefined => o),
      Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
    );
    const applied =
      w.part === 'markers'
        ? { metadata: { labels: w.object.metadata.labels ?? {}, annotations: w.object.metadata.annotations ?? {} } }
        : { [w.part]: w.object[w.part] };
    // Skip only when this manager already applied and the values are in place: a *second* writer of the same
    // fields must still reach the server and get its 409.
    if (
      stored !== undefined &&
      managesByApply(stored, fieldManager) &&
      decideApply(stored, applied)._tag === 'NoWrite'
    ) {
      return { _tag: 'Unchanged', object: stored } as const;
    }
    const object = yield* client.apply(w.object, {
      fieldManager,
      ...(w.part === 'status' ? { subresource: 'status' as const } : {}),
    });
    return { _tag: 'Written', object } as const;
  });

/** An explicit update carrying `metadata.resourceVersion` (after admission): a stale version ⇒ Conflict with the current object. */
export const updateAs = (w: WriteAs): Effect.Effect<KubeObject, WriteRejected | KubeError, KubeClient> =>
  Effect.gen(function* () {
    const { fieldManager } = yield* admitted(w);
    const client = yield* KubeClient;
    return w.part === 'status'
      ? yield* client.updateStatus(w.object, { fieldManager })
      : yield* client.update(w.object, { fieldManager });
  });

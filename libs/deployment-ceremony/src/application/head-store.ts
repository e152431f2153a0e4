import { Effect, Option } from 'effect';
import type { HeadV2, ObservedHead } from '../api/head.js';
import type { HeadRef } from '../api/identity.js';
import { HeadRejected } from '../domain/errors.js';
import { decodeHead, encodeHead } from '../domain/head.js';
import { KubernetesCluster } from './ports.js';

/** Read and decode the Head; `None` when the ConfigMap does not exist. */
export const readHeadOption = Effect.fn('Head.readOption')(function* (ref: HeadRef) {
  const cluster = yield* KubernetesCluster;
  const stored = yield* cluster.readHead(ref);
  if (Option.isNone(stored)) return Option.none<ObservedHead>();
  const decoded = yield* decodeHead(stored.value.data);
  return Option.some<ObservedHead>({ ...decoded, resourceVersion: stored.value.resourceVersion });
});

/** Read and decode the Head, which must exist. */
export const readHead = Effect.fn('Head.read')(function* (ref: HeadRef) {
  const head = yield* readHeadOption(ref);
  if (Option.isNone(head)) {
    return yield* new HeadRejected({
      code: 'HEAD_NOT_FOUND',
      message: `no Head ConfigMap ${ref.namespace}/${ref.name}`,
    });
  }
  return head.value;
});

/** CAS the Head: replace it only if its resourceVersion is still `expectedResourceVersion`. */
export const casHead = Effect.fn('Head.cas')(function* (ref: HeadRef, expectedResourceVersion: string, next: HeadV2) {
  const cluster = yield* KubernetesCluster;
  const data = yield* encodeHead(next);
  const stored = yield* cluster
    .replaceHead(ref, expectedResourceVersion, data)
    .pipe(
      Effect.catchTag('HeadWriteConflict', (e) =>
        Effect.fail(
          new HeadRejected({ code: 'HEAD_CONFLICT', message: `another writer changed the Head: ${e.message}` }),
        ),
      ),
    );
  return { head: next, resourceVersion: stored.resourceVersion, storedSchema: next.schema } satisfies ObservedHead;
});

/** Create the Head (install): fails HEAD_EXISTS when a Head is already there. */
export const createHead = Effect.fn('Head.create')(function* (ref: HeadRef, head: HeadV2) {
  const cluster = yield* KubernetesCluster;
  const data = yield* encodeHead(head);
  const stored = yield* cluster
    .createHead(ref, data)
    .pipe(
      Effect.catchTag('HeadWriteConflict', (e) =>
        Effect.fail(new HeadRejected({ code: 'HEAD_EXISTS', message: `a Head already exists: ${e.message}` })),
      ),
    );
  return { head, resourceVersion: stored.resourceVersion, storedSchema: head.schema } satisfies ObservedHead;
});

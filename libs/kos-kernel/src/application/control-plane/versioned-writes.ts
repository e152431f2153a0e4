// Writes bound to the version the caller read (C-05), shared by the kernel kinds' handlers (resources.ts) and the
// extension objects' (extension-writes.ts): an update at a version and a delete bound to it by a precondition; a
// version that moved is 409 `conflict` with the current object. The stored object's markers are KOS's and are kept.
import { Effect } from 'effect';
import type { KubeClientService, KubeObject } from '@homelab/kube';
import type { Accepted } from '../../api/http/bodies.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { parseIfMatch } from '../../domain/control-plane/requests.js';
import { MARKER_PREFIX } from '../../domain/markers.js';
import { ApiError, apiError, fromKube } from './errors.js';

/** The reference of a stored (or seen) object, with its uid and version when it has them. */
export const refOf = (o: {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name?: string;
    readonly namespace?: string;
    readonly uid?: string;
    readonly resourceVersion?: string;
  };
}): ObjectReference => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  name: o.metadata.name ?? '',
  ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
  ...(o.metadata.uid !== undefined ? { uid: o.metadata.uid } : {}),
  ...(o.metadata.resourceVersion !== undefined ? { resourceVersion: o.metadata.resourceVersion } : {}),
});

/** The marker entries of a stored object's labels or annotations (the adoption actions', never the user's). */
export const markersOf = (m: Readonly<Record<string, string>> | undefined): Record<string, string> =>
  Object.fromEntries(Object.entries(m ?? {}).filter(([k]) => k.startsWith(MARKER_PREFIX)));

/**
 * The version a PUT is bound to: `If-Match` or the body's `metadata.resourceVersion` (both given: they must agree);
 * neither is 428 `precondition_required`.
 */
export const updateVersion = (
  ifMatch: string | undefined,
  bodyVersion: unknown,
  ref: ObjectReference,
): Effect.Effect<string, ApiError> =>
  Effect.suspend(() => {
    const headerVersion = parseIfMatch(ifMatch);
    if (bodyVersion !== undefined && typeof bodyVersion !== 'string')
      return Effect.fail(
        apiError('invalid_field', 'validate', 'metadata.resourceVersion must be a string', { object: ref }),
      );
    if (headerVersion !== undefined && bodyVersion !== undefined && headerVersion !== bodyVersion)
      return Effect.fail(
        apiError(
          'invalid_field',
          'validate',
          `If-Match (${headerVersion}) and metadata.resourceVersion (${bodyVersion}) disagree`,
          { object: ref },
        ),
      );
    const version = headerVersion ?? bodyVersion;
    return version === undefined
      ? Effect.fail(
          apiError(
            'precondition_required',
            'validate',
            'PUT needs If-Match or metadata.resourceVersion (the version you read)',
            { object: ref },
          ),
        )
      : Effect.succeed(version);
  });

/** The version a DELETE is bound to: `If-Match`, required (428 `precondition_required` without). */
export const deleteVersion = (ifMatch: string | undefined, ref: ObjectReference): Effect.Effect<string, ApiError> =>
  Effect.suspend(() => {
    const version = parseIfMatch(ifMatch);
    return version === undefined
      ? Effect.fail(
          apiError('precondition_required', 'validate', 'DELETE needs If-Match (the version you read)', {
            object: ref,
          }),
        )
      : Effect.succeed(version);
  });

/** `stored` when it is at `version`; otherwise 409 `conflict` carrying the current object. */
export const storedAtVersion = (stored: KubeObject, version: string): Effect.Effect<KubeObject, ApiError> =>
  stored.metadata.resourceVersion === version
    ? Effect.succeed(stored)
    : Effect.fail(
        apiError('conflict', 'write', `the object is at version ${stored.metadata.resourceVersion}, not ${version}`, {
          object: refOf(stored),
          current: stored,
        }),
      );

/**
 * Replace the client-owned parts of `stored` (spec, the user's labels and annotations; markers kept) at `version`:
 * the API server refuses the update when the version moved meanwhile (Conflict → 409).
 */
export const updateAtVersion = (
  client: KubeClientService,
  stored: KubeObject,
  version: string,
  desired: {
    readonly spec: unknown;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  },
  fieldManager: string,
  ref: ObjectReference,
): Effect.Effect<Accepted, ApiError> =>
  client
    .update(
      {
        ...stored,
        metadata: {
          ...stored.metadata,
          resourceVersion: version,
          labels: { ...markersOf(stored.metadata.labels), ...(desired.labels ?? {}) },
          annotations: { ...markersOf(stored.metadata.annotations), ...(desired.annotations ?? {}) },
        },
        spec: desired.spec,
      },
      { fieldManager },
    )
    .pipe(
      Effect.map((updated): Accepted => ({ accepted: true, operation: 'update', object: refOf(updated) })),
      Effect.mapError((e) => fromKube(e, 'write', ref, true)),
    );

/**
 * DELETE `ref` bound to `version` by a precondition. When the version moved, the current object is read and the
 * answer is 409 `conflict` with it.
 */
export const deleteAtVersion = (
  client: KubeClientService,
  ref: ObjectReference,
  version: string,
): Effect.Effect<Accepted, ApiError> =>
  client.delete(ref, { preconditions: { resourceVersion: version } }).pipe(
    Effect.catchTag('Conflict', (e) =>
      client.get(ref).pipe(
        Effect.mapError((g) => fromKube(g, 'read', ref, false)),
        Effect.flatMap((current) =>
          Effect.fail(
            apiError('conflict', 'write', `the object changed since version ${version}: ${e.message}`, {
              object: refOf(current),
              current,
            }),
          ),
        ),
      ),
    ),
    Effect.map((result): Accepted => ({
      accepted: true,
      operation: 'delete',
      object: result.object !== undefined ? refOf(result.object) : ref,
    })),
    Effect.mapError((e) => (e instanceof ApiError ? e : fromKube(e, 'write', ref, true))),
  );

import { Schema } from 'effect';
import { Lock, Release, Role } from './identity.js';

/** A Kubernetes object as the manifest writes it: apiVersion, kind, metadata.name (and namespace), anything else. */
export const ManifestObjectBody = Schema.Struct(
  {
    apiVersion: Schema.String.pipe(Schema.minLength(1)),
    kind: Schema.String.pipe(Schema.minLength(1)),
    metadata: Schema.Struct(
      {
        name: Schema.String.pipe(Schema.minLength(1)),
        namespace: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
      },
      { key: Schema.String, value: Schema.Unknown },
    ),
  },
  { key: Schema.String, value: Schema.Unknown },
);
export type ManifestObjectBody = typeof ManifestObjectBody.Type;

export const ManifestObject = Schema.Struct({
  role: Schema.optional(Role),
  object: ManifestObjectBody,
});
export type ManifestObject = typeof ManifestObject.Type;

/** The manifest content whose canonical-JSON digest is the lock's `manifestDigest`. Objects are in apply order. */
export const Manifest = Schema.Struct({
  schema: Schema.Literal('qinglong.deployment.manifest.v1'),
  release: Release,
  catalogue: Schema.String.pipe(Schema.minLength(1)),
  objects: Schema.Array(ManifestObject).pipe(Schema.minItems(1)),
});
export type Manifest = typeof Manifest.Type;

/** A manifest together with the lock that binds it (ADR-0433: the catalogue-bound lock). */
export const LockedManifest = Schema.Struct({
  manifest: Manifest,
  lock: Lock,
});
export type LockedManifest = typeof LockedManifest.Type;

// The KubeClient port: dynamic Kubernetes objects addressed by apiVersion/kind(/namespace/name), typed errors,
// server-side apply, preconditioned delete, watch and discovery. Implemented by adapter/kubernetes/client.ts.
import { Context, type Effect, type Stream } from 'effect';
import type { DeleteOptions, KubeList, KubeObject, PartialObjectMetadata, Status, WatchEvent } from '../api/objects.js';
import type { KindQuery } from '../domain/discovery.js';
import type { KubeError } from '../domain/errors.js';
import type { ResourceInfo } from '../domain/resources.js';

/** One object: apiVersion ("v1", "apps/v1"), kind, namespace (omit for cluster-scoped kinds), name. */
export interface ObjectRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace?: string;
  readonly name: string;
}

/** A collection: all objects of a kind, in one namespace or (namespace omitted) across all namespaces. */
export interface CollectionRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace?: string;
}

export interface ListOptions {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  readonly limit?: number;
  readonly continue?: string;
  readonly resourceVersion?: string;
  readonly resourceVersionMatch?: 'Exact' | 'NotOlderThan';
}

export interface WriteOptions {
  /** Server-side dry run: validated and admitted, not persisted. */
  readonly dryRun?: boolean;
  readonly fieldManager?: string;
}

export interface ApplyOptions {
  /** Required: the field manager that owns the applied fields. */
  readonly fieldManager: string;
  /** Take ownership of fields other managers own instead of failing with Conflict. */
  readonly force?: boolean;
  readonly dryRun?: boolean;
  /** Apply to the status subresource. */
  readonly subresource?: 'status';
}

export type JsonPatchOperation =
  | { readonly op: 'add' | 'replace' | 'test'; readonly path: string; readonly value: unknown }
  | { readonly op: 'remove'; readonly path: string }
  | { readonly op: 'move' | 'copy'; readonly from: string; readonly path: string };

export type Patch =
  /** RFC 7386 JSON merge patch. */
  | { readonly type: 'merge'; readonly patch: Record<string, unknown> }
  /** RFC 6902 JSON patch (not idempotent, never retried except on 429). */
  | { readonly type: 'json'; readonly patch: ReadonlyArray<JsonPatchOperation> };

export interface PatchOptions extends WriteOptions {
  readonly subresource?: 'status';
}

export interface WatchOptions {
  readonly resourceVersion?: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  /** Ask for BOOKMARK events (default true). */
  readonly allowWatchBookmarks?: boolean;
  /** Server-side watch length; the stream ends when it passes (default 300 s). */
  readonly timeoutSeconds?: number;
}

/** What a delete did: gone at once, or still present (finalizers / foreground) with deletionTimestamp set. */
export type DeleteResult =
  | { readonly _tag: 'Deleted'; readonly object?: KubeObject; readonly status?: Status }
  | { readonly _tag: 'Pending'; readonly object: KubeObject };

export interface Discovery {
  /** Resolve a kind (optionally restricted to group/version) to its resource; ambiguity is an error. */
  readonly resolve: (q: KindQuery) => Effect.Effect<ResourceInfo, KubeError>;
  /** The resource behind an exact apiVersion + kind (what every object call uses). */
  readonly forObject: (apiVersion: string, kind: string) => Effect.Effect<ResourceInfo, KubeError>;
  /** Forget the cached discovery documents (after installing a CRD, say). Misses refresh on their own once. */
  readonly invalidate: Effect.Effect<void>;
}

export interface KubeClientService {
  readonly server: string;
  readonly get: <A extends KubeObject = KubeObject>(ref: ObjectRef) => Effect.Effect<A, KubeError>;
  /** One page (use limit/continue) or the whole collection. */
  readonly list: <A extends KubeObject = KubeObject>(
    ref: CollectionRef,
    options?: ListOptions,
  ) => Effect.Effect<KubeList<A>, KubeError>;
  /** Follow continue tokens until the collection is complete (`limit` is the page size). */
  readonly listAll: <A extends KubeObject = KubeObject>(
    ref: CollectionRef,
    options?: Omit<ListOptions, 'continue'>,
  ) => Effect.Effect<KubeList<A>, KubeError>;
  readonly create: <A extends KubeObject>(object: A, options?: WriteOptions) => Effect.Effect<A, KubeError>;
  /** Replace the object; `metadata.resourceVersion` is required (optimistic concurrency ⇒ Conflict if stale). */
  readonly update: <A extends KubeObject>(object: A, options?: WriteOptions) => Effect.Effect<A, KubeError>;
  /** Replace the status subresource; `metadata.resourceVersion` is required. */
  readonly updateStatus: <A extends KubeObject>(object: A, options?: WriteOptions) => Effect.Effect<A, KubeError>;
  /** Server-side apply (application/apply-patch+yaml) under a named field manager. */
  readonly apply: <A extends KubeObject>(object: A, options: ApplyOptions) => Effect.Effect<A, KubeError>;
  readonly patch: <A extends KubeObject = KubeObject>(
    ref: ObjectRef,
    patch: Patch,
    options?: PatchOptions,
  ) => Effect.Effect<A, KubeError>;
  readonly delete: (ref: ObjectRef, options?: DeleteOptions) => Effect.Effect<DeleteResult, KubeError>;
  /** Raw watch events from `resourceVersion`; ends when the server closes the watch. ERROR events fail typed (410 ⇒ Gone). */
  readonly watch: <A extends KubeObject = KubeObject>(
    ref: CollectionRef,
    options?: WatchOptions,
  ) => Stream.Stream<WatchEvent<A>, KubeError>;
  /**
   * Metadata-only reads (client-go's metadata client): the server is asked for PartialObjectMetadata(List) and every
   * answer — also a server's plain-JSON fallback with whole objects — is cut to `metadata` before it is returned, so
   * e.g. a Secret's `data` never leaves this client. Items carry the collection's apiVersion/kind.
   */
  readonly getMetadata: (ref: ObjectRef) => Effect.Effect<PartialObjectMetadata, KubeError>;
  readonly listMetadata: (
    ref: CollectionRef,
    options?: ListOptions,
  ) => Effect.Effect<KubeList<PartialObjectMetadata>, KubeError>;
  readonly listAllMetadata: (
    ref: CollectionRef,
    options?: Omit<ListOptions, 'continue'>,
  ) => Effect.Effect<KubeList<PartialObjectMetadata>, KubeError>;
  readonly watchMetadata: (
    ref: CollectionRef,
    options?: WatchOptions,
  ) => Stream.Stream<WatchEvent<PartialObjectMetadata>, KubeError>;
  readonly discovery: Discovery;
}

export class KubeClient extends Context.Tag('@homelab/kube/KubeClient')<KubeClient, KubeClientService>() {}

import { Context, Data, type Effect, type Option } from 'effect';
import type { HeadRef } from '../api/identity.js';
import type { DeleteOptions } from '../api/retirement.js';
import type { ApiResource } from '../domain/discovery.js';
import type { GuardFailed, RequestNotAllowed } from '../domain/errors.js';
import type { FileStat } from '../domain/guards.js';
import type { LiveObject } from '../domain/target-checks.js';

/** A resource path as discovery resolved it. `namespace` is absent for cluster-scoped resources. */
export interface ResourceRef {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly namespace?: string;
  readonly name: string;
}

/** The Head ConfigMap as stored: its opaque resourceVersion (the CAS token) and its data. */
export interface StoredHead {
  readonly resourceVersion: string;
  readonly data: Readonly<Record<string, string>>;
}

/** A request to the API server failed in a way the ceremony does not interpret (network, 5xx, 403, …). */
export class ClusterRequestFailed extends Data.TaggedError('ClusterRequestFailed')<{
  readonly code: 'CLUSTER_REQUEST_FAILED';
  readonly operation: string;
  readonly status?: number;
  readonly message: string;
}> {}

/** The API server refused a DELETE (dry-run or real): 409 = a precondition failed, 404 = not found. */
export class DeleteRefused extends Data.TaggedError('DeleteRefused')<{
  readonly status: number;
  readonly reason: string;
  readonly message: string;
}> {}

/** A Head create found an existing ConfigMap, or a Head update's resourceVersion was stale (409). */
export class HeadWriteConflict extends Data.TaggedError('HeadWriteConflict')<{
  readonly message: string;
}> {}

/**
 * The Kubernetes API as the ceremony uses it (a request outside the client's allow-list fails RequestNotAllowed
 * before it is sent): only these operations, each one request (or one discovery read).
 * The real adapter is built on `@homelab/kube`; it must send exactly what is described here and nothing else.
 */
export class KubernetesCluster extends Context.Tag('@homelab/deployment-ceremony/KubernetesCluster')<
  KubernetesCluster,
  {
    /** GET /api/v1/namespaces/kube-system → metadata.uid. */
    readonly clusterUid: Effect.Effect<string, ClusterRequestFailed | RequestNotAllowed>;
    /** The resource list of one group/version (GET /api/v1 or /apis/<group>/<version>). */
    readonly discover: (
      group: string,
      version: string,
    ) => Effect.Effect<ReadonlyArray<ApiResource>, ClusterRequestFailed | RequestNotAllowed>;
    /** GET one object; `None` on 404. */
    readonly get: (
      ref: ResourceRef,
    ) => Effect.Effect<Option.Option<LiveObject>, ClusterRequestFailed | RequestNotAllowed>;
    /** DELETE one object with exactly these DeleteOptions (dry-run when `options.dryRun` is set). */
    readonly delete: (
      ref: ResourceRef,
      options: DeleteOptions,
    ) => Effect.Effect<void, DeleteRefused | ClusterRequestFailed | RequestNotAllowed>;
    /** Server-side apply (PATCH application/apply-patch+yaml) under field manager `qinglong3-catalog-lock`, force=false. */
    readonly apply: (
      ref: ResourceRef,
      body: Readonly<Record<string, unknown>>,
    ) => Effect.Effect<LiveObject, ClusterRequestFailed | RequestNotAllowed>;
    /** GET /api/v1/namespaces/<Head namespace>: does it exist? */
    readonly headNamespaceExists: (ref: HeadRef) => Effect.Effect<boolean, ClusterRequestFailed | RequestNotAllowed>;
    /** POST /api/v1/namespaces creating the Head's namespace (install --create-namespace only; exists = success). */
    readonly createHeadNamespace: (ref: HeadRef) => Effect.Effect<void, ClusterRequestFailed | RequestNotAllowed>;
    /** GET the Head ConfigMap; `None` on 404. */
    readonly readHead: (
      ref: HeadRef,
    ) => Effect.Effect<Option.Option<StoredHead>, ClusterRequestFailed | RequestNotAllowed>;
    /** POST the Head ConfigMap (fails with HeadWriteConflict if it exists). */
    readonly createHead: (
      ref: HeadRef,
      data: Readonly<Record<string, string>>,
    ) => Effect.Effect<StoredHead, HeadWriteConflict | ClusterRequestFailed | RequestNotAllowed>;
    /** PUT the Head ConfigMap with metadata.resourceVersion = expected (HeadWriteConflict on 409). */
    readonly replaceHead: (
      ref: HeadRef,
      expectedResourceVersion: string,
      data: Readonly<Record<string, string>>,
    ) => Effect.Effect<StoredHead, HeadWriteConflict | ClusterRequestFailed | RequestNotAllowed>;
  }
>() {}

/** The receipt store refused or failed. */
export class ReceiptStoreFailed extends Data.TaggedError('ReceiptStoreFailed')<{
  readonly code: 'RECEIPT_STORE_FAILED';
  readonly key: string;
  readonly message: string;
}> {}

/** A receipt exists under the key already (create-exclusive). */
export class ReceiptExists extends Data.TaggedError('ReceiptExists')<{ readonly key: string }> {
  override get message(): string {
    return `a receipt exists under ${this.key}`;
  }
}

/** Where receipts are written: create-exclusive, never overwritten. */
export class ReceiptStore extends Context.Tag('@homelab/deployment-ceremony/ReceiptStore')<
  ReceiptStore,
  {
    /** Write `bytes` under `key` only if nothing is there (O_CREAT|O_EXCL); fails with ReceiptExists otherwise. */
    readonly createExclusive: (key: string, bytes: string) => Effect.Effect<void, ReceiptExists | ReceiptStoreFailed>;
    readonly read: (key: string) => Effect.Effect<Option.Option<string>, ReceiptStoreFailed>;
  }
>() {}

/** The operator machine facts the guards check. */
export class OperatorHost extends Context.Tag('@homelab/deployment-ceremony/OperatorHost')<
  OperatorHost,
  {
    /** lstat of the named kubeconfig (never an ambient one); a missing file is GuardFailed KUBECONFIG_NOT_PRIVATE. */
    readonly kubeconfig: Effect.Effect<{ readonly path: string; readonly stat: FileStat }, GuardFailed>;
    /** The calling user's uid (process.getuid()). */
    readonly callerUid: Effect.Effect<number>;
  }
>() {}

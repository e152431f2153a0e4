// The real KubernetesCluster: every port operation is exactly one HTTP request to the API server, sent through
// @homelab/kube's Transport (kubeconfig loading, TLS, credentials, keep-alive agent) after the request allow-list
// (domain/request-allow-list.ts) accepted it. Answers are classified with @homelab/kube's typed errors.
//
// Why the Transport and not KubeClient's object methods: KubeClient addresses objects by apiVersion/kind through its
// own discovery cache (and fills in requests of its own: discovery loads, a re-read after a Conflict, retries),
// while the ceremony must send exactly the plural its own discovery step resolved, the DeleteOptions exactly as
// given, each request once, and nothing the allow-list has not seen (decision 0070).
import { KubeConfig } from '@kubernetes/client-node';
import { classify, makeTransport, parseStatus, type KubeError, type Transport } from '@homelab/kube';
import { Effect, Either, Layer, Option, ParseResult, Schema, type Scope } from 'effect';
import { ObjectMeta } from '@homelab/kube/objects';
import { FIELD_MANAGER, type HeadRef } from '../../api/identity.js';
import type { DeleteOptions } from '../../api/retirement.js';
import {
  ClusterRequestFailed,
  DeleteRefused,
  HeadWriteConflict,
  KubernetesCluster,
  type ResourceRef,
  type StoredHead,
} from '../../application/ports.js';
import type { ApiResource } from '../../domain/discovery.js';
import { type GuardFailed, RequestNotAllowed } from '../../domain/errors.js';
import { checkKubeconfigPrivate } from '../../domain/guards.js';
import { callerUid, statKubeconfig } from '../host/operator-host.js';
import type { ManagedFieldsEntry } from '../../domain/ownership.js';
import { checkRequestAllowed, type ClientMode } from '../../domain/request-allow-list.js';
import type { LiveObject } from '../../domain/target-checks.js';

export interface ClusterOptions {
  /** `retirement` (GET, DELETE, Head PUT) or `transition` (GET, apply PATCH, Head POST/PUT). */
  readonly mode: ClientMode;
  /** The Head ConfigMap: the only object the client may PUT (and, in transition mode, POST). */
  readonly head: HeadRef;
  /** Per-request deadline (default 30 s). */
  readonly requestTimeoutMs?: number;
}

/** One request as sent (after the allow-list): for tests and the CLI's progress output. */
export interface SentRequest {
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
}

const prefix = (group: string, version: string) => (group === '' ? `/api/${version}` : `/apis/${group}/${version}`);

/** The REST path of an object whose plural discovery resolved (namespace absent = cluster-scoped). */
export const objectPath = (ref: ResourceRef): string =>
  `${prefix(ref.group, ref.version)}${ref.namespace === undefined ? '' : `/namespaces/${ref.namespace}`}/${ref.plural}/${ref.name}`;

const headPath = (ref: HeadRef) => `/api/v1/namespaces/${ref.namespace}/configmaps/${ref.name}`;

interface Answer {
  readonly status: number;
  readonly json: unknown;
  readonly error?: KubeError;
}

// The answers the ceremony reads, decoded at this edge with @homelab/kube's ObjectMeta (one Schema for the wire
// shape); an answer that does not decode fails closed as ClusterRequestFailed instead of being read as empty.
const ManagedFieldsEntrySchema = Schema.Struct({
  manager: Schema.optional(Schema.String),
  operation: Schema.optional(Schema.String),
  apiVersion: Schema.optional(Schema.String),
  fieldsType: Schema.optional(Schema.String),
  fieldsV1: Schema.optional(Schema.Unknown),
});

const LiveObjectAnswer = Schema.Struct(
  {
    metadata: Schema.Struct({
      ...ObjectMeta.fields,
      uid: Schema.NonEmptyString,
      resourceVersion: Schema.NonEmptyString,
      managedFields: Schema.optional(Schema.Array(ManagedFieldsEntrySchema)),
    }),
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown }),
);

const HeadAnswer = Schema.Struct({
  metadata: Schema.Struct({ resourceVersion: Schema.NonEmptyString }),
  data: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
});

const NamespaceAnswer = Schema.Struct({ metadata: Schema.Struct({ uid: Schema.NonEmptyString }) });

const DiscoveryAnswer = Schema.Struct({
  resources: Schema.Array(Schema.Struct({ name: Schema.String, kind: Schema.String, namespaced: Schema.Boolean })),
});

const decodeOptions = { onExcessProperty: 'preserve' } as const;

/** The fields of a GET/apply answer the ceremony reads (the whole body is kept for the expected-field check). */
export const liveObjectOf = (json: unknown): Either.Either<LiveObject, ParseResult.ParseError> =>
  Either.map(Schema.decodeUnknownEither(LiveObjectAnswer, decodeOptions)(json), (o) => ({
    uid: o.metadata.uid,
    resourceVersion: o.metadata.resourceVersion,
    ...(o.metadata.deletionTimestamp === undefined ? {} : { deletionTimestamp: o.metadata.deletionTimestamp }),
    finalizers: o.metadata.finalizers ?? [],
    managedFields: (o.metadata.managedFields ?? []) as ReadonlyArray<ManagedFieldsEntry>,
    body: o,
  }));

const storedHeadOf = (json: unknown): Either.Either<StoredHead, ParseResult.ParseError> =>
  Either.map(Schema.decodeUnknownEither(HeadAnswer, decodeOptions)(json), (o) => ({
    resourceVersion: o.metadata.resourceVersion,
    data: o.data ?? {},
  }));

/** Build the service over a Transport (the layer below loads it from the named kubeconfig). */
export const makeKubernetesCluster = (transport: Transport, options: ClusterOptions, sent?: Array<SentRequest>) => {
  const timeoutMs = options.requestTimeoutMs ?? 30_000;

  const failed = (operation: string, status: number | undefined, message: string) =>
    new ClusterRequestFailed({
      code: 'CLUSTER_REQUEST_FAILED',
      operation,
      ...(status === undefined ? {} : { status }),
      message,
    });

  /** Check the allow-list, send once (no retries), parse the answer. Non-2xx answers carry their typed KubeError. */
  const send = (
    operation: string,
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
  ): Effect.Effect<Answer, ClusterRequestFailed | RequestNotAllowed> =>
    Effect.gen(function* () {
      const allowed = checkRequestAllowed(options.mode, { method, path }, options.head);
      if (allowed._tag === 'Left') return yield* allowed.left;
      sent?.push({ method, path, ...(body === undefined ? {} : { body }) });
      const target = { verb: operation, path };
      const answer = yield* transport
        .request({
          method,
          path,
          timeoutMs,
          target,
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          ...(contentType === undefined ? {} : { contentType }),
        })
        .pipe(Effect.mapError((e) => failed(operation, undefined, `${method} ${path}: ${e.message}`)));
      if (answer.status >= 200 && answer.status < 300) {
        try {
          return { status: answer.status, json: JSON.parse(answer.body) as unknown };
        } catch {
          return yield* failed(operation, answer.status, `${method} ${path}: the answer is not JSON`);
        }
      }
      const status = parseStatus(answer.body);
      return { status: answer.status, json: status, error: classify(answer.status, status, target, answer.retryAfter) };
    });

  /** Decode an answer; a shape the ceremony cannot read fails closed, naming what was expected. */
  const decoded = <A>(
    operation: string,
    a: Answer,
    what: string,
    decode: (u: unknown) => Either.Either<A, ParseResult.ParseError>,
  ) =>
    Either.match(decode(a.json), {
      onLeft: (e) =>
        Effect.fail(
          failed(operation, a.status, `the answer is not ${what}: ${ParseResult.TreeFormatter.formatErrorSync(e)}`),
        ),
      onRight: (v) => Effect.succeed(v),
    });

  const unexpected = (operation: string, a: Answer) =>
    failed(operation, a.status, `${a.error?._tag ?? 'HTTP'} ${a.status}: ${a.error?.message ?? 'unexpected answer'}`);

  const clusterUid = Effect.gen(function* () {
    const a = yield* send('cluster-uid', 'GET', '/api/v1/namespaces/kube-system');
    if (a.error) return yield* unexpected('cluster-uid', a);
    const ns = yield* decoded(
      'cluster-uid',
      a,
      'a namespace with metadata.uid',
      Schema.decodeUnknownEither(NamespaceAnswer, decodeOptions),
    );
    return ns.metadata.uid;
  });

  const discover = (group: string, version: string) =>
    Effect.gen(function* () {
      const a = yield* send('discover', 'GET', prefix(group, version));
      if (a.error) return yield* unexpected('discover', a);
      const list = yield* decoded(
        'discover',
        a,
        `the resource list of ${prefix(group, version)}`,
        Schema.decodeUnknownEither(DiscoveryAnswer, decodeOptions),
      );
      return list.resources.map((r): ApiResource => ({ name: r.name, kind: r.kind, namespaced: r.namespaced }));
    });

  const get = (ref: ResourceRef) =>
    Effect.gen(function* () {
      const a = yield* send('get', 'GET', objectPath(ref));
      if (a.error?._tag === 'NotFound') return Option.none<LiveObject>();
      if (a.error) return yield* unexpected('get', a);
      return Option.some(yield* decoded('get', a, 'an object with uid and resourceVersion', liveObjectOf));
    });

  const del = (ref: ResourceRef, deleteOptions: DeleteOptions) =>
    Effect.gen(function* () {
      const operation = deleteOptions.dryRun ? 'dry-run-delete' : 'delete';
      // The body is the DeleteOptions exactly as given (plus its TypeMeta): Background, preconditions, dryRun.
      const a = yield* send(operation, 'DELETE', objectPath(ref), {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        ...deleteOptions,
      });
      if (a.error) {
        if (a.status === 404 || a.status === 409 || a.status === 422 || a.status === 400) {
          return yield* new DeleteRefused({
            status: a.status,
            reason: a.error.status?.reason ?? a.error._tag,
            message: a.error.message,
          });
        }
        return yield* unexpected(operation, a);
      }
    });

  const apply = (ref: ResourceRef, body: Readonly<Record<string, unknown>>) =>
    Effect.gen(function* () {
      const path = `${objectPath(ref)}?fieldManager=${FIELD_MANAGER}&force=false`;
      const a = yield* send('apply', 'PATCH', path, body, 'application/apply-patch+yaml');
      if (a.error) return yield* unexpected('apply', a);
      return yield* decoded('apply', a, 'an object with uid and resourceVersion', liveObjectOf);
    });

  const headNamespaceExists = (ref: HeadRef) =>
    Effect.gen(function* () {
      const a = yield* send('read-head-namespace', 'GET', `/api/v1/namespaces/${ref.namespace}`);
      if (a.error?._tag === 'NotFound') return false;
      if (a.error) return yield* unexpected('read-head-namespace', a);
      return true;
    });

  const createHeadNamespace = (ref: HeadRef) =>
    Effect.gen(function* () {
      const a = yield* send('create-head-namespace', 'POST', '/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: ref.namespace },
      });
      if (a.error && a.error._tag !== 'AlreadyExists') return yield* unexpected('create-head-namespace', a);
    });

  const readHead = (ref: HeadRef) =>
    Effect.gen(function* () {
      const a = yield* send('read-head', 'GET', headPath(ref));
      if (a.error?._tag === 'NotFound') return Option.none<StoredHead>();
      if (a.error) return yield* unexpected('read-head', a);
      return Option.some(yield* decoded('read-head', a, 'a ConfigMap with a resourceVersion', storedHeadOf));
    });

  const headBody = (ref: HeadRef, data: Readonly<Record<string, string>>, resourceVersion?: string) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: ref.name,
      namespace: ref.namespace,
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
      labels: { 'app.kubernetes.io/managed-by': 'qinglong-deployment-ceremony' },
    },
    data,
  });

  const createHead = (ref: HeadRef, data: Readonly<Record<string, string>>) =>
    Effect.gen(function* () {
      const a = yield* send(
        'create-head',
        'POST',
        `/api/v1/namespaces/${ref.namespace}/configmaps`,
        headBody(ref, data),
      );
      if (a.error?._tag === 'AlreadyExists') return yield* new HeadWriteConflict({ message: a.error.message });
      if (a.error) return yield* unexpected('create-head', a);
      return yield* decoded('create-head', a, 'a ConfigMap with a resourceVersion', storedHeadOf);
    });

  const replaceHead = (ref: HeadRef, expectedResourceVersion: string, data: Readonly<Record<string, string>>) =>
    Effect.gen(function* () {
      const a = yield* send('replace-head', 'PUT', headPath(ref), headBody(ref, data, expectedResourceVersion));
      if (a.error?._tag === 'Conflict') return yield* new HeadWriteConflict({ message: a.error.message });
      if (a.error) return yield* unexpected('replace-head', a);
      return yield* decoded('replace-head', a, 'a ConfigMap with a resourceVersion', storedHeadOf);
    });

  return KubernetesCluster.of({
    clusterUid,
    discover,
    get,
    delete: del,
    apply,
    headNamespaceExists,
    createHeadNamespace,
    readHead,
    createHead,
    replaceHead,
  });
};

/** @homelab/kube's Transport for the named kubeconfig file only (its current context; no ambient KUBECONFIG/HOME). */
export const transportFromKubeconfig = (
  kubeconfigPath: string,
): Effect.Effect<Transport, ClusterRequestFailed | GuardFailed, Scope.Scope> =>
  Effect.gen(function* () {
    // The owner-private guard runs before the file is read at all (the use cases check it again, decision 0047).
    const { stat } = yield* statKubeconfig(kubeconfigPath);
    yield* checkKubeconfigPrivate(kubeconfigPath, stat, callerUid());
    const kc = yield* Effect.try({
      try: () => {
        const config = new KubeConfig();
        config.loadFromFile(kubeconfigPath);
        return config;
      },
      catch: (e) =>
        new ClusterRequestFailed({
          code: 'CLUSTER_REQUEST_FAILED',
          operation: 'load-kubeconfig',
          message: `${kubeconfigPath}: ${(e as Error).message}`,
        }),
    });
    return yield* Effect.acquireRelease(
      makeTransport(kc, { maxSockets: 1, userAgent: 'qinglong-deployment-ceremony' }).pipe(
        Effect.mapError(
          (e) => new ClusterRequestFailed({ code: 'CLUSTER_REQUEST_FAILED', operation: 'connect', message: e.message }),
        ),
      ),
      (t) => t.close,
    );
  });

/**
 * KubernetesCluster over the named kubeconfig; the transport's sockets close with the layer's scope. `wrap` lets a
 * test put a network fault between the client and the real server (e.g. a DELETE whose answer is lost).
 */
export const KubernetesClusterLive = (
  kubeconfigPath: string,
  options: ClusterOptions,
  extra: { readonly wrap?: (t: Transport) => Transport; readonly sent?: Array<SentRequest> } = {},
): Layer.Layer<KubernetesCluster, ClusterRequestFailed | GuardFailed> =>
  Layer.scoped(
    KubernetesCluster,
    Effect.map(transportFromKubeconfig(kubeconfigPath), (t) =>
      makeKubernetesCluster(extra.wrap ? extra.wrap(t) : t, options, extra.sent),
    ),
  );

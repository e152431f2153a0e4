// Extension object kinds through the control plane (seed 000 §6.12: "对象类解析供控制面判断某个扩展类是否正在被服务";
// decision 0341): `GET /api/v1/resources/<plural or kind>?apiVersion=<group>/<version>` for a group that is not
// kos.tsic.top is answered from the API server only while an activated component declares that kind (the Registry
// the Installer published); otherwise `capability_missing`, whether or not the CRD is still installed (a disabled
// component keeps its CRD and objects). Reads only: extension writes go through the extension's controllers.
import { Clock, Effect, Option, Ref } from 'effect';
import { KubeClient, type KubeObject } from '@homelab/kube';
import type { ListPage, Projection } from '../../api/http/bodies.js';
import { project } from '../../domain/control-plane/projection.js';
import { isNamespaceName, isObjectName } from '../../domain/control-plane/requests.js';
import { redactObject } from '../../domain/control-plane/sensitive.js';
import type { ServedKind } from '../../domain/extension/registry.js';
import { ExtensionRegistry } from '../extension/services.js';
import { ControllerHealth } from '../extension/controller-set.js';
import { projectedHealth } from '../../domain/extension/controllers.js';
import type { HealthState } from '../../domain/state.js';
import { apiError, fromKube } from './errors.js';
import { Authorizer, ControlPlaneConfig } from './services.js';

/** The served extension kind for `apiVersion` + kind/plural, or `capability_missing`. */
export const servedExtensionKind = (segment: string, apiVersion: string) =>
  Effect.gen(function* () {
    const registry = yield* Effect.serviceOption(ExtensionRegistry);
    const served = Option.isSome(registry)
      ? (yield* Ref.get(registry.value)).registry.resolveKind(apiVersion, segment)
      : undefined;
    if (served === undefined)
      return yield* apiError(
        'capability_missing',
        'route',
        `${apiVersion} ${segment} is not served: no activated component declares it (extension kinds are served only while their component is activated)`,
      );
    return served;
  });

const namespaceOf = (kind: ServedKind, namespace: string | undefined) =>
  Effect.suspend(() => {
    if (namespace === undefined || namespace === '') return Effect.succeed(undefined);
    if (kind.scope === 'Cluster')
      return Effect.fail(apiError('invalid_parameter', 'route', `${kind.kind} is cluster-scoped: no namespace`));
    if (!isNamespaceName(namespace))
      return Effect.fail(apiError('invalid_parameter', 'route', `namespace "${namespace}" is not a DNS label`));
    return Effect.succeed(namespace);
  });

const withoutManagedFields = (o: KubeObject): KubeObject => {
  if (o.metadata.managedFields === undefined) return o;
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { managedFields, ...metadata } = o.metadata;
  return { ...o, metadata };
};

/**
 * C-20: while a controller managing the kind is over its failure threshold, its objects' health is projected
 * `Unknown` (reason `ControllerUnavailable`); other kinds keep their own (decision 0342).
 */
const withControllerHealth = (kind: ServedKind, objects: ReadonlyArray<KubeObject>) =>
  Effect.gen(function* () {
    const health = yield* Effect.serviceOption(ControllerHealth);
    if (Option.isNone(health)) return objects;
    const records = [...(yield* Ref.get(health.value)).values()];
    return objects.map((o) => {
      const status = (o['status'] ?? {}) as { health?: { state?: HealthState } };
      const own = status.health?.state ?? 'Healthy';
      if (projectedHealth({ group: kind.group, kind: kind.kind, health: own }, records) !== 'Unknown') return o;
      return {
        ...o,
        status: { ...status, health: { state: 'Unknown', reason: 'ControllerUnavailable' } },
      } as KubeObject;
    });
  });

const projectAll = (kind: ServedKind, stored: ReadonlyArray<KubeObject>, readAtMs: number) =>
  Effect.gen(function* () {
    const config = yield* ControlPlaneConfig;
    const now = yield* Clock.currentTimeMillis;
    const objects = yield* withControllerHealth(kind, stored);
    return objects.map((o): Projection =>
      project(redactObject(withoutManagedFields(o)), {
        readAtMs,
        nowMs: now,
        thresholdMs: config.staleThresholdMs,
        sources: [],
      }),
    );
  });

const authorizeRead = (
  input: { readonly authorization?: string },
  verb: 'list' | 'get',
  kind: ServedKind,
  namespace?: string,
  name?: string,
) =>
  Effect.flatMap(Authorizer, (a) =>
    a.authorize({
      verb,
      ...(input.authorization !== undefined ? { authorization: input.authorization } : {}),
      kind: kind.kind,
      ...(namespace !== undefined ? { namespace } : {}),
      ...(name !== undefined ? { name } : {}),
    }),
  );

export interface ExtensionListInput {
  readonly authorization?: string;
  readonly kind: string;
  readonly apiVersion: string;
  readonly namespace?: string;
  readonly limit?: string;
  readonly labelSelector?: string;
}

/** One page of an extension kind's objects (`continue` is not offered: the page is the first `limit` objects). */
export const listExtensionResources = (input: ExtensionListInput) =>
  Effect.gen(function* () {
    const kind = yield* servedExtensionKind(input.kind, input.apiVersion);
    const namespace = yield* namespaceOf(kind, input.namespace);
    yield* authorizeRead(input, 'list', kind, namespace);
    const config = yield* ControlPlaneConfig;
    let limit = config.defaultPageSize;
    if (input.limit !== undefined) {
      const n = Number(input.limit);
      if (!/^[0-9]+$/.test(input.limit) || n < 1 || n > config.maxPageSize)
        return yield* apiError(
          'invalid_parameter',
          'route',
          `limit must be an integer from 1 to ${config.maxPageSize}, not "${input.limit}"`,
        );
      limit = n;
    }
    const client = yield* KubeClient;
    const page = yield* client
      .list(
        { apiVersion: input.apiVersion, kind: kind.kind, ...(namespace !== undefined ? { namespace } : {}) },
        {
          limit,
          ...(input.labelSelector !== undefined && input.labelSelector.trim() !== ''
            ? { labelSelector: input.labelSelector }
            : {}),
        },
      )
      .pipe(Effect.mapError((e) => fromKube(e, 'read', undefined, false)));
    const items = yield* projectAll(kind, page.items, yield* Clock.currentTimeMillis);
    const result: ListPage = { kind: kind.kind, items };
    return result;
  });

export interface ExtensionGetInput {
  readonly authorization?: string;
  readonly kind: string;
  readonly apiVersion: string;
  readonly name: string;
  readonly namespace?: string;
}

export const getExtensionResource = (input: ExtensionGetInput) =>
  Effect.gen(function* () {
    const kind = yield* servedExtensionKind(input.kind, input.apiVersion);
    const namespace = yield* namespaceOf(kind, input.namespace);
    if (!isObjectName(input.name))
      return yield* apiError('invalid_parameter', 'route', `name "${input.name}" is not a DNS subdomain`);
    if (kind.scope === 'Namespaced' && namespace === undefined)
      return yield* apiError('invalid_parameter', 'route', `${kind.kind} is namespaced: give the namespace`);
    yield* authorizeRead(input, 'get', kind, namespace, input.name);
    const ref = {
      apiVersion: input.apiVersion,
      kind: kind.kind,
      name: input.name,
      ...(namespace !== undefined ? { namespace } : {}),
    };
    const client = yield* KubeClient;
    const object = yield* client.get(ref).pipe(Effect.mapError((e) => fromKube(e, 'read', ref, false)));
    const [projection] = yield* projectAll(kind, [object], yield* Clock.currentTimeMillis);
    return projection as Projection;
  });

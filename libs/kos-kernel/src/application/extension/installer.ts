// `Installer`, the component reconciler (seed 000 pkg/extension: "Installer读取集群里带归属标记的组件，经ArtifactSource取回
// 工件，摘要不匹配即拒绝…"; digest §6.12; decisions 0300, 0303, 0304). One round for a SystemComponent key:
//   1. read every SystemComponent carrying an ownership marker (the load set), fetch and verify each managed one's
//      package through ArtifactSource (sha256 over the exact bytes; verified packages cached by digest), check the
//      declarations, and run the pure load pipeline (first-installed per id, framework, activation fixpoint,
//      collisions); publish the result and its Registry to ExtensionRegistry;
//   2. for the key's component: on the first install round add the deletion-gate finalizer; write its status only
//      when it changed; a deleting component leaves the load set and its finalizer is released.
import { Clock, Effect, Either, Ref, Schema } from 'effect';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { ComponentPackage, PackageDocument } from '../../api/extension/declaration.js';
import { KOS_GROUP, KOS_STORAGE_VERSION } from '../../api/group.js';
import { checkDeclaration } from '../../domain/extension/declaration.js';
import {
  type ComponentFacts,
  loadExtensions,
  type LoadResult,
  type PackageFacts,
} from '../../domain/extension/load.js';
import { buildRegistry } from '../../domain/extension/registry.js';
import { extensionCrdsOf } from '../../domain/extension/crd.js';
import { extensionRole, extensionRoleName, extensionRoleOf } from '../../domain/extension/rbac.js';
import { type LeftoverObject, leftoverConfigMap, uninstallKinds } from '../../domain/extension/uninstall.js';
import { COMPONENT_FINALIZER, componentStatus } from '../../domain/extension/status.js';
import { uninstallBlockers } from '../../domain/extension/blockers.js';
import { ownershipOf } from '../../domain/markers.js';
import type { Condition } from '../../domain/state.js';
import { admit, fieldManagerOf, type WriteRejected } from '../../domain/write-path.js';
import { type KosRound, startKosController } from '../kernel.js';
import type { KernelConfig } from '../../domain/reconcile.js';
import { ArtifactSource, ExtensionRegistry, InstallerConfig, PackageCache } from './services.js';
import { readBlockerFacts, retireExtensionData, syncExtensionRecords } from './uninstall-gate.js';
import type { DatabaseUnavailable } from '../identity/errors.js';

const API = `${KOS_GROUP}/${KOS_STORAGE_VERSION}`;
export const COMPONENT_FIELD_MANAGER = fieldManagerOf('component-reconciler');

const te = new TextDecoder('utf-8', { fatal: true });

/** The package facts of a managed component: decode `spec.package`, fetch, verify the digest, check the declaration. */
export const readPackage = (spec: unknown) =>
  Effect.gen(function* () {
    const decoded = Schema.decodeUnknownEither(ComponentPackage)((spec as { package?: unknown } | undefined)?.package);
    if (Either.isLeft(decoded))
      return { _tag: 'RefInvalid', problems: ['spec.package must be {ref, sha256 (64 lowercase hex)}'] } as const;
    const pkg = decoded.right;
    const cache = yield* PackageCache;
    const cached = (yield* Ref.get(cache)).get(pkg.sha256);
    if (cached !== undefined) return cached;
    const source = yield* ArtifactSource;
    const bytes = yield* Effect.either(source.fetch(pkg.ref));
    if (Either.isLeft(bytes)) return { _tag: 'Unreadable', reason: `${pkg.ref}: ${bytes.left.reason}` } as const;
    const actual = bytesToHex(sha256(bytes.right));
    if (actual !== pkg.sha256) return { _tag: 'DigestMismatch', expected: pkg.sha256, actual } as const;
    let document: unknown;
    try {
      document = JSON.parse(te.decode(bytes.right));
    } catch {
      document = undefined;
    }
    const doc = Schema.decodeUnknownEither(PackageDocument)(document);
    const facts: PackageFacts = Either.isLeft(doc)
      ? {
          _tag: 'Verified',
          declaration: { _tag: 'Invalid', problems: ['the package is not a kos.extension/v1 JSON document'] },
        }
      : {
          _tag: 'Verified',
          declaration: checkDeclaration(doc.right.declaration, Object.keys(doc.right.modules ?? {})),
          modules: doc.right.modules ?? {},
        };
    yield* Ref.update(cache, (m) => new Map(m).set(pkg.sha256, facts));
    return facts;
  });

const deleting = (o: KubeObject) => o.metadata.deletionTimestamp !== undefined;

/** The load-set facts of one component, or undefined when it is not in the load set. */
const factsOf = (o: KubeObject) =>
  Effect.gen(function* () {
    const checked = ownershipOf(o.metadata);
    if (checked._tag !== 'Valid') return undefined;
    const own = checked.ownership;
    if (own._tag !== 'Managed' && own._tag !== 'Adopted') return undefined;
    // a deleting component stays in the load set while its deletion gate holds it (dependents may still need it)
    if (deleting(o) && !(o.metadata.finalizers ?? []).includes(COMPONENT_FINALIZER)) return undefined;
    const base = {
      name: o.metadata.name ?? '',
      createdAt: o.metadata.creationTimestamp ?? '',
      disabled: (o['spec'] as { disable?: unknown } | undefined)?.disable === true,
    };
    if (own._tag === 'Adopted') return { ...base, ownership: 'adopted' } satisfies ComponentFacts;
    return { ...base, ownership: 'managed', package: yield* readPackage(o['spec']) } satisfies ComponentFacts;
  });

/** Run the load pipeline over the cluster's load set and publish it; the components read are returned too. */
export const loadComponents = Effect.gen(function* () {
  const client = yield* KubeClient;
  const config = yield* InstallerConfig;
  const list = yield* client.listAll(
    { apiVersion: API, kind: 'SystemComponent' },
    config.labelSelector !== undefined ? { labelSelector: config.labelSelector } : {},
  );
  const facts: ComponentFacts[] = [];
  for (const o of list.items) {
    const f = yield* factsOf(o);
    if (f !== undefined) facts.push(f);
  }
  const result = loadExtensions(facts);
  const registry = yield* ExtensionRegistry;
  const modules = new Map<string, Readonly<Record<string, string>>>();
  for (const f of facts)
    if (f.package?._tag === 'Verified' && f.package.modules !== undefined) modules.set(f.name, f.package.modules);
  yield* Ref.set(registry, { result, registry: buildRegistry(result), modules });
  return { result, objects: list.items };
});

const admitOrFail = (part: 'status' | 'finalizers', name: string) =>
  Either.match(admit({ subject: 'component-reconciler', target: 'SystemComponent', part, object: { name } }), {
    onLeft: (e) => Effect.fail(e),
    onRight: () => Effect.void,
  });

const setFinalizers = (o: KubeObject, finalizers: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    yield* admitOrFail('finalizers', o.metadata.name ?? '');
    const client = yield* KubeClient;
    return yield* client.patch(
      { apiVersion: API, kind: 'SystemComponent', name: o.metadata.name ?? '' },
      {
        type: 'merge',
        patch: { metadata: { finalizers: [...finalizers], resourceVersion: o.metadata.resourceVersion } },
      },
      { fieldManager: COMPONENT_FIELD_MANAGER },
    );
  });

const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms));

/** Write the whole status (server-side apply on the status subresource) only when it changed. */
const writeStatusIfChanged = (o: KubeObject, next: ReturnType<typeof componentStatus>) =>
  Effect.gen(function* () {
    if (!next.changed) return;
    yield* admitOrFail('status', o.metadata.name ?? '');
    const client = yield* KubeClient;
    yield* client.apply(
      {
        apiVersion: API,
        kind: 'SystemComponent',
        metadata: { name: o.metadata.name },
        status: next.status,
      } as unknown as KubeObject,
      { fieldManager: COMPONENT_FIELD_MANAGER, subresource: 'status', force: true },
    );
  });

/**
 * The CRDs of an activated component's object kinds, in the extension's own group (decision 0341): server-side
 * apply as the component reconciler (an unchanged CRD writes nothing). Serving them is the Registry's business: a
 * CRD outlives a disabled component (its objects are kept) but the control plane answers `capability_missing`.
 * Before them, with `extensionRbac: managed` (the default), the extension's ClusterRole (decision 0440): the
 * controller's own rights on these kinds, aggregated into the shipped `kos-controller-extensions` by the
 * clusterrole-aggregation controller (asynchronously: the first reads may be refused until it has run, and are
 * retried like any failed round).
 */
const ensureKindCrds = (extension: string) =>
  Effect.gen(function* () {
    const registry = yield* Ref.get(yield* ExtensionRegistry);
    const client = yield* KubeClient;
    const config = yield* InstallerConfig;
    const role = extensionRoleOf(registry.registry.kinds, extension);
    if (config.extensionRbac !== 'external' && role.rules.length > 0)
      yield* client.apply(role as unknown as KubeObject, { fieldManager: COMPONENT_FIELD_MANAGER, force: true });
    for (const crd of extensionCrdsOf(registry.registry.kinds, extension))
      yield* client.apply(crd as unknown as KubeObject, { fieldManager: COMPONENT_FIELD_MANAGER, force: true });
  });

/**
 * After the uninstall data is handled (decision 0440): the extension's ClusterRole shrinks to reading its kept kinds
 * (the Volume gate still lists their objects, and a repeated round lists them again), or goes when nothing is kept.
 * A crash before this step repeats the data handling with the rights still in place.
 */
const retireExtensionRole = (
  extension: string,
  keepKinds: ReadonlyArray<{ readonly group: string; readonly plural: string }>,
) =>
  Effect.gen(function* () {
    const config = yield* InstallerConfig;
    if (config.extensionRbac === 'external') return;
    const client = yield* KubeClient;
    if (keepKinds.length > 0) {
      const role = extensionRole(extension, keepKinds, 'leftovers');
      yield* client.apply(role as unknown as KubeObject, { fieldManager: COMPONENT_FIELD_MANAGER, force: true });
      return;
    }
    yield* client
      .delete({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: extensionRoleName(extension) })
      .pipe(Effect.catchTag('NotFound', () => Effect.void));
  });

/** Where leftover lists are written. */
export const LEFTOVER_NAMESPACE = 'kos-system';

/**
 * Uninstall data handling (decision 0343): `retain: delete` kinds lose their CRD (the API server deletes their
 * objects); `retain: keep` kinds keep CRD and objects, listed in the ConfigMap `kos-system/extension-leftovers-<id>`;
 * kinds another loaded component declares are left alone.
 */
const handleUninstallData = (result: LoadResult, component: string) =>
  Effect.gen(function* () {
    const outcome = result.components.find((c) => c.name === component)?.outcome;
    const declaration = outcome !== undefined && 'declaration' in outcome ? outcome.declaration : undefined;
    const client = yield* KubeClient;
    const kept: LeftoverObject[] = [];
    const plan = uninstallKinds(result, component);
    if (declaration !== undefined) {
      for (const k of plan.deleteKinds)
        yield* client.delete(crdRefOf(`${k.plural}.${k.group}`)).pipe(Effect.catchTag('NotFound', () => Effect.void));
      for (const k of plan.keepKinds) {
        const apiVersion = `${k.group}/${k.version}`;
        // a kind no longer served has no objects; any other failure (a refused list: 403) fails the round, so the
        // leftover list never omits objects it could not read
        const list = yield* client.listAll({ apiVersion, kind: k.kind }).pipe(
          Effect.catchTags({
            NotFound: () => Effect.succeed({ items: [] as ReadonlyArray<KubeObject> }),
            NoKindMatch: () => Effect.succeed({ items: [] as ReadonlyArray<KubeObject> }),
          }),
        );
        for (const o of list.items)
          kept.push({
            apiVersion,
            kind: k.kind,
            name: o.metadata.name ?? '',
            ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
          });
      }
    }
    // setting values and the preference domains in the control-plane database (decisions 0347, 0396): the domains
    // as their records say, so a package unreadable now still has its domain decided
    const retired = yield* retireExtensionData(result, component);
    const retained = retired?.retained ?? [];
    const extension = declaration?.header.id ?? retained[0]?.extension;
    const version = declaration?.header.version ?? retained[0]?.version;
    const done = { extension: declaration?.header.id, keepKinds: plan.keepKinds };
    if ((kept.length === 0 && retained.length === 0) || extension === undefined || version === undefined) return done;
    // the kernel's namespace may not exist yet on a fresh cluster: created when missing (get + create, so the role
    // needs no patch on namespaces, which would reach every namespace's labels)
    yield* client.get({ apiVersion: 'v1', kind: 'Namespace', name: LEFTOVER_NAMESPACE }).pipe(
      Effect.catchTag('NotFound', () =>
        client
          .create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: LEFTOVER_NAMESPACE } } as KubeObject, {
            fieldManager: COMPONENT_FIELD_MANAGER,
          })
          .pipe(Effect.catchTag('AlreadyExists', () => Effect.void)),
      ),
    );
    yield* client.apply(
      leftoverConfigMap({
        namespace: LEFTOVER_NAMESPACE,
        extension,
        version,
        component,
        objects: kept,
        preferenceDomains: retained.map((r) => r.extension),
      }) as unknown as KubeObject,
      { fieldManager: COMPONENT_FIELD_MANAGER, force: true },
    );
    return done;
  });

const crdRefOf = (name: string) => ({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name });

const statusOf = (o: KubeObject) => (o['status'] ?? {}) as StoredStatus;

type StoredStatus = {
  readonly phase?: string;
  readonly health?: { readonly state?: string };
  readonly conditions?: ReadonlyArray<Condition>;
};

export type ComponentRound = Effect.Effect<
  KosRound & { readonly result: LoadResult },
  KubeError | WriteRejected | DatabaseUnavailable,
  KubeClient | ArtifactSource | ExtensionRegistry | PackageCache | InstallerConfig
>;

/** One Installer round for the SystemComponent `name`. */
export const reconcileSystemComponent = (key: { readonly name: string }): ComponentRound =>
  Effect.gen(function* () {
    const { result, objects } = yield* loadComponents;
    const found = objects.find((o) => o.metadata.name === key.name);
    if (found === undefined) {
      // the object is gone without its gate (deleted before first observation, finalizer removed by hand): its
      // preference domains are retired as their records say (decision 0396)
      yield* retireExtensionData(result, key.name);
      return { state: 'steady', result } as const;
    }
    let object = found;
    const finalizers = object.metadata.finalizers ?? [];
    const entry = result.components.find((c) => c.name === key.name);
    if (deleting(object)) {
      if (!finalizers.includes(COMPONENT_FINALIZER) || entry === undefined) return { state: 'steady', result } as const;
      const others = objects.filter((o) => deleting(o)).map((o) => o.metadata.name ?? '');
      // TC-111: dependent components, Endpoint edges, Applications using its capabilities, Providers (decision 0347)
      const header = 'declaration' in entry.outcome ? entry.outcome.declaration.header : undefined;
      const facts = header === undefined ? undefined : yield* readBlockerFacts(header.id);
      const blockers = facts === undefined ? [] : uninstallBlockers(result, key.name, facts, others);
      if (blockers.length > 0) {
        // DeprovisionBlocked: stays Terminating (and loaded) until the dependents are gone, each one listed
        yield* writeStatusIfChanged(object, componentStatus(entry.outcome, statusOf(object), yield* nowDate, blockers));
        return { state: 'active', result } as const;
      }
      // the data, before the gate opens (a crash here repeats it: each step is idempotent)
      const handled = yield* handleUninstallData(result, key.name);
      if (handled.extension !== undefined) yield* retireExtensionRole(handled.extension, handled.keepKinds);
      yield* setFinalizers(
        object,
        finalizers.filter((f) => f !== COMPONENT_FINALIZER),
      );
      const after = yield* loadComponents; // it has left the load set: publish the Registry without it
      return { state: 'steady', result: after.result } as const;
    }
    if (entry === undefined) return { state: 'steady', result } as const; // not in the load set (no marker)
    if (entry.outcome._tag !== 'Adopted' && !finalizers.includes(COMPONENT_FINALIZER))
      object = yield* setFinalizers(object, [...finalizers, COMPONENT_FINALIZER]);
    const next = componentStatus(entry.outcome, statusOf(object), yield* nowDate);
    if (entry.outcome._tag === 'Active') yield* ensureKindCrds(entry.outcome.declaration.header.id);
    yield* writeStatusIfChanged(object, next);
    // C-29: after each load, the preference-domain and setting records (decisions 0396, 0447)
    yield* syncExtensionRecords(result, { name: key.name, uid: object.metadata.uid ?? '' });
    const settled = next.status.phase === 'Active' || next.status.phase === 'Adopted';
    return { state: settled ? 'steady' : 'active', result } as const;
  });

/** The current Registry (baseline only before the first round). */
export const currentRegistry = Effect.map(
  Effect.flatMap(ExtensionRegistry, (r) => Ref.get(r)),
  (s) => s.registry,
);

/** The component reconciler as a KOS controller (kernel loop: budget, backoff, metrics, bounded re-observation). */
export const startComponentController = (config?: KernelConfig) =>
  startKosController({
    name: 'component-reconciler',
    kind: 'SystemComponent',
    reconcile: (request) => Effect.map(reconcileSystemComponent({ name: request.name }), (r) => ({ state: r.state })),
    ...(config !== undefined ? { config } : {}),
  });

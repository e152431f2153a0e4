// Writes of extension objects through the control plane (seed 000: "扩展对象类用 apiVersion（读、删）或请求体的apiVersion
// （写）指名 API 组。未声明或未安装的类返回capability_missing…对象类只在组件激活时被服务"; "扩展对象的写角色取声明的
// objectWriters，未声明时只由 Owner 写"; TC-34, TC-5; decision 0344). One mechanism with the kernel kinds: the
// `Authorizer` authenticates and takes the role part (a Guest never writes), `canWrite` decides the kind's writers
// from the declaration, the write is admitted by `admitExtensionWrite` against the kind's control-plane scope (its own
// group and resource only), and goes to the API server under the caller's field manager (`fieldManagerOf`), with
// If-Match / resourceVersion preconditions as for kernel kinds (C-05, the same helpers: versioned-writes.ts). The
// owner rule is the kernel's (decision 0390): `spec.owner` from the session on create, a Member updates and deletes
// only its own objects, an Owner all (`ownerForWrite`). Every attempt is audited with the extension id.
import { Effect, Either, Option, Ref } from 'effect';
import { KubeClient, type KubeObject } from '@homelab/kube';
import type { Accepted } from '../../api/http/bodies.js';
import type { ObjectReference } from '../../api/http/errors.js';
import {
  CONTROL_PLANE_WRITER,
  controlPlaneWriteScope,
  type DesiredExtensionObject,
  desiredExtensionObject,
  sameJson,
} from '../../domain/extension/object-writes.js';
import type { ServedKind } from '../../domain/extension/registry.js';
import { admitExtensionWrite } from '../../domain/extension/write-scope.js';
import { canWrite } from '../../domain/identity/access.js';
import { MARKER_PREFIX } from '../../domain/markers.js';
import { fieldManagerOf } from '../../domain/write-path.js';
import { ExtensionRegistry } from '../extension/services.js';
import { accessOf, extensionVolumeRefusal, ownerForWrite, requestedOwner, writeTargetOf } from './access.js';
import { audited } from './audited.js';
import { ApiError, apiError, fromKube } from './errors.js';
import { Auditor, Authorizer, type Principal, type Verb } from './services.js';
import {
  deleteAtVersion,
  deleteVersion,
  refOf,
  storedAtVersion,
  updateAtVersion,
  updateVersion,
} from './versioned-writes.js';

/** The served extension kind for `apiVersion` + kind/plural (with the kinds served beside it), or `capability_missing`. */
const served = (segment: string, apiVersion: string, stage: 'route' | 'validate') =>
  Effect.gen(function* () {
    const registry = yield* Effect.serviceOption(ExtensionRegistry);
    const state = Option.isSome(registry) ? (yield* Ref.get(registry.value)).registry : undefined;
    const kind = state?.resolveKind(apiVersion, segment);
    if (state === undefined || kind === undefined)
      return yield* apiError(
        'capability_missing',
        stage,
        `${apiVersion} ${segment} is not served: no activated component declares it (extension kinds are served only while their component is activated)`,
      );
    return { kind, kinds: state.kinds };
  });

const refOfDesired = (d: DesiredExtensionObject): ObjectReference => ({
  apiVersion: d.apiVersion,
  kind: d.kind,
  name: d.name,
  ...(d.namespace !== undefined ? { namespace: d.namespace } : {}),
});

/** The role decision for a served kind, before anything is read: its declared `objectWriters` (undeclared = Owner only), C-59. */
const mayWrite = (principal: Principal, kind: ServedKind, ref: ObjectReference | undefined) =>
  Effect.suspend(() => {
    const d = canWrite(accessOf(principal), writeTargetOf(kind, undefined));
    return d.allowed
      ? Effect.void
      : Effect.fail(
          apiError('forbidden', 'authorize', `${principal.actor} (${principal.role}): ${d.reason}`, {
            actor: principal.actor,
            ...(ref !== undefined ? { object: ref } : {}),
          }),
        );
  });

/** WriteScope.Admit for a user write through the control plane (the kind's own group and resource, nothing else). */
const admitted = (
  s: { readonly kind: ServedKind; readonly kinds: ReadonlyArray<ServedKind> },
  verb: 'create' | 'update' | 'delete',
  ref: ObjectReference,
) =>
  Effect.suspend(() => {
    const d = admitExtensionWrite(controlPlaneWriteScope(s.kinds, s.kind), {
      extension: s.kind.source.extension,
      controller: CONTROL_PLANE_WRITER,
      group: s.kind.group,
      resource: s.kind.plural,
      name: ref.name,
      verb,
      ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}),
    });
    return Either.isLeft(d)
      ? Effect.fail(apiError('forbidden', 'admit', d.left.message, { object: ref }))
      : Effect.void;
  });

/** What the audit record of an attempt says, learnt as the handler goes. */
interface Facts {
  actor: string;
  object?: ObjectReference;
  extension?: string;
}

/**
 * Authenticate and take the role part: no kind is named, so a Member is not refused as for a kernel kind it may not
 * write (`mayWrite` decides from the declaration). A refused caller's audit record still names the extension whose
 * kind it tried to write (`facts`), when that kind is served.
 */
const authenticate = (input: ExtensionWriteInput, verb: Verb, facts: Facts, name: unknown) =>
  Effect.flatMap(Authorizer, (a) =>
    a.authorize({
      verb,
      ...(input.authorization !== undefined ? { authorization: input.authorization } : {}),
      ...(input.namespace !== undefined ? { namespace: input.namespace } : {}),
    }),
  ).pipe(
    Effect.tapError(() =>
      served(input.kind, input.apiVersion, 'route').pipe(
        Effect.map((s) => {
          facts.extension = s.kind.source.extension;
          if (typeof name === 'string' && name !== '')
            facts.object = {
              apiVersion: input.apiVersion,
              kind: s.kind.kind,
              name,
              ...(s.kind.scope === 'Namespaced' && input.namespace !== undefined ? { namespace: input.namespace } : {}),
            };
        }),
        Effect.ignore,
      ),
    ),
  );

/** One audit record per attempt, with the extension id when the kind resolved (C-14). */
const audit = <A extends { readonly object?: ObjectReference }, R>(
  verb: 'create' | 'update' | 'delete',
  facts: Facts,
  effect: Effect.Effect<A, ApiError, R>,
): Effect.Effect<A, ApiError, R | Auditor> =>
  audited(
    verb,
    () => facts.actor,
    () => facts.object,
    effect,
    () => facts.extension,
  );

const desired = (kind: ServedKind, body: unknown, context: { readonly name?: string; readonly namespace?: string }) =>
  Effect.suspend(() => {
    const d = desiredExtensionObject(kind, body, context);
    return 'problems' in d
      ? Effect.fail(
          d.problems.some((p) => p.field.startsWith('metadata.labels.') || p.field.startsWith('metadata.annotations.'))
            ? apiError('forbidden', 'admit', d.problems.map((p) => `${p.field}: ${p.message}`).join('; '))
            : apiError('invalid_field', 'validate', d.problems.map((p) => `${p.field}: ${p.message}`).join('; '), {
                causes: d.problems,
              }),
        )
      : Effect.succeed(d.object);
  });

/** What a create stores: the desired object with the `spec.owner` the write path decided. */
const objectOf = (d: DesiredExtensionObject, spec: Readonly<Record<string, unknown>>): KubeObject => ({
  apiVersion: d.apiVersion,
  kind: d.kind,
  metadata: {
    name: d.name,
    ...(d.namespace !== undefined ? { namespace: d.namespace } : {}),
    ...(Object.keys(d.labels).length > 0 ? { labels: { ...d.labels } } : {}),
    ...(Object.keys(d.annotations).length > 0 ? { annotations: { ...d.annotations } } : {}),
  },
  spec,
});

/** `spec` with the owner a write stores (every extension kind has one; `ownerForWrite` answers it). */
const ownedSpec = (spec: Readonly<Record<string, unknown>>, owner: string | undefined) =>
  owner === undefined ? spec : { ...spec, owner };

/** `metadata.name` of a body, for the audit record of a write refused before the body is read. */
const bodyName = (body: unknown): unknown =>
  typeof body === 'object' && body !== null ? (body as { metadata?: { name?: unknown } }).metadata?.name : undefined;

/** The user part of a stored object's labels or annotations (markers are not the user's). */
const userPart = (m: Readonly<Record<string, string>> | undefined) =>
  Object.fromEntries(Object.entries(m ?? {}).filter(([k]) => !k.startsWith(MARKER_PREFIX)));

export interface ExtensionWriteInput {
  readonly authorization?: string;
  /** The route's kind segment (kind name or plural). */
  readonly kind: string;
  /** The API group and version: the body's `apiVersion` (create, update) or the query parameter (delete). */
  readonly apiVersion: string;
  readonly namespace?: string;
}

/** Idempotent create (as TC-28 for kernel kinds): the same desired state converges, a different one is `object_exists`. */
export const createExtensionResource = (
  input: ExtensionWriteInput & { readonly body: unknown },
): Effect.Effect<Accepted, ApiError, KubeClient | Authorizer | Auditor> => {
  const facts: Facts = { actor: 'unknown' };
  return audit(
    'create',
    facts,
    Effect.gen(function* () {
      const principal = yield* authenticate(input, 'create', facts, bodyName(input.body));
      facts.actor = principal.actor;
      const s = yield* served(input.kind, input.apiVersion, 'validate');
      facts.extension = s.kind.source.extension;
      const d = yield* desired(s.kind, input.body, input.namespace !== undefined ? { namespace: input.namespace } : {});
      const ref = refOfDesired(d);
      facts.object = ref;
      yield* mayWrite(principal, s.kind, ref);
      yield* admitted(s, 'create', ref);
      const requested = yield* requestedOwner(principal, s.kind, d.spec, ref);
      const spec = ownedSpec(d.spec, yield* ownerForWrite(principal, s.kind, requested, undefined, ref));
      yield* extensionVolumeRefusal(s.kind, objectOf(d, spec), ref);
      const client = yield* KubeClient;
      const converge = (stored: KubeObject) =>
        sameJson(stored['spec'] ?? {}, spec) &&
        sameJson(userPart(stored.metadata.labels), d.labels) &&
        sameJson(userPart(stored.metadata.annotations), d.annotations)
          ? Effect.succeed<Accepted>({ accepted: true, operation: 'create', object: refOf(stored) })
          : Effect.fail(
              apiError(
                'object_exists',
                'write',
                `${d.kind} ${d.namespace !== undefined ? `${d.namespace}/` : ''}${d.name} already exists with a different desired state`,
                { object: refOf(stored), current: stored },
              ),
            );
      return yield* client
        .create(objectOf(d, spec), { fieldManager: fieldManagerOf(principal.subject, principal.actor) })
        .pipe(
          Effect.map((created): Accepted => ({ accepted: true, operation: 'create', object: refOf(created) })),
          Effect.catchTag('AlreadyExists', () =>
            client.get(ref).pipe(
              Effect.mapError((e) => fromKube(e, 'read', ref, false)),
              Effect.flatMap(converge),
            ),
          ),
          Effect.mapError((e) => (e instanceof ApiError ? e : fromKube(e, 'write', ref, true))),
        );
    }),
  );
};

/** Update the client-owned parts (spec, labels, annotations) at the version the caller read: a changed version ⇒ 409 + `current`. */
export const updateExtensionResource = (
  input: ExtensionWriteInput & { readonly name: string; readonly ifMatch?: string; readonly body: unknown },
): Effect.Effect<Accepted, ApiError, KubeClient | Authorizer | Auditor> => {
  const facts: Facts = { actor: 'unknown' };
  return audit(
    'update',
    facts,
    Effect.gen(function* () {
      const principal = yield* authenticate(input, 'update', facts, input.name);
      facts.actor = principal.actor;
      const s = yield* served(input.kind, input.apiVersion, 'validate');
      facts.extension = s.kind.source.extension;
      const d = yield* desired(s.kind, input.body, {
        name: input.name,
        ...(input.namespace !== undefined ? { namespace: input.namespace } : {}),
      });
      const ref = refOfDesired(d);
      facts.object = ref;
      yield* mayWrite(principal, s.kind, ref);
      const version = yield* updateVersion(input.ifMatch, d.resourceVersion, ref);
      yield* admitted(s, 'update', ref);
      const requested = yield* requestedOwner(principal, s.kind, d.spec, ref);
      const client = yield* KubeClient;
      const stored = yield* client.get(ref).pipe(Effect.mapError((e) => fromKube(e, 'read', ref, false)));
      // Ownership before the version, as for kernel kinds: a Member's write to another's object is refused as such.
      const owner = yield* ownerForWrite(principal, s.kind, requested, stored, ref);
      yield* storedAtVersion(stored, version);
      const spec = ownedSpec(d.spec, owner);
      yield* extensionVolumeRefusal(s.kind, objectOf(d, spec), ref);
      return yield* updateAtVersion(
        client,
        stored,
        version,
        { spec, labels: d.labels, annotations: d.annotations },
        fieldManagerOf(principal.subject, principal.actor),
        ref,
      );
    }),
  );
};

/** Delete bound to the version the caller read (If-Match required). */
export const deleteExtensionResource = (
  input: ExtensionWriteInput & { readonly name: string; readonly ifMatch?: string },
): Effect.Effect<Accepted, ApiError, KubeClient | Authorizer | Auditor> => {
  const facts: Facts = { actor: 'unknown' };
  return audit(
    'delete',
    facts,
    Effect.gen(function* () {
      const principal = yield* authenticate(input, 'delete', facts, input.name);
      facts.actor = principal.actor;
      const s = yield* served(input.kind, input.apiVersion, 'route');
      facts.extension = s.kind.source.extension;
      if (s.kind.scope === 'Namespaced' && (input.namespace === undefined || input.namespace === ''))
        return yield* apiError('invalid_parameter', 'route', `${s.kind.kind} is namespaced: give the namespace`);
      const d = yield* desired(
        s.kind,
        { apiVersion: input.apiVersion, metadata: { name: input.name } },
        {
          name: input.name,
          ...(s.kind.scope === 'Namespaced' && input.namespace !== undefined ? { namespace: input.namespace } : {}),
        },
      );
      const ref = refOfDesired(d);
      facts.object = ref;
      yield* mayWrite(principal, s.kind, ref);
      const version = yield* deleteVersion(input.ifMatch, ref);
      yield* admitted(s, 'delete', ref);
      const client = yield* KubeClient;
      // An Owner deletes anything; anyone else only its own objects (the read costs one GET), as for kernel kinds.
      if (principal.role !== 'Owner')
        yield* ownerForWrite(
          principal,
          s.kind,
          undefined,
          yield* client.get(ref).pipe(Effect.mapError((e) => fromKube(e, 'read', ref, false))),
          ref,
        );
      return yield* deleteAtVersion(client, ref, version);
    }),
  );
};

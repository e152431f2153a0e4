// Writes of extension objects through the control plane (seed 000: "扩展对象类用 apiVersion（读、删）或请求体的apiVersion
// （写）指名 API 组。未声明或未安装的类返回capability_missing…对象类只在组件激活时被服务"; "扩展对象的写角色取声明的
// objectWriters，未声明时只由 Owner 写"; TC-34, TC-5; decision 0344). One mechanism with the kernel kinds: the
// `Authorizer` authenticates and takes the role part (a Guest never writes), `canWrite` decides the kind's writers
// from the declaration, the write is admitted by `admitExtensionWrite` against the kind's control-plane scope (its own
// group and resource only), and goes to the API server under the caller's field manager (`fieldManagerOf`), with
// If-Match / resourceVersion preconditions as for kernel kinds (C-05). Every attempt is audited with the extension id.
import { Effect, Either, Option, Ref } from 'effect';
import { KubeClient, type KubeObject } from '@homelab/kube';
import type { Accepted } from '../../api/http/bodies.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { parseIfMatch } from '../../domain/control-plane/requests.js';
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
import { accessOf } from './access.js';
import { ApiError, apiError, fromKube } from './errors.js';
import { Auditor, Authorizer, type Principal, type Verb } from './services.js';

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

const refOf = (o: KubeObject): ObjectReference => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  name: o.metadata.name ?? '',
  ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
  ...(o.metadata.uid !== undefined ? { uid: o.metadata.uid } : {}),
  ...(o.metadata.resourceVersion !== undefined ? { resourceVersion: o.metadata.resourceVersion } : {}),
});

const refOfDesired = (d: DesiredExtensionObject): ObjectReference => ({
  apiVersion: d.apiVersion,
  kind: d.kind,
  name: d.name,
  ...(d.namespace !== undefined ? { namespace: d.namespace } : {}),
});

/** The role decision for a served kind: its declared `objectWriters` (undeclared = Owner only), C-59. */
const mayWrite = (principal: Principal, kind: ServedKind, ref: ObjectReference | undefined) =>
  Effect.suspend(() => {
    const d = canWrite(accessOf(principal), {
      kind: kind.kind,
      extension: true,
      ...(kind.objectWriters !== undefined ? { extensionWriters: kind.objectWriters } : {}),
    });
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

/**
 * Authenticate and take the role part: no kind is named, so a Member is not refused as for a kernel kind it may not
 * write (`mayWrite` decides from the declaration). A refused caller's audit record still names the extension whose
 * kind it tried to write (`facts`), when that kind is served.
 */
const authenticate = (
  input: ExtensionWriteInput,
  verb: Verb,
  facts: { actor: string; object?: ObjectReference; extension?: string },
  name: unknown,
) =>
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
  facts: { actor: string; object?: ObjectReference; extension?: string },
  effect: Effect.Effect<A, ApiError, R>,
): Effect.Effect<A, ApiError, R | Auditor> =>
  Effect.flatMap(Auditor, (auditor) =>
    effect.pipe(
      Effect.tap((a) =>
        auditor.record({
          actor: facts.actor,
          verb,
          outcome: 'accepted',
          ...((a.object ?? facts.object) !== undefined
            ? { object: (a.object ?? facts.object) as ObjectReference }
            : {}),
          ...(facts.extension !== undefined ? { extension: facts.extension } : {}),
        }),
      ),
      Effect.tapError((e) => {
        const o = e.object ?? facts.object;
        return auditor.record({
          actor: e.actor ?? facts.actor,
          verb,
          outcome: 'rejected',
          code: e.code,
          message: e.message,
          ...(o !== undefined ? { object: o } : {}),
          ...(facts.extension !== undefined ? { extension: facts.extension } : {}),
        });
      }),
    ),
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

const objectOf = (d: DesiredExtensionObject): KubeObject => ({
  apiVersion: d.apiVersion,
  kind: d.kind,
  metadata: {
    name: d.name,
    ...(d.namespace !== undefined ? { namespace: d.namespace } : {}),
    ...(Object.keys(d.labels).length > 0 ? { labels: { ...d.labels } } : {}),
    ...(Object.keys(d.annotations).length > 0 ? { annotations: { ...d.annotations } } : {}),
  },
  spec: d.spec,
});

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
  const facts: { actor: string; object?: ObjectReference; extension?: string } = { actor: 'unknown' };
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
      const client = yield* KubeClient;
      const converge = (stored: KubeObject) =>
        sameJson(stored['spec'] ?? {}, d.spec) &&
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
        .create(objectOf(d), { fieldManager: fieldManagerOf(principal.subject, principal.actor) })
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
  const facts: { actor: string; object?: ObjectReference; extension?: string } = { actor: 'unknown' };
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
      const headerVersion = parseIfMatch(input.ifMatch);
      if (headerVersion !== undefined && d.resourceVersion !== undefined && headerVersion !== d.resourceVersion)
        return yield* apiError(
          'invalid_field',
          'validate',
          `If-Match (${headerVersion}) and metadata.resourceVersion (${d.resourceVersion}) disagree`,
          { object: ref },
        );
      const version = headerVersion ?? d.resourceVersion;
      if (version === undefined)
        return yield* apiError(
          'precondition_required',
          'validate',
          'PUT needs If-Match or metadata.resourceVersion (the version you read)',
          { object: ref },
        );
      yield* admitted(s, 'update', ref);
      const client = yield* KubeClient;
      const stored = yield* client.get(ref).pipe(Effect.mapError((e) => fromKube(e, 'read', ref, false)));
      if (stored.metadata.resourceVersion !== version)
        return yield* apiError(
          'conflict',
          'write',
          `the object is at version ${stored.metadata.resourceVersion}, not ${version}`,
          {
            object: refOf(stored),
            current: stored,
          },
        );
      const keepMarkers = (m: Readonly<Record<string, string>> | undefined) =>
        Object.fromEntries(Object.entries(m ?? {}).filter(([k]) => k.startsWith(MARKER_PREFIX)));
      const next: KubeObject = {
        ...stored,
        metadata: {
          ...stored.metadata,
          resourceVersion: version,
          labels: { ...keepMarkers(stored.metadata.labels), ...d.labels },
          annotations: { ...keepMarkers(stored.metadata.annotations), ...d.annotations },
        },
        spec: d.spec,
      };
      const updated = yield* client
        .update(next, { fieldManager: fieldManagerOf(principal.subject, principal.actor) })
        .pipe(Effect.mapError((e) => fromKube(e, 'write', ref, true)));
      return { accepted: true, operation: 'update', object: refOf(updated) } satisfies Accepted;
    }),
  );
};

/** Delete bound to the version the caller read (If-Match required). */
export const deleteExtensionResource = (
  input: ExtensionWriteInput & { readonly name: string; readonly ifMatch?: string },
): Effect.Effect<Accepted, ApiError, KubeClient | Authorizer | Auditor> => {
  const facts: { actor: string; object?: ObjectReference; extension?: string } = { actor: 'unknown' };
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
      const version = parseIfMatch(input.ifMatch);
      if (version === undefined)
        return yield* apiError('precondition_required', 'validate', 'DELETE needs If-Match (the version you read)', {
          object: ref,
        });
      yield* admitted(s, 'delete', ref);
      const client = yield* KubeClient;
      const result = yield* client.delete(ref, { preconditions: { resourceVersion: version } }).pipe(
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
        Effect.mapError((e) => (e instanceof ApiError ? e : fromKube(e, 'write', ref, true))),
      );
      return {
        accepted: true,
        operation: 'delete',
        object: result.object !== undefined ? refOf(result.object) : ref,
      } satisfies Accepted;
    }),
  );
};

// The resource routes, HTTP-independent (seed 000 控制面表; digest §3.1, §3.3): list and get answer projections;
// create, update and delete go through the write table, answer 202 with an object reference, and turn every
// failure into an ApiError (the envelope). Every write, rejected ones included, is audited.
import { Clock, Effect, Either } from 'effect';
import { KubeClient, type KubeClientService, type KubeObject } from '@homelab/kube';
import type { Accepted, ListPage, Projection } from '../../api/http/bodies.js';
import type { ObjectReference } from '../../api/http/errors.js';
import { KIND_INFO, type KernelKind, KOS_GROUP } from '../../api/group.js';
import { decodeContinue, encodeContinue, type ListQuery } from '../../domain/control-plane/continue-token.js';
import { sourcesOf } from '../../domain/control-plane/discovery.js';
import { project } from '../../domain/control-plane/projection.js';
import {
  isKosApiVersion,
  isNamespaceName,
  isObjectName,
  desiredDifferences,
  labelSelectorProblem,
  resolveKind,
  specProblems,
} from '../../domain/control-plane/requests.js';
import { MARKER_PREFIX } from '../../domain/markers.js';
import { hasMask, redactObject, unmaskConfig } from '../../domain/control-plane/sensitive.js';
import { admit, fieldManagerOf } from '../../domain/write-path.js';
import { fieldsOf } from '../writer.js';
import { crossOwnerRefusal, ownerForWrite, requestedOwner, visibleTo } from './access.js';
import { admitApplicationSpec } from './app-admission.js';
import { admitVolumeSpec } from './volume-admission.js';
import { getExtensionResource, listExtensionResources } from './extension-resources.js';
import { createExtensionResource, deleteExtensionResource, updateExtensionResource } from './extension-writes.js';
import { audited } from './audited.js';
import { ApiError, apiError, fromKube } from './errors.js';
import {
  deleteAtVersion,
  deleteVersion,
  refOf,
  storedAtVersion,
  updateAtVersion,
  updateVersion,
} from './versioned-writes.js';
import { Auditor, Authorizer, ControlPlaneConfig, DiscoveryIndex, type Principal, type Verb } from './services.js';

export interface Caller {
  readonly authorization?: string;
}

export const kindOf = (segment: string, apiVersion: string | undefined, stage: 'route' | 'validate' = 'route') =>
  Effect.suspend(() => {
    if (apiVersion !== undefined && !isKosApiVersion(apiVersion)) {
      return Effect.fail(
        apiError(
          'capability_missing',
          stage,
          `${apiVersion} ${segment} is not served: no activated component declares it (extension kinds are served only while their component is activated)`,
        ),
      );
    }
    const kind = resolveKind(segment);
    return kind === undefined
      ? Effect.fail(
          apiError(
            'capability_missing',
            stage,
            `unknown kind "${segment}": not a kernel kind of ${KOS_GROUP} and not declared by an activated component`,
          ),
        )
      : Effect.succeed(kind);
  });

const namespaceFor = (kind: KernelKind, namespace: string | undefined, stage: 'route' | 'validate') =>
  Effect.suspend(() => {
    if (namespace === undefined || namespace === '') return Effect.succeed(undefined);
    if (KIND_INFO[kind].scope === 'Cluster')
      return Effect.fail(apiError('invalid_parameter', stage, `${kind} is cluster-scoped: no namespace`));
    if (!isNamespaceName(namespace))
      return Effect.fail(apiError('invalid_parameter', stage, `namespace "${namespace}" is not a DNS label`));
    return Effect.succeed(namespace);
  });

const apiVersionOf = Effect.map(ControlPlaneConfig, (c) => `${KOS_GROUP}/${c.version}`);

/** Projections leave out `metadata.managedFields`: field-manager bookkeeping of the API server, not object state (decision 0092). */
const withoutManagedFields = (o: KubeObject): KubeObject => {
  if (o.metadata.managedFields === undefined) return o;
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { managedFields, ...metadata } = o.metadata;
  return { ...o, metadata };
};

const projectWith = (objects: ReadonlyArray<KubeObject>, readAtMs: number) =>
  Effect.gen(function* () {
    const config = yield* ControlPlaneConfig;
    const index = yield* DiscoveryIndex;
    const state = yield* index.state;
    const now = yield* Clock.currentTimeMillis;
    return objects.map((o): Projection =>
      project(redactObject(withoutManagedFields(o)), {
        readAtMs,
        nowMs: now,
        thresholdMs: config.staleThresholdMs,
        sources: sourcesOf(state, {
          ...o,
          name: o.metadata.name ?? '',
          ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
        }),
      }),
    );
  });

const authorize = (caller: Caller, verb: Verb, kind?: string, namespace?: string, name?: string) =>
  Effect.flatMap(Authorizer, (a) =>
    a.authorize({
      verb,
      ...(caller.authorization !== undefined ? { authorization: caller.authorization } : {}),
      ...(kind !== undefined ? { kind } : {}),
      ...(namespace !== undefined ? { namespace } : {}),
      ...(name !== undefined ? { name } : {}),
    }),
  );

// --- reads -------------------------------------------------------------------------------------------------------

export interface ListInput extends Caller {
  readonly kind: string;
  readonly apiVersion?: string;
  readonly namespace?: string;
  readonly limit?: string;
  readonly continue?: string;
  readonly labelSelector?: string;
}

export const listResources = (
  input: ListInput,
): Effect.Effect<ListPage, ApiError, KubeClient | ControlPlaneConfig | Authorizer | DiscoveryIndex> =>
  Effect.gen(function* () {
    // an extension kind (another group): served only while its component is activated (decision 0341)
    if (input.apiVersion !== undefined && !isKosApiVersion(input.apiVersion))
      return yield* listExtensionResources({ ...input, apiVersion: input.apiVersion });
    const kind = yield* kindOf(input.kind, input.apiVersion);
    const namespace = yield* namespaceFor(kind, input.namespace, 'route');
    const principal = yield* authorize(input, 'list', kind, namespace);
    const config = yield* ControlPlaneConfig;
    let limit = config.defaultPageSize;
    if (input.limit !== undefined) {
      const n = Number(input.limit);
      if (!/^[0-9]+$/.test(input.limit) || !Number.isSafeInteger(n) || n < 1 || n > config.maxPageSize) {
        return yield* apiError(
          'invalid_parameter',
          'route',
          `limit must be an integer from 1 to ${config.maxPageSize}, not "${input.limit}"`,
        );
      }
      limit = n;
    }
    const selector =
      input.labelSelector === undefined || input.labelSelector.trim() === '' ? undefined : input.labelSelector;
    if (selector !== undefined) {
      const problem = labelSelectorProblem(selector);
      if (problem !== undefined)
        return yield* apiError('invalid_parameter', 'route', `labelSelector "${selector}": ${problem}`);
    }
    const query: ListQuery = {
      kind,
      ...(namespace !== undefined ? { namespace } : {}),
      ...(selector !== undefined ? { labelSelector: selector } : {}),
    };
    let upstream: string | undefined;
    if (input.continue !== undefined && input.continue !== '') {
      const decoded = decodeContinue(config.continueKey, query, input.continue);
      if (Either.isLeft(decoded)) return yield* apiError('invalid_continue', 'route', decoded.left.message);
      upstream = decoded.right;
    }
    const client = yield* KubeClient;
    const apiVersion = yield* apiVersionOf;
    const page = yield* client
      .list(
        { apiVersion, kind, ...(namespace !== undefined ? { namespace } : {}) },
        {
          limit,
          ...(selector !== undefined ? { labelSelector: selector } : {}),
          ...(upstream !== undefined ? { continue: upstream } : {}),
        },
      )
      .pipe(Effect.mapError((e) => fromKube(e, 'read', undefined, false)));
    const readAt = yield* Clock.currentTimeMillis;
    // Visibility filters the page (TC-30): a page may hold fewer than `limit` items; `continue` still goes on.
    const items = yield* projectWith(
      page.items.filter((o) => visibleTo(principal, kind, o)),
      readAt,
    );
    const next = page.metadata.continue;
    return {
      kind,
      items,
      ...(next !== undefined && next !== '' ? { continue: encodeContinue(config.continueKey, query, next) } : {}),
      ...(page.metadata.remainingItemCount !== undefined
        ? { remainingItemCount: page.metadata.remainingItemCount }
        : {}),
    };
  });

export interface GetInput extends Caller {
  readonly kind: string;
  readonly name: string;
  readonly apiVersion?: string;
  readonly namespace?: string;
}

const objectKey = (
  kind: KernelKind,
  name: string,
  namespace: string | undefined,
  apiVersion: string,
  stage: 'route' | 'validate',
) =>
  Effect.suspend(() => {
    if (!isObjectName(name))
      return Effect.fail(apiError('invalid_parameter', stage, `name "${name}" is not a DNS subdomain`));
    if (KIND_INFO[kind].scope === 'Namespaced' && namespace === undefined) {
      return Effect.fail(apiError('invalid_parameter', stage, `${kind} is namespaced: give the namespace`));
    }
    return Effect.succeed({
      apiVersion,
      kind,
      name,
      ...(namespace !== undefined ? { namespace } : {}),
    } as ObjectReference);
  });

/** The stored object, or `not_found` when it is absent or the caller may not see it (visibility does not leak). */
const readVisible = (client: KubeClientService, principal: Principal, kind: KernelKind, ref: ObjectReference) =>
  client.get(ref).pipe(
    Effect.mapError((e) => fromKube(e, 'read', ref, false)),
    Effect.filterOrFail(
      (o) => visibleTo(principal, kind, o),
      () =>
        apiError('not_found', 'read', `${kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name} not found`, {
          object: ref,
        }),
    ),
  );

export const getResource = (
  input: GetInput,
): Effect.Effect<Projection, ApiError, KubeClient | ControlPlaneConfig | Authorizer | DiscoveryIndex> =>
  Effect.gen(function* () {
    if (input.apiVersion !== undefined && !isKosApiVersion(input.apiVersion))
      return yield* getExtensionResource({ ...input, apiVersion: input.apiVersion });
    const kind = yield* kindOf(input.kind, input.apiVersion);
    const namespace = yield* namespaceFor(kind, input.namespace, 'route');
    const ref = yield* objectKey(kind, input.name, namespace, yield* apiVersionOf, 'route');
    const principal = yield* authorize(input, 'get', kind, namespace, input.name);
    const client = yield* KubeClient;
    const object = yield* readVisible(client, principal, kind, ref);
    const readAt = yield* Clock.currentTimeMillis;
    const [projection] = yield* projectWith([object], readAt);
    return projection as Projection;
  });

// --- writes ------------------------------------------------------------------------------------------------------

/** `apiVersion` when it names a group other than kos.tsic.top (an extension kind), else undefined. */
const extensionApiVersion = (apiVersion: string | undefined): string | undefined =>
  apiVersion !== undefined && apiVersion !== '' && !isKosApiVersion(apiVersion) ? apiVersion : undefined;

/** The body's `apiVersion` when it names an extension kind's group (seed: writes name the group in the body). */
const extensionApiVersionOf = (body: unknown): string | undefined =>
  body !== null && typeof body === 'object' && typeof (body as { apiVersion?: unknown }).apiVersion === 'string'
    ? extensionApiVersion((body as { apiVersion: string }).apiVersion)
    : undefined;

const admitOr = (request: Parameters<typeof admit>[0], ref: ObjectReference) =>
  Effect.suspend(() => {
    const d = admit(request);
    return Either.isLeft(d)
      ? Effect.fail(apiError('forbidden', 'admit', d.left.message, { object: ref }))
      : Effect.succeed(d.right);
  });

interface Desired {
  readonly kind: KernelKind;
  readonly ref: ObjectReference;
  readonly object: KubeObject;
  readonly principal: Principal;
  /** The body's `spec.owner`, when it named one (the object carries the session's account otherwise). */
  readonly requestedOwner?: string;
}

/** `d` with the `spec.owner` its write stores (ownerForWrite), after checking the caller may write `stored`. */
export const withOwnerFor = (d: Desired, stored: KubeObject | undefined): Effect.Effect<Desired, ApiError> =>
  Effect.map(ownerForWrite(d.principal, d.kind, d.requestedOwner, stored, d.ref), (owner) =>
    owner === undefined
      ? d
      : { ...d, object: { ...d.object, spec: { ...(d.object['spec'] as Record<string, unknown>), owner } } },
  );

/** Validate a submitted object for `kind` and build what the control plane will write (owner from the session). */
export const desiredOf = (
  kind: KernelKind,
  body: unknown,
  principal: Principal,
  context: { readonly namespace?: string; readonly name?: string },
): Effect.Effect<Desired, ApiError, ControlPlaneConfig> =>
  Effect.gen(function* () {
    if (body === null || typeof body !== 'object' || Array.isArray(body))
      return yield* apiError('malformed_body', 'decode', 'the body must be a JSON object');
    const o = body as Record<string, unknown>;
    const apiVersion = yield* apiVersionOf;
    if (o['apiVersion'] !== undefined && (typeof o['apiVersion'] !== 'string' || !isKosApiVersion(o['apiVersion']))) {
      return yield* apiError(
        'capability_missing',
        'validate',
        `apiVersion ${String(o['apiVersion'])} is not served for ${kind}`,
      );
    }
    if (o['kind'] !== undefined && o['kind'] !== kind)
      return yield* apiError(
        'invalid_field',
        'validate',
        `kind: the body says ${String(o['kind'])}, the route ${kind}`,
        { causes: [{ field: 'kind', message: `must be ${kind}` }] },
      );
    const meta = (o['metadata'] ?? {}) as Record<string, unknown>;
    if (typeof meta !== 'object' || meta === null)
      return yield* apiError('invalid_field', 'validate', 'metadata must be an object');
    const name = meta['name'] ?? context.name;
    if (typeof name !== 'string' || !isObjectName(name))
      return yield* apiError('invalid_field', 'validate', 'metadata.name is required and must be a DNS subdomain', {
        causes: [{ field: 'metadata.name', message: 'required DNS subdomain' }],
      });
    if (context.name !== undefined && name !== context.name)
      return yield* apiError(
        'invalid_field',
        'validate',
        `metadata.name "${name}" differs from the route's "${context.name}"`,
      );
    const bodyNs = meta['namespace'];
    if (bodyNs !== undefined && typeof bodyNs !== 'string')
      return yield* apiError('invalid_field', 'validate', 'metadata.namespace must be a string');
    if (bodyNs !== undefined && context.namespace !== undefined && bodyNs !== context.namespace) {
      return yield* apiError(
        'invalid_field',
        'validate',
        `metadata.namespace "${bodyNs}" differs from the namespace parameter "${context.namespace}"`,
      );
    }
    const namespace = (bodyNs as string | undefined) ?? context.namespace;
    if (KIND_INFO[kind].scope === 'Namespaced' && (namespace === undefined || !isNamespaceName(namespace))) {
      return yield* apiError(
        'invalid_field',
        'validate',
        `${kind} is namespaced: metadata.namespace (a DNS label) is required`,
        { causes: [{ field: 'metadata.namespace', message: 'required' }] },
      );
    }
    if (KIND_INFO[kind].scope === 'Cluster' && namespace !== undefined)
      return yield* apiError('invalid_field', 'validate', `${kind} is cluster-scoped: no metadata.namespace`);
    const ref: ObjectReference = {
      apiVersion,
      kind,
      name,
      ...(KIND_INFO[kind].scope === 'Namespaced' ? { namespace: namespace as string } : {}),
    };
    const labels = (meta['labels'] ?? {}) as Record<string, string>;
    const annotations = (meta['annotations'] ?? {}) as Record<string, string>;
    for (const [what, map] of [
      ['labels', labels],
      ['annotations', annotations],
    ] as const) {
      if (typeof map !== 'object' || map === null || Object.values(map).some((v) => typeof v !== 'string')) {
        return yield* apiError('invalid_field', 'validate', `metadata.${what} must map strings to strings`, {
          object: ref,
        });
      }
      const marker = Object.keys(map).find((k) => k.startsWith(MARKER_PREFIX));
      if (marker !== undefined) {
        return yield* apiError(
          'forbidden',
          'admit',
          `${marker} is an ownership marker: only the adoption actions write markers (subject ${principal.subject}, ${kind} ${name})`,
          { object: ref },
        );
      }
    }
    const spec = (o['spec'] ?? {}) as Record<string, unknown>;
    const problems = specProblems(kind, spec);
    if (problems.length > 0) {
      return yield* apiError('invalid_field', 'validate', problems.map((p) => `${p.field}: ${p.message}`).join('; '), {
        object: ref,
        causes: problems,
      });
    }
    const requested = yield* requestedOwner(principal, kind, spec, ref);
    const finalSpec: Record<string, unknown> = KIND_INFO[kind].owned
      ? { ...spec, owner: requested ?? principal.actor }
      : spec;
    const object: KubeObject = {
      apiVersion,
      kind,
      metadata: {
        name,
        ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}),
        ...(Object.keys(labels).length ? { labels } : {}),
        ...(Object.keys(annotations).length ? { annotations } : {}),
      },
      spec: finalSpec,
    };
    return { kind, ref, object, principal, ...(requested !== undefined ? { requestedOwner: requested } : {}) };
  });

/** Admission of a user write: the user's part through the table, `spec.owner` as the control plane's own write. */
const admitUserWrite = (d: Desired, part: 'create' | 'spec') =>
  Effect.gen(function* () {
    const target = { name: d.ref.name, ...(d.ref.namespace !== undefined ? { namespace: d.ref.namespace } : {}) };
    const userFields = fieldsOf('spec', d.object).filter((f) => f !== 'spec.owner' && !f.startsWith('spec.owner.'));
    if (part === 'create')
      yield* admitOr(
        {
          subject: d.principal.subject,
          actor: d.principal.actor,
          target: d.kind,
          part: 'create',
          object: target,
          fields: [],
        },
        d.ref,
      );
    const spec = d.object['spec'] as Record<string, unknown>;
    if (Object.keys(spec).some((k) => k !== 'owner')) {
      yield* admitOr(
        {
          subject: d.principal.subject,
          actor: d.principal.actor,
          target: d.kind,
          part: 'spec',
          object: target,
          fields: userFields,
        },
        d.ref,
      );
    }
    if (KIND_INFO[d.kind].owned)
      yield* admitOr(
        { subject: 'control-plane', target: d.kind, part: 'spec', object: target, fields: ['spec.owner'] },
        d.ref,
      );
    return fieldManagerOf(d.principal.subject, d.principal.actor);
  });

/**
 * The desired spec with masked config leaves (`(set)`, as projections show them) replaced by the stored values: a
 * read-modify-write never overwrites a secret with its mask; a mask where nothing is stored is `invalid_field`.
 */
export const withStoredSecrets = (d: Desired, stored: KubeObject | undefined) =>
  Effect.suspend(() => {
    const spec = d.object['spec'] as Record<string, unknown>;
    if (d.kind !== 'Application' || !hasMask(spec['config'])) return Effect.succeed(spec);
    const r = unmaskConfig(spec['config'], (stored?.['spec'] as Record<string, unknown> | undefined)?.['config']);
    return 'missing' in r
      ? Effect.fail(
          apiError('invalid_field', 'validate', `${r.missing} is the mask "(set)" but no value is stored there`, {
            object: d.ref,
            causes: [{ field: r.missing, message: 'masked value with nothing stored' }],
          }),
        )
      : Effect.succeed({ ...spec, config: r.config });
  });

export interface CreateInput extends Caller {
  readonly kind: string;
  readonly namespace?: string;
  readonly body: unknown;
}

/**
 * Idempotent create (TC-28): absent ⇒ created; present with the same desired state ⇒ the same object again; present
 * with a different one ⇒ `object_exists`. Concurrent identical requests race on the API server's create: the
 * losers read the winner's object and converge on it.
 */
export const createResource = (
  input: CreateInput,
): Effect.Effect<Accepted, ApiError, KubeClient | ControlPlaneConfig | Authorizer | Auditor> => {
  // an extension kind (the body names another group): served only while its component is activated (decision 0344)
  const extension = extensionApiVersionOf(input.body);
  if (extension !== undefined) return createExtensionResource({ ...input, apiVersion: extension });
  let actor = 'unknown';
  let target: ObjectReference | undefined;
  return audited(
    'create',
    () => actor,
    () => target,
    Effect.gen(function* () {
      const kind = yield* kindOf(input.kind, undefined);
      const ns = yield* namespaceFor(kind, input.namespace, 'route');
      const principal = yield* authorize(input, 'create', kind, ns);
      actor = principal.actor;
      const submitted = yield* withOwnerFor(
        yield* desiredOf(kind, input.body, principal, ns !== undefined ? { namespace: ns } : {}),
        undefined,
      );
      target = submitted.ref;
      yield* crossOwnerRefusal(kind, submitted.object, submitted.ref);
      const d =
        kind === 'Application'
          ? {
              ...submitted,
              object: {
                ...submitted.object,
                spec: yield* admitApplicationSpec(
                  submitted.object['spec'] as Record<string, unknown>,
                  submitted.ref,
                  'create',
                ),
              },
            }
          : kind === 'Volume'
            ? {
                ...submitted,
                object: {
                  ...submitted.object,
                  spec: yield* admitVolumeSpec(submitted.object['spec'] as Record<string, unknown>, submitted.ref),
                },
              }
            : submitted;
      const fieldManager = yield* admitUserWrite(d, 'create');
      const client = yield* KubeClient;
      const converge = (stored: KubeObject) =>
        !visibleTo(principal, kind, stored)
          ? // The name is taken by an object the caller may not see: say so, but show nothing of it.
            Effect.fail(
              apiError(
                'object_exists',
                'write',
                `${kind} ${d.ref.namespace ? `${d.ref.namespace}/` : ''}${d.ref.name} already exists`,
                {
                  object: d.ref,
                },
              ),
            )
          : Effect.flatMap(withStoredSecrets(d, stored), (spec) => {
              const changes = desiredDifferences(
                kind,
                {
                  spec,
                  ...(d.object.metadata.labels !== undefined ? { labels: d.object.metadata.labels } : {}),
                  ...(d.object.metadata.annotations !== undefined
                    ? { annotations: d.object.metadata.annotations }
                    : {}),
                },
                stored,
                MARKER_PREFIX,
              );
              return changes.length === 0
                ? Effect.succeed<Accepted>({ accepted: true, operation: 'create', object: refOf(stored) })
                : Effect.fail(
                    apiError(
                      'object_exists',
                      'write',
                      `${kind} ${d.ref.namespace ? `${d.ref.namespace}/` : ''}${d.ref.name} already exists with a different desired state (${changes.map((c) => c.path).join(', ')})`,
                      { object: refOf(stored), current: stored, changes },
                    ),
                  );
            });
      const readExisting = client.get(d.ref).pipe(Effect.mapError((e) => fromKube(e, 'read', d.ref, false)));
      // A mask with nothing stored is refused; with an object stored under the name, it converges on that one.
      const unmasked = yield* Effect.either(withStoredSecrets(d, undefined));
      if (Either.isLeft(unmasked))
        return yield* readExisting.pipe(
          Effect.catchIf(
            (e) => e.code === 'not_found',
            () => Effect.fail(unmasked.left),
          ),
          Effect.flatMap(converge),
        );
      // Create first (no read before the write): an existing object answers AlreadyExists and is read then.
      return yield* client.create(d.object, { fieldManager }).pipe(
        Effect.map((created): Accepted => ({ accepted: true, operation: 'create', object: refOf(created) })),
        Effect.catchTag('AlreadyExists', () =>
          client.get(d.ref).pipe(
            Effect.mapError((e) => fromKube(e, 'read', d.ref, false)),
            Effect.flatMap(converge),
          ),
        ),
        Effect.mapError((e) => (e instanceof ApiError ? e : fromKube(e, 'write', d.ref, true))),
      );
    }),
  );
};

export interface UpdateInput extends Caller {
  readonly kind: string;
  /** The API group and version of an extension kind, as for reads (the body's `apiVersion` also names it). */
  readonly apiVersion?: string;
  readonly name: string;
  readonly namespace?: string;
  readonly ifMatch?: string;
  readonly body: unknown;
}

/** Update client-owned fields with optimistic concurrency (C-05): a changed version ⇒ 409 + `current`. */
export const updateResource = (
  input: UpdateInput,
): Effect.Effect<Accepted, ApiError, KubeClient | ControlPlaneConfig | Authorizer | Auditor> => {
  const extension = extensionApiVersionOf(input.body) ?? extensionApiVersion(input.apiVersion);
  if (extension !== undefined) return updateExtensionResource({ ...input, apiVersion: extension });
  let actor = 'unknown';
  let target: ObjectReference | undefined;
  return audited(
    'update',
    () => actor,
    () => target,
    Effect.gen(function* () {
      const kind = yield* kindOf(input.kind, undefined);
      const ns = yield* namespaceFor(kind, input.namespace, 'route');
      const principal = yield* authorize(input, 'update', kind, ns, input.name);
      actor = principal.actor;
      const d = yield* desiredOf(kind, input.body, principal, {
        name: input.name,
        ...(ns !== undefined ? { namespace: ns } : {}),
      });
      target = d.ref;
      const version = yield* updateVersion(
        input.ifMatch,
        (input.body as { metadata?: { resourceVersion?: unknown } }).metadata?.resourceVersion,
        d.ref,
      );
      const fieldManager = yield* admitUserWrite(d, 'spec');
      const client = yield* KubeClient;
      const stored = yield* readVisible(client, principal, kind, d.ref);
      // Ownership before the version: a 409 would hand another owner's object to the caller in `current`.
      const owned = yield* withOwnerFor(d, stored);
      yield* storedAtVersion(stored, version);
      yield* crossOwnerRefusal(kind, owned.object, owned.ref);
      const unmasked = yield* withStoredSecrets(owned, stored);
      const spec =
        kind === 'Application'
          ? yield* admitApplicationSpec(unmasked, d.ref, 'update', stored)
          : kind === 'Volume'
            ? yield* admitVolumeSpec(unmasked, d.ref, stored)
            : unmasked;
      return yield* updateAtVersion(
        client,
        stored,
        version,
        {
          spec,
          ...(d.object.metadata.labels !== undefined ? { labels: d.object.metadata.labels } : {}),
          ...(d.object.metadata.annotations !== undefined ? { annotations: d.object.metadata.annotations } : {}),
        },
        fieldManager,
        d.ref,
      );
    }),
  );
};

export interface DeleteInput extends Caller {
  readonly kind: string;
  /** The API group and version of an extension kind (absent = a kernel kind). */
  readonly apiVersion?: string;
  readonly name: string;
  readonly namespace?: string;
  readonly ifMatch?: string;
}

/** Delete bound to the version the caller read (If-Match required): a changed version ⇒ 409 + `current`. */
export const deleteResource = (
  input: DeleteInput,
): Effect.Effect<Accepted, ApiError, KubeClient | ControlPlaneConfig | Authorizer | Auditor> => {
  const extension = extensionApiVersion(input.apiVersion);
  if (extension !== undefined) return deleteExtensionResource({ ...input, apiVersion: extension });
  let actor = 'unknown';
  let target: ObjectReference | undefined;
  return audited(
    'delete',
    () => actor,
    () => target,
    Effect.gen(function* () {
      const kind = yield* kindOf(input.kind, undefined);
      const ns = yield* namespaceFor(kind, input.namespace, 'route');
      const ref = yield* objectKey(kind, input.name, ns, yield* apiVersionOf, 'route');
      target = ref;
      const principal = yield* authorize(input, 'delete', kind, ns, input.name);
      actor = principal.actor;
      const version = yield* deleteVersion(input.ifMatch, ref);
      yield* admitOr(
        {
          subject: principal.subject,
          actor: principal.actor,
          target: kind,
          part: 'delete',
          object: { name: ref.name, ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}) },
          fields: [],
        },
        ref,
      );
      const client = yield* KubeClient;
      // A global Owner deletes anything; anyone else only what it sees and owns (the read costs one GET).
      if (principal.role !== 'Owner')
        yield* ownerForWrite(principal, kind, undefined, yield* readVisible(client, principal, kind, ref), ref);
      return yield* deleteAtVersion(client, ref, version);
    }),
  );
};

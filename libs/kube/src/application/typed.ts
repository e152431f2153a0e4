// A typed view of one kind: the generic KubeClient calls, with answers decoded by an Effect Schema (wire shape ⇒
// your type) and writes encoded by it. A server answer that does not fit the Schema is a DecodeFailure naming the field.
import { Effect, ParseResult, Schema } from 'effect';
import type { DeleteOptions, KubeList, KubeObject } from '../api/objects.js';
import { DecodeFailure, type KubeError } from '../domain/errors.js';
import {
  KubeClient,
  type ApplyOptions,
  type DeleteResult,
  type ListOptions,
  type Patch,
  type PatchOptions,
  type WriteOptions,
} from './kube-client.js';

export interface TypedResource<A> {
  readonly apiVersion: string;
  readonly kind: string;
  readonly get: (name: string, namespace?: string) => Effect.Effect<A, KubeError, KubeClient>;
  readonly list: (namespace?: string, options?: ListOptions) => Effect.Effect<ReadonlyArray<A>, KubeError, KubeClient>;
  readonly create: (object: A, options?: WriteOptions) => Effect.Effect<A, KubeError, KubeClient>;
  readonly update: (object: A, options?: WriteOptions) => Effect.Effect<A, KubeError, KubeClient>;
  readonly updateStatus: (object: A, options?: WriteOptions) => Effect.Effect<A, KubeError, KubeClient>;
  readonly apply: (object: A, options: ApplyOptions) => Effect.Effect<A, KubeError, KubeClient>;
  readonly patch: (
    name: string,
    namespace: string | undefined,
    patch: Patch,
    options?: PatchOptions,
  ) => Effect.Effect<A, KubeError, KubeClient>;
  readonly delete: (
    name: string,
    namespace?: string,
    options?: DeleteOptions,
  ) => Effect.Effect<DeleteResult, KubeError, KubeClient>;
  /** Decode any object of this kind (e.g. from an informer). */
  readonly decode: (object: KubeObject) => Effect.Effect<A, DecodeFailure>;
}

/**
 * `schema` describes the whole object (apiVersion, kind, metadata, spec, status…); its encoded side must be the JSON
 * the API server stores.
 */
export const typedResource = <A, I extends KubeObject>(
  spec: { readonly apiVersion: string; readonly kind: string },
  schema: Schema.Schema<A, I>,
): TypedResource<A> => {
  const target = (verb: string) => ({ verb, apiVersion: spec.apiVersion, kind: spec.kind, path: '' });
  const decode = (o: unknown, verb = 'decode'): Effect.Effect<A, DecodeFailure> =>
    Schema.decodeUnknown(schema)(o).pipe(
      Effect.mapError(
        (e) =>
          new DecodeFailure({
            message: `${spec.kind} does not match its schema: ${ParseResult.TreeFormatter.formatErrorSync(e)}`,
            target: target(verb),
            body: JSON.stringify(o)?.slice(0, 2000) ?? '',
          }),
      ),
    );
  const encode = (a: A, verb: string): Effect.Effect<I, DecodeFailure> =>
    Schema.encode(schema)(a).pipe(
      Effect.mapError(
        (e) =>
          new DecodeFailure({
            message: `cannot encode ${spec.kind}: ${ParseResult.TreeFormatter.formatErrorSync(e)}`,
            target: target(verb),
            body: '',
          }),
      ),
    );
  const ref = (name: string, namespace?: string) => ({
    ...spec,
    name,
    ...(namespace !== undefined ? { namespace } : {}),
  });
  const write = (verb: 'create' | 'update' | 'updateStatus', a: A, o?: WriteOptions) =>
    Effect.gen(function* () {
      const c = yield* KubeClient;
      const wire = yield* encode(a, verb);
      return yield* decode(yield* c[verb](wire, o), verb);
    });
  return {
    ...spec,
    decode: (o) => decode(o),
    get: (name, namespace) =>
      Effect.flatMap(KubeClient, (c) => Effect.flatMap(c.get(ref(name, namespace)), (o) => decode(o, 'get'))),
    list: (namespace, options) =>
      Effect.flatMap(KubeClient, (c) =>
        Effect.flatMap(
          c.listAll({ ...spec, ...(namespace !== undefined ? { namespace } : {}) }, options),
          (l: KubeList) => Effect.forEach(l.items, (o) => decode(o, 'list')),
        ),
      ),
    create: (a, o) => write('create', a, o),
    update: (a, o) => write('update', a, o),
    updateStatus: (a, o) => write('updateStatus', a, o),
    apply: (a, o) =>
      Effect.gen(function* () {
        const c = yield* KubeClient;
        return yield* decode(yield* c.apply(yield* encode(a, 'apply'), o), 'apply');
      }),
    patch: (name, namespace, p, o) =>
      Effect.flatMap(KubeClient, (c) => Effect.flatMap(c.patch(ref(name, namespace), p, o), (x) => decode(x, 'patch'))),
    delete: (name, namespace, o) => Effect.flatMap(KubeClient, (c) => c.delete(ref(name, namespace), o)),
  };
};

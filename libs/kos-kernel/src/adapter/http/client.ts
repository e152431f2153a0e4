// A typed TypeScript client of the control-plane API: every answer is decoded with the same Schemas the server
// uses; every failure is a `ControlPlaneError` carrying the envelope (or a transport failure with no envelope).
import { Data, Effect, Schema } from 'effect';
import {
  Accepted,
  ActionAccepted,
  type ActionRequest,
  ApplyAccepted,
  type DesiredSet,
  DiscoveryList,
  ListPage,
  PlanResult,
  Projection,
} from '../../api/http/bodies.js';
import { type ErrorBody, ErrorEnvelope } from '../../api/http/errors.js';

export class ControlPlaneError extends Data.TaggedError('ControlPlaneError')<{
  readonly status: number;
  /** The envelope's body; absent for transport failures and answers that were not the envelope. */
  readonly error?: ErrorBody;
  readonly message: string;
}> {}

export interface ControlPlaneClientOptions {
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer <token>` once an identity module issues sessions. */
  readonly token?: string;
  readonly fetch?: typeof fetch;
}

interface ObjectAddress {
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
}

export interface ListParams {
  readonly namespace?: string;
  readonly limit?: number;
  readonly continue?: string;
  readonly labelSelector?: string;
}

const query = (params: Readonly<Record<string, string | number | undefined>>): string => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
};

export const makeControlPlaneClient = (options: ControlPlaneClientOptions) => {
  const doFetch = options.fetch ?? fetch;
  const request = <A, I>(
    schema: Schema.Schema<A, I>,
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) =>
    Effect.gen(function* () {
      const res = yield* Effect.tryPromise({
        try: (signal) =>
          doFetch(`${options.baseUrl}${path}`, {
            method,
            signal,
            headers: {
              ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
              ...(options.token !== undefined ? { authorization: `Bearer ${options.token}` } : {}),
              ...headers,
            },
            ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          }),
        catch: (e) =>
          new ControlPlaneError({ status: 0, message: `control plane unreachable: ${(e as Error).message}` }),
      });
      const text = yield* Effect.tryPromise({
        try: () => res.text(),
        catch: (e) =>
          new ControlPlaneError({ status: res.status, message: `reading the answer: ${(e as Error).message}` }),
      });
      const json = yield* Effect.try({
        try: () => JSON.parse(text) as unknown,
        catch: () =>
          new ControlPlaneError({ status: res.status, message: `the answer is not JSON: ${text.slice(0, 200)}` }),
      });
      if (res.status >= 400) {
        const envelope = Schema.decodeUnknownEither(ErrorEnvelope)(json);
        return yield* envelope._tag === 'Right'
          ? new ControlPlaneError({
              status: res.status,
              error: envelope.right.error,
              message: `${envelope.right.error.code}: ${envelope.right.error.message}`,
            })
          : new ControlPlaneError({ status: res.status, message: `HTTP ${res.status} without an envelope` });
      }
      return yield* Schema.decodeUnknown(schema)(json).pipe(
        Effect.mapError(
          (e) => new ControlPlaneError({ status: res.status, message: `unexpected answer: ${e.message}` }),
        ),
      );
    });
  const objectPath = (a: ObjectAddress) =>
    `/api/v1/resources/${encodeURIComponent(a.kind)}/${encodeURIComponent(a.name)}${query({ namespace: a.namespace })}`;
  return {
    list: (kind: string, params: ListParams = {}) =>
      request(
        ListPage,
        'GET',
        `/api/v1/resources/${encodeURIComponent(kind)}${query({ namespace: params.namespace, limit: params.limit, continue: params.continue, labelSelector: params.labelSelector })}`,
      ),
    get: (address: ObjectAddress) => request(Projection, 'GET', objectPath(address)),
    create: (kind: string, object: unknown, namespace?: string) =>
      request(Accepted, 'POST', `/api/v1/resources/${encodeURIComponent(kind)}${query({ namespace })}`, object),
    update: (address: ObjectAddress, object: unknown, ifMatch?: string) =>
      request(
        Accepted,
        'PUT',
        objectPath(address),
        object,
        ifMatch !== undefined ? { 'if-match': `"${ifMatch}"` } : {},
      ),
    delete: (address: ObjectAddress, ifMatch: string) =>
      request(Accepted, 'DELETE', objectPath(address), undefined, { 'if-match': `"${ifMatch}"` }),
    plan: (set: DesiredSet) => request(PlanResult, 'POST', '/api/v1/plan-requests', set),
    apply: (set: DesiredSet) => request(ApplyAccepted, 'POST', '/api/v1/apply-requests', set),
    action: (action: ActionRequest) => request(ActionAccepted, 'POST', '/api/v1/action-requests', action),
    discovery: () => request(DiscoveryList, 'GET', '/api/v1/discovery'),
  };
};

export type ControlPlaneClient = ReturnType<typeof makeControlPlaneClient>;

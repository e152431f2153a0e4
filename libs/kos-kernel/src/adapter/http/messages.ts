// Plain request and response values of the control-plane HTTP API (no sockets: apps/controller reads and writes
// them), and the helpers every route uses to answer JSON and read a JSON body.
import { Effect, Schema } from 'effect';
import {
  type ApiError,
  apiError,
  describeJsonError,
  describeParseError,
  envelopeOf,
  statusOf,
} from '../../application/control-plane/errors.js';

export interface HttpRequest {
  readonly method: string;
  /** Path and query, e.g. `/api/v1/resources/Application?namespace=apps`. */
  readonly url: string;
  /** Lower-case header names. */
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The body as text (undefined when none was sent). */
  readonly body?: string;
  /** Set by the server when the body exceeded its limit (the body is then not read). */
  readonly bodyTooLarge?: { readonly limitBytes: number };
  /** The peer's address, for the audit record's source (`api:<address>`). */
  readonly remoteAddress?: string;
}

/**
 * One route of the control plane's table: a path pattern and a handler per method, each needing the services `R`
 * (router.ts's table needs them all; a module's own table names only what its handlers use).
 */
export interface Route<R> {
  readonly pattern: RegExp;
  readonly methods: Readonly<
    Record<
      string,
      (m: RegExpExecArray, q: URLSearchParams, req: HttpRequest) => Effect.Effect<HttpResponse, ApiError, R>
    >
  >;
}

export interface HttpResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export const json = (status: number, value: unknown, headers: Record<string, string> = {}): HttpResponse => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  body: JSON.stringify(value),
});

export const failure = (e: ApiError): HttpResponse => json(statusOf(e), envelopeOf(e), { ...(e.headers ?? {}) });

export const parseBody = (req: HttpRequest, limitBytes?: number): Effect.Effect<unknown, ApiError> =>
  Effect.suspend(() => {
    if (req.bodyTooLarge !== undefined)
      return Effect.fail(apiError('body_too_large', 'decode', `the body exceeds ${req.bodyTooLarge.limitBytes} bytes`));
    if (limitBytes !== undefined && req.body !== undefined && Buffer.byteLength(req.body) > limitBytes)
      return Effect.fail(apiError('body_too_large', 'decode', `the body exceeds ${limitBytes} bytes`));
    if (req.body === undefined || req.body.trim() === '')
      return Effect.fail(apiError('malformed_body', 'decode', 'a JSON body is required'));
    try {
      return Effect.succeed(JSON.parse(req.body) as unknown);
    } catch (e) {
      return Effect.fail(apiError('malformed_body', 'decode', `the body is ${describeJsonError(e)}`));
    }
  });

/** A JSON body decoded with `schema` (unknown fields refused), or `malformed_body` saying what is wrong. */
export const decodeBody = <A, I>(
  req: HttpRequest,
  schema: Schema.Schema<A, I>,
  shape: string,
  limitBytes?: number,
): Effect.Effect<A, ApiError> =>
  Effect.flatMap(parseBody(req, limitBytes), (raw) =>
    Schema.decodeUnknown(schema, { onExcessProperty: 'error' })(raw).pipe(
      Effect.mapError((e) =>
        apiError('malformed_body', 'decode', `the body must be ${shape}: ${describeParseError(e)}`),
      ),
    ),
  );

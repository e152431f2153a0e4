// Continue tokens bound to their query (seed 000: 分页游标绑定对象类型、命名空间与过滤条件；不属于本次查询的游标被拒绝，
// 不会静默漏数据). The token wraps the API server's own continue token and a digest of the query (kind, namespace,
// label selector) and is signed with HMAC-SHA256 under the control plane's key (decision 0091). Pure: the key is a
// parameter.
import { Data, Either } from 'effect';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';

export interface ListQuery {
  readonly kind: string;
  readonly namespace?: string;
  readonly labelSelector?: string;
}

export class InvalidContinue extends Data.TaggedError('InvalidContinue')<{
  readonly reason: 'malformed' | 'signature' | 'other_query';
  readonly message: string;
}> {}

const enc = new TextEncoder();
const b64url = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');

/** The query a token belongs to, in one canonical string (absent and empty differ from each other). */
export const queryDigest = (q: ListQuery): string =>
  b64url(sha256(enc.encode(JSON.stringify([q.kind, q.namespace ?? null, q.labelSelector ?? null])))).slice(0, 22);

const sign = (key: Uint8Array, payload: string): string => b64url(hmac(sha256, key, enc.encode(payload)));

export const encodeContinue = (key: Uint8Array, query: ListQuery, upstream: string): string => {
  const payload = b64url(enc.encode(JSON.stringify({ q: queryDigest(query), c: upstream })));
  return `${payload}.${sign(key, payload)}`;
};

const equalStrings = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
};

/** The API server's continue token inside `token`, if the token is ours, intact and issued for this very query. */
export const decodeContinue = (
  key: Uint8Array,
  query: ListQuery,
  token: string,
): Either.Either<string, InvalidContinue> => {
  const parts = token.split('.');
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
    return Either.left(
      new InvalidContinue({ reason: 'malformed', message: 'the continue token is not one this control plane issued' }),
    );
  }
  const [payload, mac] = parts as [string, string];
  if (!equalStrings(sign(key, payload), mac)) {
    return Either.left(
      new InvalidContinue({
        reason: 'signature',
        message: 'the continue token was altered or issued by another control plane',
      }),
    );
  }
  let body: { q?: unknown; c?: unknown };
  try {
    body = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { q?: unknown; c?: unknown };
  } catch {
    return Either.left(
      new InvalidContinue({ reason: 'malformed', message: 'the continue token payload is not readable' }),
    );
  }
  if (typeof body.q !== 'string' || typeof body.c !== 'string') {
    return Either.left(
      new InvalidContinue({ reason: 'malformed', message: 'the continue token payload is incomplete' }),
    );
  }
  if (body.q !== queryDigest(query)) {
    return Either.left(
      new InvalidContinue({
        reason: 'other_query',
        message:
          'the continue token belongs to another query (kind, namespace or labelSelector differ); start the listing again without it',
      }),
    );
  }
  return Either.right(body.c);
};

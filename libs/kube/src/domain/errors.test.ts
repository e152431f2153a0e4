// Pure classification of API server answers into typed errors, and the retry rules.
import { describe, expect, it } from 'vitest';
import { classify, retryableFor, type KubeError } from './errors.js';
import { defaultRetryPolicy, retryDelayMs } from './backoff.js';

const target = { verb: 'get', path: '/api/v1/namespaces/a/configmaps/b' };
const status = (code: number, reason?: string, extra: object = {}) => ({
  kind: 'Status' as const,
  code,
  message: `m${code}`,
  ...(reason ? { reason } : {}),
  ...extra,
});

describe('classify', () => {
  it.each([
    [401, 'Unauthorized', 'Unauthorized'],
    [403, 'Forbidden', 'Forbidden'],
    [404, 'NotFound', 'NotFound'],
    [409, 'AlreadyExists', 'AlreadyExists'],
    [409, 'Conflict', 'Conflict'],
    [410, 'Expired', 'Gone'],
    [422, 'Invalid', 'Invalid'],
    [504, 'Timeout', 'Timeout'],
    [500, 'Timeout', 'Timeout'],
    [429, 'TooManyRequests', 'Unavailable'],
    [500, 'InternalError', 'Unavailable'],
    [503, 'ServiceUnavailable', 'Unavailable'],
    [400, 'BadRequest', 'BadRequest'],
    [415, 'UnsupportedMediaType', 'BadRequest'],
  ])('HTTP %i reason %s → %s', (code, reason, tag) => {
    const e = classify(code, status(code, reason), target);
    expect(e._tag).toBe(tag);
    expect(e.message).toBe(`m${code}`);
    expect(e.status?.code).toBe(code);
  });

  it('an in-stream ERROR with reason Expired is Gone whatever the code', () => {
    expect(classify(500, status(500, 'Expired'), target)._tag).toBe('Gone');
  });

  it('keeps field causes of Invalid and the Retry-After of 429 (body first, header second)', () => {
    const inv = classify(
      422,
      status(422, 'Invalid', {
        details: { causes: [{ field: 'spec.x', message: 'bad', reason: 'FieldValueInvalid' }] },
      }),
      target,
    );
    expect(inv._tag === 'Invalid' && inv.causes).toEqual([
      { field: 'spec.x', message: 'bad', reason: 'FieldValueInvalid' },
    ]);
    const a = classify(429, status(429, 'TooManyRequests', { details: { retryAfterSeconds: 3 } }), target, '9');
    expect(a._tag === 'Unavailable' && a.retryAfterSeconds).toBe(3);
    const b = classify(503, undefined, target, '7');
    expect(b._tag === 'Unavailable' && b.retryAfterSeconds).toBe(7);
    expect(b.message).toContain('HTTP 503');
  });

  it('idempotent requests retry every transient error; others only 429', () => {
    const u503 = classify(503, undefined, target) as KubeError;
    const u429 = classify(429, undefined, target) as KubeError;
    const t = classify(504, undefined, target) as KubeError;
    const nf = classify(404, undefined, target) as KubeError;
    expect([retryableFor(true, u503), retryableFor(true, t), retryableFor(true, u429), retryableFor(true, nf)]).toEqual(
      [true, true, true, false],
    );
    expect([retryableFor(false, u503), retryableFor(false, t), retryableFor(false, u429)]).toEqual([
      false,
      false,
      true,
    ]);
  });
});

describe('retryDelayMs', () => {
  it('grows exponentially, is capped, keeps the un-jittered share, and honours Retry-After', () => {
    const p = { ...defaultRetryPolicy, baseDelayMs: 100, maxDelayMs: 1000, jitter: 0.5 };
    expect([0, 1, 2, 3, 4, 10].map((a) => retryDelayMs(p, a, 1))).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(retryDelayMs(p, 2, 0)).toBe(200);
    expect(retryDelayMs(p, 0, 0, 2)).toBe(2000);
  });
});

// Property tests of the schema codecs on random records of the spec's shapes: the codec's bytes equal the generic
// encoder's for the same value, decoding round-trips, an added unknown key is unsupported-field, a removed field or a
// permuted set is invalid-encoding.
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type CborValue, decodeOrThrow, encodeOrThrow } from '../src/index.js';
import { hex } from './helpers.js';
import { Declaration, ListenerDigestFields, ReportContent } from './shapes.js';

const bytes = (n: number) => fc.uint8Array({ minLength: n, maxLength: n });
const port = fc.integer({ min: 1, max: 65535 });
const protocols = fc.subarray(['tcp', 'udp'] as const, { minLength: 1 });
const backendHost = fc.oneof(
  bytes(4).map((ipv4) => ({ ipv4 })),
  bytes(16).map((ipv6) => ({ ipv6 })),
  fc.stringMatching(/^[a-z0-9]{1,20}(\.[a-z0-9]{1,10}){0,3}$/).map((dns) => ({ dns })),
);
const declaration = fc.record({
  declaration_key: fc.string({ minLength: 1, maxLength: 12 }),
  display_name: fc.option(fc.string({ maxLength: 20 }), { nil: null }),
  description: fc.option(fc.string({ maxLength: 40 }), { nil: null }),
  enabled: fc.boolean(),
  protocols,
  backend_host: backendHost,
  backend_port: port,
  port_mode: fc.constantFrom('fixed' as const, 'auto' as const),
  requested_port: fc.option(port, { nil: null }),
});
const report = fc.record({
  scope: fc.record({ publisher_identity: bytes(32), nsd_id: bytes(16), network_id: bytes(16) }),
  strict_mode: fc.boolean(),
  declarations: fc.uniqueArray(declaration, { maxLength: 6, selector: (d) => d.declaration_key }),
});
const listener = fc.record({
  service_ref: fc.record({ nsd_id: bytes(16), network_id: bytes(16), service_id: bytes(16) }),
  publisher_identity: bytes(32),
  listener_revision: fc.bigInt({ min: 1n, max: 2n ** 64n - 1n }),
  P: port,
  protocols,
  backend_host: backendHost,
  backend_port: port,
  enforcement_policy_version: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
  enforcement_policy_digest: bytes(32),
});

/** The plain (generic) form of a codec value: bigints that fit become numbers, as the generic decoder gives them. */
const plain = (v: unknown): CborValue => decodeOrThrow(encodeOrThrow(v as CborValue));

describe('schema codecs on random records', () => {
  it('report content: codec bytes = generic bytes (after sorting), decode round-trips, digests agree', () => {
    fc.assert(
      fc.property(report, (r) => {
        const b = ReportContent.encodeOrThrow(r);
        const back = ReportContent.decodeOrThrow(b);
        expect(hex(ReportContent.encodeOrThrow(back))).toBe(hex(b));
        expect(hex(encodeOrThrow(back as never))).toBe(hex(b));
        // declarations come back sorted by UTF-8 key bytes, protocols by encoding
        const keys = back.declarations.map((d) => Buffer.from(d.declaration_key, 'utf8'));
        for (let i = 1; i < keys.length; i++)
          expect(Buffer.compare(keys[i - 1] as Buffer, keys[i] as Buffer)).toBeLessThan(0);
        for (const d of back.declarations) expect([...d.protocols]).toEqual([...d.protocols].sort());
      }),
      { numRuns: 500 },
    );
  });

  it('listener fields: codec and generic encodings agree, u64 fields come back as bigint', () => {
    fc.assert(
      fc.property(listener, (l) => {
        const b = ListenerDigestFields.encodeOrThrow(l);
        expect(hex(encodeOrThrow(l as never))).toBe(
          hex(ListenerDigestFields.encodeOrThrow({ ...l, protocols: [...l.protocols].sort() })),
        );
        const back = ListenerDigestFields.decodeOrThrow(b);
        expect(back.listener_revision).toBe(l.listener_revision);
        expect(typeof back.enforcement_policy_version).toBe('bigint');
      }),
      { numRuns: 500 },
    );
  });

  it('an extra unknown key anywhere in a declaration is unsupported-field; a removed field is invalid-encoding', () => {
    const fieldNames = Declaration.keyOrder;
    fc.assert(
      fc.property(
        declaration,
        fc.string({ unit: 'binary-ascii', maxLength: 16 }),
        fc.constantFrom(...fieldNames),
        (d, extra, drop) => {
          fc.pre(!(fieldNames as readonly string[]).includes(extra) && extra !== '__proto__');
          const value = plain(Declaration.decodeOrThrow(Declaration.encodeOrThrow(d))) as Record<string, CborValue>;
          const withExtra = encodeOrThrow({ ...value, [extra]: 1 });
          const r1 = Declaration.decode(withExtra);
          expect(Either.isLeft(r1) && r1.left._tag).toBe('UnsupportedField');
          expect(Either.isLeft(r1) && r1.left._tag === 'UnsupportedField' && r1.left.field).toBe(extra);
          const { [drop]: _removed, ...rest } = value;
          const r2 = Declaration.decode(encodeOrThrow(rest));
          expect(Either.isLeft(r2) && r2.left).toMatchObject({ _tag: 'InvalidEncoding', reason: 'missing-field' });
          const r3 = Declaration.decode(encodeOrThrow({ ...rest, [extra]: 1 }));
          expect(Either.isLeft(r3) && r3.left._tag).toBe('InvalidEncoding');
        },
      ),
      { numRuns: 500 },
    );
  });
});

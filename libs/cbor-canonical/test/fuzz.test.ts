// Fuzz-style tests: random and mutated byte strings only ever produce the typed error (never another exception), and
// every accepted input is canonical (re-encoding gives the same bytes). Work per input is bounded by construction:
// headers that claim more items or bytes than remain are rejected before anything is allocated, nesting is capped,
// and the parser reads every byte at most once — the adversarial inputs below prove the first two without timing.
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decode, encodeOrThrow, InvalidEncoding, UnsupportedField } from '../src/index.js';
import { cborValue } from './arbitraries.js';
import { hex, unhex } from './helpers.js';
import { Envelope, ReportContent } from './shapes.js';

const mutate = (b: Uint8Array, ops: ReadonlyArray<[number, number, number]>): Uint8Array => {
  let out = Array.from(b);
  for (const [kind, at, byte] of ops) {
    const i = out.length === 0 ? 0 : at % (out.length + 1);
    if (kind === 0 && out.length > 0) out[i % out.length] = byte;
    else if (kind === 1) out.splice(i, 0, byte);
    else if (kind === 2 && out.length > 0) out.splice(i % out.length, 1);
    else if (kind === 3) out = out.slice(0, i);
  }
  return Uint8Array.from(out);
};
const ops = fc.array(fc.tuple(fc.nat({ max: 3 }), fc.nat(), fc.nat({ max: 255 })), { minLength: 1, maxLength: 4 });

const checkGeneric = (bytes: Uint8Array): void => {
  let r: ReturnType<typeof decode>;
  try {
    r = decode(bytes);
  } catch (e) {
    throw new Error(`decode threw instead of returning the typed error on ${hex(bytes)}: ${String(e)}`);
  }
  if (Either.isLeft(r)) {
    expect(r.left).toBeInstanceOf(InvalidEncoding);
    expect(r.left.offset).toBeGreaterThanOrEqual(0);
    expect(r.left.offset).toBeLessThanOrEqual(bytes.length);
  } else {
    expect(hex(encodeOrThrow(r.right))).toBe(hex(bytes));
  }
};

describe('fuzz: generic decoder', () => {
  it('random byte strings give a value or InvalidEncoding, nothing else', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), checkGeneric), { numRuns: 20000 });
  });

  it('mutated valid encodings (replace, insert, delete, truncate) give a canonical value or InvalidEncoding', () => {
    fc.assert(
      fc.property(cborValue, ops, (v, o) => checkGeneric(mutate(encodeOrThrow(v), o))),
      { numRuns: 10000 },
    );
  });

  it('headers claiming huge lengths are rejected as truncated before any allocation', () => {
    for (const h of [
      '9bffffffffffffffff',
      'bbffffffffffffffff',
      '5bffffffffffffffff',
      '9b001fffffffffffff',
      '9a7fffffff00',
      'ba7fffffff0000',
    ]) {
      expect(decode(unhex(h))).toMatchObject({ left: { reason: 'truncated', offset: 0 } });
    }
    expect(decode(unhex('7bffffffffffffffff'))).toMatchObject({ left: { reason: 'text-too-large', offset: 0 } });
  });

  it('deep nesting stops at the depth limit, which is capped at 256 whatever the configuration', () => {
    const deep = unhex('81'.repeat(100_000) + '00');
    expect(decode(deep)).toMatchObject({ left: { reason: 'depth-exceeded', offset: 16 } });
    expect(decode(deep, { maxDepth: 1_000_000 })).toMatchObject({ left: { reason: 'depth-exceeded', offset: 256 } });
    expect(decode(unhex('81'.repeat(256) + '00'), { maxDepth: 1_000_000 })).toMatchObject({ _tag: 'Right' });
  });
});

describe('fuzz: schema codecs', () => {
  const env = encodeOrThrow({
    schema: 1,
    kind: 'report.replace',
    nsd_id: new Uint8Array(16).fill(1),
    network_id: new Uint8Array(16).fill(2),
    subject_identity: new Uint8Array(32).fill(3),
    runtime_generation: 1,
    runtime_id: new Uint8Array(16).fill(4),
    authority_epoch: 7,
    request_id: new Uint8Array(16).fill(5),
    session_seq: 9,
    body: { scope: { nsd_id: new Uint8Array(16) }, list: [1, 2, 'x'] },
  });
  const report = ReportContent.encodeOrThrow({
    scope: {
      publisher_identity: new Uint8Array(32).fill(9),
      nsd_id: new Uint8Array(16),
      network_id: new Uint8Array(16),
    },
    strict_mode: false,
    declarations: ['a', 'b', 'c'].map((k) => ({
      declaration_key: k,
      display_name: k.toUpperCase(),
      description: null,
      enabled: true,
      protocols: ['tcp', 'udp'] as const,
      backend_host: { ipv4: new Uint8Array([10, 0, 0, 1]) },
      backend_port: 80,
      port_mode: 'fixed' as const,
      requested_port: 40001,
    })),
  });

  it.each([
    ['Envelope', Envelope, env],
    ['ReportContent', ReportContent, report],
  ] as const)('mutated %s encodings give the value, InvalidEncoding or UnsupportedField only', (_name, codec, base) => {
    expect(Either.isRight((codec as typeof Envelope).decode(base))).toBe(true);
    fc.assert(
      fc.property(ops, (o) => {
        const m = mutate(base, o);
        const r = (codec as typeof Envelope).decode(m);
        if (Either.isLeft(r)) {
          expect(r.left instanceof InvalidEncoding || r.left instanceof UnsupportedField).toBe(true);
        } else {
          expect(hex((codec as typeof Envelope).encodeOrThrow(r.right))).toBe(hex(m));
        }
      }),
      { numRuns: 5000 },
    );
  });
});

// Schema codecs: closed records (key order computed once, unsupported-field vs invalid-encoding per §2.2 rule 9),
// sets and sorted lists (§2.2 rule 6), fixed-length byte strings, u64 counters (§2.3) and domain digests (§2.4),
// including the spec's structural vectors (empty report, listener).
import { Effect, Either, Schema } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  Codec,
  Counter,
  SortKey,
  CounterExhausted,
  decodeOrThrow,
  digestEncoded,
  digestOrThrow,
  Domain,
  encodeOrThrow,
  U64_MAX,
} from '../src/index.js';
import { counting, hex, rejectionOf, unhex } from './helpers.js';
import { BackendHost, Declaration, Envelope, ListenerDigestFields, Protocols, ReportContent } from './shapes.js';

const nsd_id = unhex('00112233445566778899aabbccddeeff');
const network_id = unhex('0190f3a0b1c2d3e4f5061728394a5b6c');
const publisher_identity = counting(32);
const scope = { publisher_identity, nsd_id, network_id };

const declaration = (key: string): typeof Declaration.Type => ({
  declaration_key: key,
  display_name: null,
  description: 'a service',
  enabled: true,
  protocols: ['tcp'],
  backend_host: { dns: 'backend.lan' },
  backend_port: 8080,
  port_mode: 'auto',
  requested_port: null,
});

describe('spec §2.6 structural vectors', () => {
  it('SHA-256("ns.service.report.v1" || 00 || a0)', () => {
    expect(hex(digestOrThrow(Domain.report, {}))).toBe(
      'a54b787a71f23c0f79c483963b0a9a2b23a2a6760a4a30b7c0888a85fe4551f9',
    );
    expect(Either.map(digestEncoded(Domain.report, unhex('a0')), hex)).toEqual(
      Either.right('a54b787a71f23c0f79c483963b0a9a2b23a2a6760a4a30b7c0888a85fe4551f9'),
    );
  });

  it('empty report: encoding and digest', () => {
    const content = { scope, strict_mode: true, declarations: [] };
    const bytes = ReportContent.encodeOrThrow(content);
    expect(hex(bytes)).toBe(
      'a36573636f7065a3666e73645f69645000112233445566778899aabbccddeeff6a6e6574776f726b5f6964500190f3a0b1c2d3e4f5061728394a5b6c727075626c69736865725f6964656e7469747958200102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f206b7374726963745f6d6f6465f56c6465636c61726174696f6e7380',
    );
    expect(hex(ReportContent.digestOrThrow(Domain.report, content))).toBe(
      '289c9377079db2f357014882f39d501a8e420feb94a552bf346936b98ef3d4bb',
    );
    expect(ReportContent.decodeOrThrow(bytes)).toEqual(content);
    // the generic encoder gives the same bytes for the same plain value
    expect(hex(encodeOrThrow(content))).toBe(hex(bytes));
  });

  it('listener: 320-byte encoding and digest', () => {
    const listener: typeof ListenerDigestFields.Type = {
      service_ref: { nsd_id, network_id, service_id: unhex('0190f3a0b1c2d3e4f5061728394a5b6d') },
      publisher_identity,
      listener_revision: 1n,
      P: 40000,
      protocols: ['udp', 'tcp'], // encoding sorts the set
      backend_host: { ipv4: unhex('7f000001') },
      backend_port: 8080,
      enforcement_policy_version: 1n,
      enforcement_policy_digest: new Uint8Array(32),
    };
    const bytes = ListenerDigestFields.encodeOrThrow(listener);
    expect(bytes.length).toBe(320);
    expect(hex(ListenerDigestFields.digestOrThrow(Domain.listener, listener))).toBe(
      '9082c22f70aff8a28fb46c26538692cd925cd6dd991c643f55a01d1a72bf99b7',
    );
    expect(ListenerDigestFields.decodeOrThrow(bytes)).toEqual({ ...listener, protocols: ['tcp', 'udp'] });
  });

  it('set vectors: ["udp","tcp"] is set-unsorted, ["tcp","tcp"] set-duplicate, both invalid-encoding', () => {
    expect(rejectionOf(unhex('826375647063746370'), Protocols)).toMatchObject({
      code: 'invalid-encoding',
      reason: 'set-unsorted',
      offset: 5,
    });
    expect(rejectionOf(unhex('826374637063746370'), Protocols)).toMatchObject({
      code: 'invalid-encoding',
      reason: 'set-duplicate',
      offset: 5,
    });
    expect(Protocols.decodeOrThrow(unhex('826374637063756470'))).toEqual(['tcp', 'udp']);
  });

  it('struct key order is the spec order (computed once, from the encoded keys)', () => {
    expect(Envelope.keyOrder).toEqual([
      'body',
      'kind',
      'nsd_id',
      'schema',
      'network_id',
      'request_id',
      'runtime_id',
      'session_seq',
      'authority_epoch',
      'subject_identity',
      'runtime_generation',
    ]);
    expect(ListenerDigestFields.keyOrder).toEqual([
      'P',
      'protocols',
      'service_ref',
      'backend_host',
      'backend_port',
      'listener_revision',
      'publisher_identity',
      'enforcement_policy_digest',
      'enforcement_policy_version',
    ]);
    expect(Declaration.keyOrder).toEqual([
      'enabled',
      'port_mode',
      'protocols',
      'description',
      'backend_host',
      'backend_port',
      'display_name',
      'requested_port',
      'declaration_key',
    ]);
  });
});

describe('closed records: unsupported-field vs invalid-encoding (§2.2 rule 9)', () => {
  const Small = Codec.struct({ a: Codec.uint(), bb: Codec.text(), c: Codec.optional(Codec.counter) });

  it('an unknown key in a canonical input is unsupported-field, with the key, its offset and path', () => {
    const e = rejectionOf(encodeOrThrow({ a: 1, bb: 'x', zz: true }), Small);
    expect(e).toMatchObject({ _tag: 'UnsupportedField', code: 'unsupported-field', field: 'zz', offset: 9, path: '' });
    const Outer = Codec.struct({ inner: Small });
    expect(rejectionOf(encodeOrThrow({ inner: { a: 1, bb: 'x', d: 0 } }), Outer)).toMatchObject({
      field: 'd',
      path: 'inner',
    });
  });

  it('an unknown key that sorts first or between known keys is found too', () => {
    expect(rejectionOf(encodeOrThrow({ a: 1, b: 2, bb: 'x' }), Small)).toMatchObject({
      _tag: 'UnsupportedField',
      field: 'b',
    });
    expect(rejectionOf(encodeOrThrow({ '': 0, a: 1, bb: 'x' }), Small)).toMatchObject({
      _tag: 'UnsupportedField',
      field: '',
    });
  });

  it('non-canonical bytes anywhere win over an unknown key (canonical check first)', () => {
    // {"a":1,"bb":"x","zz":true} with a trailing byte, and with a non-minimal integer after the unknown key
    const ok = encodeOrThrow({ a: 1, bb: 'x', zz: [1] });
    expect(rejectionOf(new Uint8Array([...ok, 0]), Small)).toMatchObject({
      _tag: 'InvalidEncoding',
      reason: 'trailing-bytes',
    });
    const bad = unhex(hex(ok).replace(/8101$/, '811801'));
    expect(rejectionOf(bad, Small)).toMatchObject({ _tag: 'InvalidEncoding', reason: 'non-minimal' });
  });

  it('codec decoding applies the limits it is given', () => {
    const T = Codec.struct({ a: Codec.text() });
    const bytes = T.encodeOrThrow({ a: 'hello' });
    expect(rejectionOf(bytes, { decode: (b: Uint8Array) => T.decode(b, { maxTextBytes: 4 }) } as never)).toMatchObject({
      reason: 'text-too-large',
      path: 'a',
    });
    expect(T.decode(bytes, { maxMessageBytes: bytes.length - 1 })).toMatchObject({
      left: { reason: 'message-too-large' },
    });
    expect(
      Codec.struct({ a: Codec.array(Codec.array(Codec.uint())) }).decode(encodeOrThrow({ a: [[1]] }), { maxDepth: 2 }),
    ).toMatchObject({
      left: { reason: 'depth-exceeded', path: 'a[0]' },
    });
  });

  it('a missing required field, a wrong type, a wrong length are invalid-encoding with the field path', () => {
    expect(rejectionOf(encodeOrThrow({ a: 1 }), Small)).toMatchObject({
      _tag: 'InvalidEncoding',
      reason: 'missing-field',
    });
    expect(rejectionOf(encodeOrThrow({ a: 1, zz: 1 }), Small)).toMatchObject({
      _tag: 'InvalidEncoding',
      reason: 'missing-field',
    });
    expect(rejectionOf(encodeOrThrow({ a: 'x', bb: 'x' }), Small)).toMatchObject({
      reason: 'wrong-type',
      path: 'a',
      offset: 3,
    });
    expect(rejectionOf(encodeOrThrow([1]), Small)).toMatchObject({ reason: 'wrong-type', path: '' });
    const badRef = {
      ...(decodeOrThrow(ReportContent.encodeOrThrow({ scope, strict_mode: false, declarations: [] })) as object),
      scope: { ...scope, nsd_id: new Uint8Array(15) },
    };
    expect(rejectionOf(encodeOrThrow(badRef as never), ReportContent)).toMatchObject({
      reason: 'wrong-length',
      path: 'scope.nsd_id',
    });
  });

  it('optional fields may be absent; absent and present both round-trip', () => {
    expect(Small.decodeOrThrow(Small.encodeOrThrow({ a: 1, bb: 'x' }))).toEqual({ a: 1, bb: 'x' });
    expect(Small.decodeOrThrow(Small.encodeOrThrow({ a: 1, bb: 'x', c: 5n }))).toEqual({ a: 1, bb: 'x', c: 5n });
    expect(hex(Small.encodeOrThrow({ a: 1, bb: 'x', c: 5n }))).toBe(hex(encodeOrThrow({ a: 1, bb: 'x', c: 5 })));
  });

  it('encoding refuses a missing field or a wrong value with the path', () => {
    expect(Small.encode({ a: 1 } as never)).toMatchObject({
      left: { _tag: 'EncodeError', reason: 'missing-field', path: 'bb' },
    });
    expect(Small.encode({ a: -1, bb: '' })).toMatchObject({ left: { reason: 'negative-integer', path: 'a' } });
    expect(Small.encode({ a: 1, bb: '', c: 0n })).toMatchObject({ left: { reason: 'out-of-range', path: 'c' } });
  });

  it('the generic struct path (a "__proto__" field, or more than 64 fields) behaves like the specialised one', () => {
    const Proto = Codec.struct(
      Object.fromEntries([
        ['__proto__', Codec.uint()],
        ['a', Codec.optional(Codec.bool)],
      ]) as never,
    ) as unknown as typeof Small;
    const protoValue = JSON.parse('{"__proto__": 7}');
    const protoBytes = encodeOrThrow(protoValue);
    expect(hex(Proto.encodeOrThrow(protoValue))).toBe(hex(protoBytes));
    const back = Proto.decodeOrThrow(protoBytes) as Record<string, unknown>;
    expect(Object.keys(back)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    const fields = Object.fromEntries(
      Array.from({ length: 65 }, (_, i) => [`f${i}`, i % 2 === 0 ? Codec.uint() : Codec.optional(Codec.uint())]),
    );
    const Wide = Codec.struct(fields);
    const value = Object.fromEntries(
      Array.from({ length: 65 }, (_, i) => [`f${i}`, i]).filter(([, i]) => (i as number) % 4 !== 1),
    );
    expect(Wide.decodeOrThrow(Wide.encodeOrThrow(value as never))).toEqual(value);
    expect(hex(Wide.encodeOrThrow(value as never))).toBe(hex(encodeOrThrow(value as never)));
    expect(rejectionOf(encodeOrThrow({ ...value, zz: 1 } as never), Wide)).toMatchObject({
      _tag: 'UnsupportedField',
      field: 'zz',
    });
    const { f0: _dropped, ...withoutF0 } = value;
    expect(rejectionOf(encodeOrThrow({ ...withoutF0, f1: 1 } as never), Wide)).toMatchObject({
      reason: 'missing-field',
    });
    expect(Wide.encode({ f2: 1 } as never)).toMatchObject({ left: { reason: 'missing-field', path: 'f0' } });
  });

  it('the Effect Schema of a codec describes the decoded type', () => {
    const v = Small.decodeOrThrow(Small.encodeOrThrow({ a: 1, bb: 'x' }));
    expect(Schema.is(Small.schema)(v)).toBe(true);
    expect(Schema.is(Small.schema)({ a: -1, bb: 'x' })).toBe(false);
    expect(Schema.is(Declaration.schema)(declaration('k'))).toBe(true);
  });
});

describe('variants, literals, nullable', () => {
  it('BackendHost: one-key map; an unknown case is unsupported-field; 0 or 2 keys are invalid-encoding', () => {
    expect(BackendHost.decodeOrThrow(BackendHost.encodeOrThrow({ ipv6: new Uint8Array(16) }))).toEqual({
      ipv6: new Uint8Array(16),
    });
    expect(rejectionOf(encodeOrThrow({ host: 'x' }), BackendHost)).toMatchObject({
      _tag: 'UnsupportedField',
      field: 'host',
    });
    expect(rejectionOf(encodeOrThrow({}), BackendHost)).toMatchObject({ reason: 'wrong-type' });
    expect(rejectionOf(encodeOrThrow({ dns: 'a', ipv4: new Uint8Array(4) }), BackendHost)).toMatchObject({
      reason: 'wrong-type',
    });
    expect(rejectionOf(encodeOrThrow({ ipv4: new Uint8Array(3) }), BackendHost)).toMatchObject({
      reason: 'wrong-length',
      path: 'ipv4',
    });
  });

  it('a literal outside the list is invalid-value, or unsupported-field when the codec says so', () => {
    const Mode = Codec.literal(['fixed', 'auto']);
    const Role = Codec.literal(['publisher'], { otherwise: 'unsupported-field' });
    expect(rejectionOf(encodeOrThrow('gateway'), Mode)).toMatchObject({
      _tag: 'InvalidEncoding',
      reason: 'invalid-value',
    });
    expect(rejectionOf(encodeOrThrow('gateway'), Role)).toMatchObject({ _tag: 'UnsupportedField', field: 'gateway' });
    expect(Either.isLeft(Mode.encode('gateway' as never))).toBe(true);
  });

  it('nullable is always present: null or the value', () => {
    const N = Codec.struct({ x: Codec.nullable(Codec.bytes32) });
    expect(N.decodeOrThrow(N.encodeOrThrow({ x: null }))).toEqual({ x: null });
    expect(rejectionOf(encodeOrThrow({}), N)).toMatchObject({ reason: 'missing-field' });
  });
});

describe('sets and sorted lists', () => {
  it('a set is sorted by member encoding on encode; duplicates are an EncodeError', () => {
    const S = Codec.set(Codec.uint());
    expect(hex(S.encodeOrThrow([300, 1, 24]))).toBe(hex(encodeOrThrow([1, 24, 300])));
    expect(S.encode([1, 2, 1])).toMatchObject({ left: { reason: 'set-duplicate' } });
    // member-encoding order, not numeric order, for text: "b" (6162) sorts before "aa" (626161)
    expect(Codec.set(Codec.text()).encodeOrThrow(['aa', 'b'])).toEqual(encodeOrThrow(['b', 'aa']));
  });

  it('declarations are sorted by the UTF-8 bytes of declaration_key ("aa" before "b"), not by encoding', () => {
    const content = { scope, strict_mode: false, declarations: [declaration('b'), declaration('aa')] };
    const bytes = ReportContent.encodeOrThrow(content);
    const back = ReportContent.decodeOrThrow(bytes);
    expect(back.declarations.map((d) => d.declaration_key)).toEqual(['aa', 'b']);
    const generic = decodeOrThrow(bytes) as { declarations: unknown[] };
    const swapped = encodeOrThrow({
      ...(generic as object),
      declarations: [...generic.declarations].reverse(),
    } as never);
    expect(rejectionOf(swapped, ReportContent)).toMatchObject({ reason: 'list-unsorted', path: 'declarations[1]' });
    const dup = encodeOrThrow({
      ...(generic as object),
      declarations: [generic.declarations[0], generic.declarations[0]],
    } as never);
    expect(rejectionOf(dup, ReportContent)).toMatchObject({ reason: 'list-duplicate-key' });
    expect(ReportContent.encode({ ...content, declarations: [declaration('a'), declaration('a')] })).toMatchObject({
      left: { reason: 'list-duplicate-key' },
    });
  });

  it('lists keyed by the canonical encoding of a field (snapshot arrays): sorted on encode, checked on decode', () => {
    const Ref = Codec.struct({ id: Codec.id16, n: Codec.uint() });
    const Entry = Codec.struct({ ref: Ref, label: Codec.text() });
    const Entries = Codec.sortedList(
      Entry,
      SortKey.encoding(Ref, (e) => e.ref),
    );
    const entry = (b: number, n: number, label: string) => ({ ref: { id: new Uint8Array(16).fill(b), n }, label });
    // {id, n}: "n" (key length 1) sorts before "id" (length 2), so n decides first
    const list = [entry(1, 300, 'c'), entry(9, 2, 'a'), entry(1, 24, 'b')];
    const bytes = Entries.encodeOrThrow(list);
    expect(Entries.decodeOrThrow(bytes).map((e) => e.label)).toEqual(['a', 'b', 'c']);
    const generic = decodeOrThrow(bytes) as unknown[];
    expect(rejectionOf(encodeOrThrow([generic[1], generic[0], generic[2]] as never), Entries)).toMatchObject({
      reason: 'list-unsorted',
      path: '[1]',
    });
    expect(rejectionOf(encodeOrThrow([generic[0], generic[0]] as never), Entries)).toMatchObject({
      reason: 'list-duplicate-key',
      path: '[1]',
    });
    expect(Entries.encode([entry(1, 1, 'x'), entry(1, 1, 'y')])).toMatchObject({
      left: { reason: 'list-duplicate-key' },
    });
    expect(Entries.encode([entry(1, 2, 'x'), entry(1, 1, 'y'), entry(1, 2, 'z')])).toMatchObject({
      left: { reason: 'list-duplicate-key' },
    });
    expect(Entries.encode([entry(1, 1, 'x'), { ref: { id: new Uint8Array(3), n: 1 }, label: 'y' }])).toMatchObject({
      left: { reason: 'wrong-length' },
    });
  });

  it('minItems and maxItems bound arrays', () => {
    expect(rejectionOf(encodeOrThrow([]), Protocols)).toMatchObject({ reason: 'wrong-length' });
    const Few = Codec.array(Codec.uint(), { maxItems: 2 });
    expect(rejectionOf(encodeOrThrow([1, 2, 3]), Few)).toMatchObject({ reason: 'too-many-items' });
  });
});

describe('fixed-length byte strings and nonces', () => {
  it('id16 / bytes32 check the length', () => {
    expect(rejectionOf(encodeOrThrow(new Uint8Array(17)), Codec.id16)).toMatchObject({ reason: 'wrong-length' });
    expect(rejectionOf(encodeOrThrow(new Uint8Array(31)), Codec.bytes32)).toMatchObject({ reason: 'wrong-length' });
    expect(Codec.id16.encode(new Uint8Array(15))).toMatchObject({ left: { reason: 'wrong-length' } });
  });

  it('a nonce is 16 bytes and not all zero, both ways', () => {
    expect(rejectionOf(encodeOrThrow(new Uint8Array(16)), Codec.nonce)).toMatchObject({ reason: 'invalid-value' });
    expect(Codec.nonce.encode(new Uint8Array(16))).toMatchObject({ left: { reason: 'invalid-value' } });
    const n = new Uint8Array(16);
    n[15] = 1;
    expect(Codec.nonce.decodeOrThrow(Codec.nonce.encodeOrThrow(n))).toEqual(n);
  });
});

describe('u64 and counters (§2.3)', () => {
  it('u64 decodes as bigint at every size; uint as number within its range', () => {
    expect(Codec.u64().decodeOrThrow(unhex('01'))).toBe(1n);
    expect(Codec.u64().decodeOrThrow(unhex('1bffffffffffffffff'))).toBe(U64_MAX);
    expect(rejectionOf(unhex('1a00010000'), Codec.uint({ min: 1, max: 65535 }))).toMatchObject({
      reason: 'out-of-range',
    });
    expect(rejectionOf(unhex('1bffffffffffffffff'), Codec.uint())).toMatchObject({ reason: 'out-of-range' });
    expect(rejectionOf(unhex('00'), Codec.counter)).toMatchObject({ reason: 'out-of-range' });
  });

  it('counters start at 1, step by 1, and fail with counter-exhausted at 2^64-1 instead of wrapping', () => {
    expect(Counter.initial).toBe(1n);
    expect(Counter.next(0n)).toEqual(Either.right(1n));
    expect(Counter.next(U64_MAX - 1n)).toEqual(Either.right(U64_MAX));
    const r = Counter.next(U64_MAX);
    expect(Either.isLeft(r) && r.left).toBeInstanceOf(CounterExhausted);
    expect(Either.isLeft(r) && r.left.code).toBe('counter-exhausted');
    expect(Counter.is(0n)).toBe(false);
    expect(Counter.is(U64_MAX)).toBe(true);
  });
});

describe('digests (§2.4)', () => {
  it('exposes the spec domain strings', () => {
    expect(Domain).toEqual({
      report: 'ns.service.report.v1',
      snapshot: 'ns.service.snapshot.v1',
      listener: 'ns.service.listener.v1',
      authorization: 'ns.service.authorization.v1',
      sourceAuthorization: 'ns.service.source-authorization.v1',
    });
  });

  it('the domain separates digests of the same value and must be ASCII without NUL', () => {
    expect(hex(digestOrThrow(Domain.snapshot, {}))).not.toBe(hex(digestOrThrow(Domain.report, {})));
    expect(Either.isLeft(digestEncoded('a\u0000b', unhex('a0')))).toBe(true);
    expect(Either.isLeft(digestEncoded('é', unhex('a0')))).toBe(true);
  });
});

describe('the envelope shape (common fields, §3.2)', () => {
  it('round-trips with and without session_seq, with a body decoded later', () => {
    const env: typeof Envelope.Type = {
      schema: 1,
      kind: 'report.head',
      nsd_id,
      network_id,
      subject_identity: publisher_identity,
      runtime_generation: 3n,
      runtime_id: counting(16, 100),
      authority_epoch: null,
      request_id: counting(16, 200),
      body: { scope },
    };
    expect(Envelope.decodeOrThrow(Envelope.encodeOrThrow(env))).toEqual(env);
    const withSeq = { ...env, session_seq: 2n ** 63n };
    expect(Envelope.decodeOrThrow(Envelope.encodeOrThrow(withSeq))).toEqual(withSeq);
    expect(rejectionOf(encodeOrThrow({ ...env, schema: 2 } as never), Envelope)).toMatchObject({
      reason: 'out-of-range',
      path: 'schema',
    });
  });
});

describe('composition with Effect', () => {
  const Small = Codec.struct({ a: Codec.uint() });

  it('Either results are yieldable in Effect.gen and errors are catchable by tag', async () => {
    const roundTrip = (input: Uint8Array) =>
      Effect.gen(function* () {
        const value = yield* Small.decode(input);
        return yield* Small.encode(value);
      }).pipe(
        Effect.catchTag('UnsupportedField', (e) => Effect.succeed(`unsupported ${e.field}`)),
        Effect.catchTag('InvalidEncoding', (e) => Effect.succeed(`invalid ${e.reason}@${e.offset}`)),
      );
    expect(await Effect.runPromise(roundTrip(encodeOrThrow({ a: 5 })))).toEqual(encodeOrThrow({ a: 5 }));
    expect(await Effect.runPromise(roundTrip(encodeOrThrow({ a: 5, b: 1 })))).toBe('unsupported b');
    expect(await Effect.runPromise(roundTrip(unhex('a161611817')))).toBe('invalid non-minimal@3');
  });

  it('transform maps a wire shape to a domain shape (UUID text over 16 bytes)', () => {
    const uuidText = (b: Uint8Array): string => {
      const h = hex(b);
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    };
    const Uuid = Codec.transform(Codec.id16, {
      schema: Schema.String,
      decode: (b) => uuidText(b),
      encode: (s) => unhex(s.replaceAll('-', '')),
      message: 'not a UUID',
    });
    const text = '00112233-4455-6677-8899-aabbccddeeff';
    expect(hex(Uuid.encodeOrThrow(text))).toBe('50' + '00112233445566778899aabbccddeeff');
    expect(Uuid.decodeOrThrow(Uuid.encodeOrThrow(text))).toBe(text);
    const Even = Codec.transform(Codec.uint(), {
      schema: Schema.Number,
      decode: (n) => (n % 2 === 0 ? n / 2 : undefined),
      encode: (h) => h * 2,
      message: 'odd',
    });
    expect(rejectionOf(unhex('03'), Even)).toMatchObject({ reason: 'invalid-value' });
    expect(Even.decodeOrThrow(unhex('04'))).toBe(2);
  });
});

describe('embedded items: Codec.raw and fromValue', () => {
  const Msg = Codec.struct({ kind: Codec.text(), body: Codec.raw });
  const Head = Codec.struct({ scope: Codec.struct({ nsd_id: Codec.id16 }) });

  it('keeps a body as its canonical bytes: decode it later by kind, digest it as received', () => {
    const body = encodeOrThrow({ scope: { nsd_id: nsd_id } });
    const bytes = Msg.encodeOrThrow({ kind: 'report.head', body });
    expect(hex(bytes)).toBe(hex(encodeOrThrow({ kind: 'report.head', body: { scope: { nsd_id } } })));
    const msg = Msg.decodeOrThrow(bytes);
    expect(hex(msg.body)).toBe(hex(body));
    expect(Head.decodeOrThrow(msg.body)).toEqual({ scope: { nsd_id } });
    expect(Either.map(digestEncoded(Domain.report, msg.body), hex)).toEqual(
      Either.right(hex(digestOrThrow(Domain.report, { scope: { nsd_id } }))),
    );
  });

  it('a raw body is checked strictly on decode and must be one canonical item on encode', () => {
    const bad = unhex(hex(encodeOrThrow({ kind: 'x', body: [1] })).replace('8101', '811801'));
    expect(rejectionOf(bad, Msg)).toMatchObject({ reason: 'non-minimal', path: 'body' });
    expect(Msg.encode({ kind: 'x', body: unhex('1817') })).toMatchObject({
      left: { reason: 'invalid-value', path: 'body' },
    });
    expect(Msg.encode({ kind: 'x', body: unhex('0000') })).toMatchObject({ left: { reason: 'invalid-value' } });
    expect(Msg.encode({ kind: 'x', body: new Uint8Array() })).toMatchObject({ left: { reason: 'invalid-value' } });
  });

  it('fromValue reads a generic value with a codec', () => {
    expect(Head.fromValue({ scope: { nsd_id } })).toEqual(Either.right({ scope: { nsd_id } }));
    expect(Head.fromValue({ scope: { nsd_id }, extra: 1 })).toMatchObject({
      left: { _tag: 'UnsupportedField', field: 'extra' },
    });
    expect(Head.fromValue({ scope: { nsd_id: new Uint8Array(3) } })).toMatchObject({
      left: { reason: 'wrong-length', path: 'scope.nsd_id' },
    });
    expect(Head.fromValue({ scope: -1 } as never)).toMatchObject({ left: { _tag: 'EncodeError' } });
  });
});

describe('Codec.keepBytes: decoded values remember their bytes (decision 0510)', () => {
  const Body = Codec.struct({ n: Codec.counter, tags: Codec.set(Codec.text()), id: Codec.id16 });
  const Kept = Codec.keepBytes(Body);
  const Msg = Codec.struct({ kind: Codec.text(), body: Kept, tail: Codec.uint() });

  it('a decoded value, also nested, gives back exactly the bytes of its item; others give undefined', () => {
    const body = { n: 300n, tags: ['b', 'a'], id: nsd_id };
    const bodyBytes = Body.encodeOrThrow(body);
    const msg = Msg.decodeOrThrow(Msg.encodeOrThrow({ kind: 'k', body, tail: 7 }));
    expect(hex(Kept.bytesOf(msg.body) ?? new Uint8Array())).toBe(hex(bodyBytes));
    expect(hex(Kept.bytesOf(Kept.decodeOrThrow(bodyBytes)) ?? new Uint8Array())).toBe(hex(bodyBytes));
    expect(Kept.bytesOf(body)).toBeUndefined();
    expect(Kept.bytesOf({ ...msg.body })).toBeUndefined();
    // another keepBytes codec of the same shape knows nothing of this one's values
    expect(Codec.keepBytes(Body).bytesOf(msg.body)).toBeUndefined();
    expect(hex(Kept.encodeOrThrow(msg.body))).toBe(hex(bodyBytes));
  });

  it('decodes with the same strict checks and refusals as the codec it wraps', () => {
    const good = Msg.encodeOrThrow({ kind: 'k', body: { n: 1n, tags: ['a', 'b'], id: nsd_id }, tail: 1 });
    const unsorted = unhex(hex(good).replace('8261616162', '8261626161'));
    expect(rejectionOf(unsorted, Msg)).toMatchObject({ reason: 'set-unsorted', path: 'body.tags[1]' });
    const wide = unhex(hex(good).replace('616e01', '616e1801'));
    expect(rejectionOf(wide, Msg)).toMatchObject({ reason: 'non-minimal' });
    const extra = encodeOrThrow({ kind: 'k', body: { n: 1n, tags: [], id: nsd_id, zz: 1 }, tail: 1 });
    expect(rejectionOf(extra, Msg)).toMatchObject({ _tag: 'UnsupportedField' });
  });
});

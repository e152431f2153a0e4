// The local-name DNS codec and the query → reply mapping, pure (no sockets): strict parsing of one query (malformed
// packets → FORMERR or dropped, unsupported opcode/class/type → NOTIMP, EDNS), the reply encoding, and the M6-57
// answers — all from the resolver of `names/` over the in-memory table (fake permits and a fake RNG, named so).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeReply, encodeQuery, ipv6Groups } from '../src/adapter/dns/client.js';
import { MAX_NAME_OCTETS, QTYPE, RCODE, ipv4Octets, ipv6Octets, parseQuery } from '../src/adapter/dns/message.js';
import { type DnsResponse, respond } from '../src/adapter/dns/respond.js';
import {
  LocalNames,
  type NameAnswer,
  type NameQuery,
  SHORT_NAME_FORMAT,
  inMemoryNameTable,
} from '../src/names/index.js';
import { right, seededRng } from './names-helpers.js';

const ZONE = 'ns.internal';
const hdr = (id: number, flags: number, qd: number, an = 0, ns = 0, ar = 0) => [
  id >> 8,
  id & 0xff,
  flags >> 8,
  flags & 0xff,
  0,
  qd,
  0,
  an,
  0,
  ns,
  0,
  ar,
];
const q = (name: string, qtype: number = QTYPE.AAAA) => [
  ...name.split('.').flatMap((l) => [l.length, ...Buffer.from(l)]),
  0,
  qtype >> 8,
  qtype & 0xff,
  0,
  1,
];
const bytes = (...parts: number[][]) => Uint8Array.from(parts.flat());
const never = (): NameAnswer => {
  throw new Error('the resolver must not be asked');
};
const rcodeOf = (r: DnsResponse) => (r.reply === null ? null : decodeReply(r.reply)?.rcode);

/** LocalNames over the in-memory table, with fake permits (ref → deadline ms) and the clock as a parameter. */
const fakeNames = () => {
  const fakePermits = new Map<string, number>();
  const names = new LocalNames(inMemoryNameTable(SHORT_NAME_FORMAT), {
    zone: ZONE,
    rng: seededRng(7),
    permitRemainingMs: (ref, now) => Math.max(0, (fakePermits.get(ref) ?? 0) - now),
  });
  let now = 1_000;
  const ask = (packet: Uint8Array) => respond(packet, (query: NameQuery) => names.resolve(query, now));
  return { names, fakePermits, ask, at: (t: number) => void (now = t) };
};

describe('DNS codec: parsing one query', () => {
  it('M6-57 DNS an AAAA query round-trips: id, RD, opcode, the question echoed verbatim, one AAAA record owned by the question name', () => {
    const { names, fakePermits, ask } = fakeNames();
    right(names.nickname('nas', { ref: 'svc-nas', address: 'fd00::1:2' }));
    fakePermits.set('svc-nas', 1_000 + 25_500);
    const packet = encodeQuery('NAS.ns.internal', QTYPE.AAAA, { id: 0xbeef });
    const r = ask(packet);
    expect(r.outcome).toBe('answer');
    const d = decodeReply(r.reply as Uint8Array);
    expect(d).toMatchObject({
      id: 0xbeef,
      qr: true,
      opcode: 0,
      aa: true,
      tc: false,
      rd: true,
      ra: false,
      rcode: RCODE.NOERROR,
      authority: 0,
      opt: null,
    });
    expect(d?.question).toEqual({ name: 'NAS.ns.internal', qtype: QTYPE.AAAA, qclass: 1 }); // the asker's case, echoed
    expect(d?.answers).toHaveLength(1);
    expect(d?.answers[0]).toMatchObject({ name: 'NAS.ns.internal', type: QTYPE.AAAA, ttl: 25 });
    expect(ipv6Groups(d?.answers[0]?.rdata as Uint8Array)).toBe('fd00:0:0:0:0:0:1:2');
  });

  it('M6-57 DNS malformed packets: truncated header and responses are dropped; QDCOUNT 0/2, label > 63, name > 255, compression loops, truncation and trailing octets are FORMERR', () => {
    const cases: [string, Uint8Array, number | null][] = [
      ['empty', new Uint8Array(0), null],
      ['truncated header (11 octets)', bytes(hdr(1, 0x0100, 1)).slice(0, 11), null],
      ['a response (QR=1)', bytes(hdr(1, 0x8100, 1), q('a')), null],
      ['QDCOUNT 0', bytes(hdr(1, 0x0100, 0)), RCODE.FORMERR],
      ['QDCOUNT 2', bytes(hdr(1, 0x0100, 2), q('a'), q('b')), RCODE.FORMERR],
      ['an answer record in a query', bytes(hdr(1, 0x0100, 1, 1), q('a')), RCODE.FORMERR],
      ['an authority record in a query', bytes(hdr(1, 0x0100, 1, 0, 1), q('a')), RCODE.FORMERR],
      ['label of 64 octets', bytes(hdr(1, 0x0100, 1), [64, ...Array(64).fill(97), 0, 0, 28, 0, 1]), RCODE.FORMERR],
      ['extended label type 0x40', bytes(hdr(1, 0x0100, 1), [0x41, 0, 0, 28, 0, 1]), RCODE.FORMERR],
      [
        'name of 256 octets',
        bytes(hdr(1, 0x0100, 1), q(Array.from({ length: 4 }, () => 'x'.repeat(63)).join('.'))),
        RCODE.FORMERR,
      ],
      ['compression pointer to itself', bytes(hdr(1, 0x0100, 1), [0xc0, 12, 0, 28, 0, 1]), RCODE.FORMERR],
      ['compression pointer forward', bytes(hdr(1, 0x0100, 1), [1, 97, 0xc0, 16, 0, 0, 28, 0, 1]), RCODE.FORMERR],
      ['compression pointer into the header', bytes(hdr(1, 0x0100, 1), [0xc0, 4, 0, 28, 0, 1]), RCODE.FORMERR],
      [
        'two pointers pointing at each other',
        bytes(hdr(1, 0x0100, 1), [0xc0, 14, 0xc0, 12, 0, 28, 0, 1]),
        RCODE.FORMERR,
      ],
      ['name cut inside a label', bytes(hdr(1, 0x0100, 1), [5, 97, 98]), RCODE.FORMERR],
      ['name without its terminating root label', bytes(hdr(1, 0x0100, 1), [1, 97]), RCODE.FORMERR],
      ['question cut before its class', bytes(hdr(1, 0x0100, 1), [1, 97, 0, 0, 28, 0]), RCODE.FORMERR],
      ['trailing octets', bytes(hdr(1, 0x0100, 1), q('a'), [0]), RCODE.FORMERR],
      ['ARCOUNT 2', bytes(hdr(1, 0x0100, 1, 0, 0, 2), q('a')), RCODE.FORMERR],
      [
        'an additional record that is not OPT',
        bytes(hdr(1, 0x0100, 1, 0, 0, 1), q('a'), [0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4]),
        RCODE.FORMERR,
      ],
      [
        'OPT data overrunning the packet',
        bytes(hdr(1, 0x0100, 1, 0, 0, 1), q('a'), [0, 0, 41, 4, 208, 0, 0, 0, 0, 0, 9, 0]),
        RCODE.FORMERR,
      ],
      [
        'an EDNS option overrunning the OPT data',
        bytes(hdr(1, 0x0100, 1, 0, 0, 1), q('a'), [0, 0, 41, 4, 208, 0, 0, 0, 0, 0, 4, 0, 10, 0, 8]),
        RCODE.FORMERR,
      ],
      ['OPT as the question type', bytes(hdr(1, 0x0100, 1), q('a', QTYPE.OPT)), RCODE.FORMERR],
    ];
    for (const [what, packet, rcode] of cases) {
      const r = respond(packet, never);
      expect({ what, rcode: rcodeOf(r) }).toEqual({ what, rcode });
      if (r.reply !== null)
        expect({ what, question: decodeReply(r.reply)?.question, answers: decodeReply(r.reply)?.answers }).toEqual({
          what,
          question: null,
          answers: [],
        });
      else expect(r.outcome).toBe('dropped');
    }
    // the limits themselves are fine: a 63-octet label, a 255-octet name
    const longest = [Array.from({ length: 3 }, () => 'x'.repeat(63)).join('.'), 'x'.repeat(61)].join('.');
    expect(longest.length + 2).toBe(MAX_NAME_OCTETS);
    expect(parseQuery(bytes(hdr(1, 0, 1), q(longest)))).toMatchObject({ kind: 'query', question: { name: longest } });
    // a pointer back to the start of its own name would read `a.a.a…` for ever: refused
    expect(parseQuery(bytes(hdr(1, 0, 1), [1, 97, 0xc0, 12, 0, 28, 0, 1]))).toMatchObject({
      kind: 'error',
      rcode: RCODE.FORMERR,
    });
    // a strictly backward pointer is followed (here into the middle of a label whose data holds a root octet)
    expect(parseQuery(bytes(hdr(1, 0, 1), [3, 0, 98, 99, 0xc0, 13, 0, 28, 0, 1]))).toMatchObject({
      kind: 'query',
      question: { name: '\\000bc' },
    });
    expect(parseQuery(bytes(hdr(1, 0, 1), [1, 97, 0, 0, 28, 0, 1]))).toMatchObject({
      kind: 'query',
      question: { name: 'a', qtype: 28, qclass: 1 },
    });
  });

  it('M6-57 DNS unsupported opcode, class and query types are NOTIMP; EDNS version 1 is BADVERS; EDNS 0 gets an OPT back', () => {
    const { ask } = fakeNames();
    expect(rcodeOf(respond(encodeQuery('a', QTYPE.AAAA, { opcode: 2 }), never))).toBe(RCODE.NOTIMP); // STATUS
    expect(rcodeOf(respond(encodeQuery('a', QTYPE.AAAA, { opcode: 5 }), never))).toBe(RCODE.NOTIMP); // UPDATE
    expect(decodeReply(respond(encodeQuery('a', QTYPE.AAAA, { opcode: 5 }), never).reply as Uint8Array)?.opcode).toBe(
      5,
    );
    expect(rcodeOf(respond(encodeQuery('version.bind', 16, { qclass: 3 }), never))).toBe(RCODE.NOTIMP); // CHAOS
    for (const t of [QTYPE.AXFR, QTYPE.IXFR, QTYPE.ANY]) expect(rcodeOf(ask(encodeQuery('nas', t)))).toBe(RCODE.NOTIMP);
    const bad = decodeReply(
      respond(encodeQuery('a', QTYPE.AAAA, { edns: true, ednsVersion: 1 }), never).reply as Uint8Array,
    );
    expect(bad).toMatchObject({ rcode: RCODE.BADVERS, opt: { payload: 1232, version: 0 } });
    const ok = decodeReply(ask(encodeQuery('example.com', QTYPE.AAAA, { edns: true, id: 7 })).reply as Uint8Array);
    expect(ok).toMatchObject({ id: 7, rcode: RCODE.REFUSED, opt: { payload: 1232, version: 0 } });
    // an OPT record with a cookie option (what dig sends) is accepted
    const cookie = bytes(
      hdr(9, 0x0100, 1, 0, 0, 1),
      q('ghost'),
      [0, 0, 41, 4, 208, 0, 0, 0, 0, 0, 12, 0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8],
    );
    expect(decodeReply(ask(cookie).reply as Uint8Array)).toMatchObject({
      id: 9,
      rcode: RCODE.NXDOMAIN,
      opt: { payload: 1232 },
    });
  });

  it('M6-57 DNS random bytes never throw: every packet gets a well-formed reply with its id, or is dropped (property)', () => {
    const valid = encodeQuery('nas.ns.internal', QTYPE.AAAA, { edns: true });
    const { ask, names } = fakeNames();
    right(names.nickname('nas', { ref: 'r', address: 'fd00::1' }));
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 600 }),
          // mutations of a valid query reach deeper into the parser than noise
          fc
            .tuple(
              fc.array(fc.tuple(fc.nat(valid.length - 1), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }),
              fc.nat(valid.length),
            )
            .map(([edits, cut]) => {
              const b = valid.slice(0, Math.max(cut, 2));
              for (const [i, v] of edits) if (i < b.length) b[i] = v;
              return b;
            }),
        ),
        (packet) => {
          const r = ask(packet);
          if (r.reply === null) {
            expect(r.outcome).toBe('dropped');
            return;
          }
          const d = decodeReply(r.reply);
          expect(d).not.toBeNull();
          expect(d?.qr).toBe(true);
          expect(d?.id).toBe(((packet[0] as number) << 8) | (packet[1] as number));
          expect(d?.ra).toBe(false);
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('M6-57 DNS names round-trip through the parser; octets outside [A-Za-z0-9_-] are escaped so no label can add a dot (property)', () => {
    const label = fc.uint8Array({ minLength: 1, maxLength: 63 });
    fc.assert(
      fc.property(fc.array(label, { minLength: 1, maxLength: 3 }), (labels) => {
        const wire = [...labels.flatMap((l) => [l.length, ...l]), 0, 0, 28, 0, 1];
        const p = parseQuery(bytes(hdr(3, 0, 1), wire));
        expect(p.kind).toBe('query');
        if (p.kind !== 'query') return;
        const parts = p.question.name.split('.');
        expect(parts).toHaveLength(labels.length);
        parts.forEach((text, i) => {
          const back = Buffer.from(
            text.replace(/\\(\d{3})/g, (_, d: string) => String.fromCharCode(Number(d))),
            'latin1',
          );
          expect(Uint8Array.from(back)).toEqual(labels[i]);
        });
      }),
    );
    expect(parseQuery(bytes(hdr(3, 0, 1), [3, 97, 46, 98, 0, 0, 28, 0, 1]))).toMatchObject({
      question: { name: 'a\\046b' },
    });
  });

  it('address text → octets: IPv6 (compressed, embedded IPv4) and IPv4; zone ids and junk refused (property against URL normalisation)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 }), (words) => {
        const full = words.map((w) => w.toString(16)).join(':');
        const compressed = new URL(`http://[${full}]/`).hostname.slice(1, -1);
        expect(ipv6Groups(ipv6Octets(compressed) as Uint8Array)).toBe(full);
        expect(ipv6Groups(ipv6Octets(full) as Uint8Array)).toBe(full);
      }),
    );
    // every textual form (embedded IPv4, any compression) reads as the WHATWG URL parser reads it
    fc.assert(
      fc.property(fc.ipV6(), (text) => {
        const normalised = new URL(`http://[${text}]/`).hostname.slice(1, -1);
        expect(ipv6Octets(text)).toEqual(ipv6Octets(normalised));
        expect(ipv6Octets(text)).not.toBeNull();
      }),
    );
    expect(ipv6Groups(ipv6Octets('::ffff:10.1.2.3') as Uint8Array)).toBe('0:0:0:0:0:ffff:a01:203');
    expect(ipv6Groups(ipv6Octets('::') as Uint8Array)).toBe('0:0:0:0:0:0:0:0');
    for (const bad of [
      'fe80::1%eth0',
      '1::2::3',
      '1:2:3:4:5:6:7:8:9',
      ':1:2:3:4:5:6:7',
      '12345::',
      '1.2.3.4',
      'g::1',
      '1:2:3:4:5:6:7',
    ])
      expect({ bad, octets: ipv6Octets(bad) }).toEqual({ bad, octets: null });
    expect(Array.from(ipv4Octets('10.0.255.1') as Uint8Array)).toEqual([10, 0, 255, 1]);
    for (const bad of ['10.0.0', '256.1.1.1', '01.1.1.1', '::1']) expect(ipv4Octets(bad)).toBeNull();
  });
});

describe('DNS replies from the local resolver (M6-57)', () => {
  it('M6-57 DNS positive answer TTL ≤ min(60 s, permit remaining); no permit → TTL 0; A and AAAA by the target family', () => {
    const { names, fakePermits, ask, at } = fakeNames();
    right(names.nickname('nas', { ref: 'svc-nas', address: 'fd00::7' }));
    right(names.nickname('old', { ref: 'svc-old', address: '10.9.8.7' }));
    const ttl = (name: string, type: number = QTYPE.AAAA) =>
      decodeReply(ask(encodeQuery(name, type)).reply as Uint8Array)?.answers[0]?.ttl;
    fakePermits.set('svc-nas', 1_000 + 600_000);
    expect(ttl('nas')).toBe(60);
    at(31_000);
    expect(ttl('nas.ns.internal')).toBe(30); // from the cache: 60 s counted from its first answer
    fakePermits.set('svc-nas', 31_000 + 7_900); // the permit now ends sooner than the cache entry
    expect(ttl('nas')).toBe(7);
    fakePermits.delete('svc-nas');
    expect(ttl('nas')).toBe(0);
    fakePermits.set('svc-old', 31_000 + 45_000);
    expect(ttl('old', QTYPE.A)).toBe(45);
    expect(
      Array.from(decodeReply(ask(encodeQuery('old', QTYPE.A)).reply as Uint8Array)?.answers[0]?.rdata ?? []),
    ).toEqual([10, 9, 8, 7]);
  });

  it('M6-57 DNS NXDOMAIN and NODATA carry no SOA (no downstream negative caching); the local negative cache lasts 5 s', () => {
    const { names, ask, at } = fakeNames();
    right(names.nickname('nas', { ref: 'svc-nas', address: 'fd00::7' }));
    const nx = decodeReply(ask(encodeQuery('ghost.ns.internal', QTYPE.AAAA)).reply as Uint8Array);
    expect(nx).toMatchObject({ rcode: RCODE.NXDOMAIN, aa: true, answers: [], authority: 0 });
    expect(decodeReply(ask(encodeQuery('nas', QTYPE.A)).reply as Uint8Array)).toMatchObject({
      rcode: RCODE.NOERROR,
      aa: true,
      answers: [],
      authority: 0,
    }); // NODATA
    expect(decodeReply(ask(encodeQuery('nas', 16)).reply as Uint8Array)).toMatchObject({
      rcode: RCODE.NOERROR,
      answers: [],
    }); // TXT of a managed name: NODATA
    expect(decodeReply(ask(encodeQuery('ghost', 16)).reply as Uint8Array)).toMatchObject({ rcode: RCODE.NXDOMAIN }); // TXT of an absent name
    // the name appears behind the resolver's back (straight into the table, no cache drop): the negative entry holds ≤ 5 s
    right(names.store.nickname('ghost', { ref: 'svc-g', address: 'fd00::9' }));
    at(1_000 + 4_999);
    expect(rcodeOf(ask(encodeQuery('ghost', QTYPE.AAAA)))).toBe(RCODE.NXDOMAIN);
    at(1_000 + 5_000);
    expect(rcodeOf(ask(encodeQuery('ghost', QTYPE.AAAA)))).toBe(RCODE.NOERROR);
  });

  it('M6-57 DNS a rebind is visible at once (the caches are cleared); a tombstone is NXDOMAIN at once', () => {
    const { names, fakePermits, ask } = fakeNames();
    fakePermits.set('svc-1', 10_000_000);
    fakePermits.set('svc-2', 10_000_000);
    right(names.nickname('nas', { ref: 'svc-1', address: 'fd00::1' }));
    const addr = () =>
      ipv6Groups(decodeReply(ask(encodeQuery('nas', QTYPE.AAAA)).reply as Uint8Array)?.answers[0]?.rdata as Uint8Array);
    expect(addr()).toBe('fd00:0:0:0:0:0:0:1'); // cached for 60 s now
    right(names.rebind('nas', { ref: 'svc-2', address: 'fd00::2' }));
    expect(addr()).toBe('fd00:0:0:0:0:0:0:2');
    right(names.tombstone('nas'));
    expect(rcodeOf(ask(encodeQuery('nas', QTYPE.AAAA)))).toBe(RCODE.NXDOMAIN);
  });

  it('M6-57 DNS the wire says exactly what the resolver answered — kind → rcode, TTL and address unchanged (property)', () => {
    const answerArb: fc.Arbitrary<NameAnswer> = fc.oneof(
      fc.record({
        kind: fc.constant('answer' as const),
        name: fc.constant('x'),
        type: fc.constant('AAAA' as const),
        address: fc.ipV6(),
        ttlSeconds: fc.integer({ min: 0, max: 60 }),
      }),
      fc.record({
        kind: fc.constant('answer' as const),
        name: fc.constant('x'),
        type: fc.constant('A' as const),
        address: fc.ipV4(),
        ttlSeconds: fc.integer({ min: 0, max: 60 }),
      }),
      fc.record({
        kind: fc.constant('nodata' as const),
        name: fc.constant('x'),
        ttlSeconds: fc.integer({ min: 0, max: 5 }),
      }),
      fc.record({
        kind: fc.constant('nxdomain' as const),
        name: fc.constant('x'),
        ttlSeconds: fc.integer({ min: 0, max: 5 }),
      }),
      fc.record({
        kind: fc.constant('servfail' as const),
        name: fc.constant('x'),
        reason: fc.constantFrom('state-inconsistent' as const, 'storage-unavailable' as const),
      }),
      fc.record({ kind: fc.constant('refused' as const), name: fc.constant('x') }),
      fc.record({
        kind: fc.constant('stopped' as const),
        name: fc.constant('x'),
        reason: fc.constantFrom('no-selection' as const, 'selection-invalid' as const),
      }),
    );
    const expectedRcode = {
      answer: RCODE.NOERROR,
      nodata: RCODE.NOERROR,
      nxdomain: RCODE.NXDOMAIN,
      servfail: RCODE.SERVFAIL,
      refused: RCODE.REFUSED,
      stopped: RCODE.REFUSED,
    };
    fc.assert(
      fc.property(answerArb, fc.boolean(), (answer, edns) => {
        const type = answer.kind === 'answer' ? answer.type : 'AAAA';
        const asked: NameQuery[] = [];
        const r = respond(
          encodeQuery('x', type === 'A' ? QTYPE.A : QTYPE.AAAA, { edns }),
          (query) => (asked.push(query), answer),
        );
        expect(asked).toEqual([{ name: 'x', type }]);
        const d = decodeReply(r.reply as Uint8Array);
        expect(r.outcome).toBe(answer.kind);
        expect(d?.rcode).toBe(expectedRcode[answer.kind]);
        expect(d?.authority).toBe(0);
        // only a name that is not ours is REFUSED without AA; a stopped multi-source name is ours (decision 0192)
        expect(d?.aa).toBe(answer.kind !== 'refused' && answer.kind !== 'servfail');
        if (answer.kind !== 'answer') return void expect(d?.answers).toEqual([]);
        expect(d?.answers.map((a) => a.ttl)).toEqual([answer.ttlSeconds]);
        const want = answer.type === 'A' ? ipv4Octets(answer.address) : ipv6Octets(answer.address);
        expect(d?.answers[0]?.rdata).toEqual(want);
      }),
    );
  });

  it('M6-57 DNS names outside the managed zone are REFUSED (never recursed, never sent to public DNS); a resolver failure is SERVFAIL', () => {
    const { ask } = fakeNames();
    for (const name of ['example.com', 'www.google.com', 'nas.other.internal', ''])
      expect({ name, r: decodeReply(ask(encodeQuery(name, QTYPE.AAAA)).reply as Uint8Array) }).toMatchObject({
        name,
        r: { rcode: RCODE.REFUSED, aa: false, ra: false, answers: [] },
      });
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z0-9-]{1,20}$/).filter((l) => l !== 'ns'),
        fc.constantFrom('example.org', 'com', 'internal', 'arpa'),
        (label, tld) => {
          expect(rcodeOf(ask(encodeQuery(`${label}.${tld}`, QTYPE.AAAA)))).toBe(RCODE.REFUSED);
          expect(rcodeOf(ask(encodeQuery(label, QTYPE.AAAA)))).not.toBe(RCODE.REFUSED); // a short name is always ours
        },
      ),
    );
    const throwing = respond(encodeQuery('nas', QTYPE.AAAA), () => {
      throw new Error('disk gone');
    });
    expect([throwing.outcome, rcodeOf(throwing)]).toEqual(['servfail', RCODE.SERVFAIL]);
    const corrupt = respond(encodeQuery('nas', QTYPE.AAAA), (query) => ({
      kind: 'servfail',
      name: query.name,
      reason: 'state-inconsistent',
    }));
    expect(rcodeOf(corrupt)).toBe(RCODE.SERVFAIL);
    const scoped = respond(encodeQuery('nas', QTYPE.AAAA), (query) => ({
      kind: 'answer',
      name: query.name,
      type: 'AAAA',
      address: 'fe80::1%eth0',
      ttlSeconds: 5,
    }));
    expect(rcodeOf(scoped)).toBe(RCODE.SERVFAIL);
  });
});

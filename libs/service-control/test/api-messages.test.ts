import { createHash } from 'node:crypto';
import { Domain, encode } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { toHex } from '../src/domain/bytes.js';
import { U64_MAX } from '../src/domain/counter.js';
import {
  ListenerDigestFields,
  SnapshotCodec,
  authorizationDigest,
  listenerDigest,
  snapshotDigest,
  sourceAuthorizationDigest,
} from '../src/api/snapshot.js';
import {
  DeclarationShape,
  type ReportContent,
  ReportContentCodec,
  type DeclarationWire,
  reportDigest,
} from '../src/api/report.js';
import { type Message, MessageCodecs, SignedEnvelope, decodeMessage, encodeMessage } from '../src/api/message.js';
import {
  InfoGetResponseCodec,
  MachineAuthRequestCodec,
  MachineHeartbeatCodec,
  nsdIdFromInfo,
} from '../src/api/runtime.js';
import { errCode, ok } from './helpers.js';

const hex = (h: string): Uint8Array => new Uint8Array(Buffer.from(h, 'hex'));
const seq = (from: number, n: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => from + i);
const PUB = seq(1, 32); // bytes 01..20
const NSD = hex('00112233445566778899aabbccddeeff');
const NET = hex('0190f3a0b1c2d3e4f5061728394a5b6c');
const SVC = hex('0190f3a0b1c2d3e4f5061728394a5b6d');
const sha256 = (domain: string, body: Uint8Array): string =>
  createHash('sha256')
    .update(Buffer.concat([Buffer.from(domain, 'ascii'), Buffer.from([0]), body]))
    .digest('hex');

const emptyReport: ReportContent = {
  scope: { publisher_identity: PUB, nsd_id: NSD, network_id: NET },
  strict_mode: true,
  declarations: [],
};
const listener = {
  service_ref: { nsd_id: NSD, network_id: NET, service_id: SVC },
  publisher_identity: PUB,
  listener_revision: 1n,
  P: 40000,
  protocols: ['tcp', 'udp'] as const,
  backend_host: { ipv4: hex('7f000001') },
  backend_port: 8080,
  enforcement_policy_version: 1n,
  enforcement_policy_digest: new Uint8Array(32),
};

const env = (over: Partial<Record<string, unknown>> = {}) => ({
  schema: 1,
  nsd_id: NSD,
  network_id: NET,
  subject_identity: PUB,
  runtime_generation: 3n,
  runtime_id: seq(0x40, 16),
  authority_epoch: 2n,
  request_id: seq(0x60, 16),
  ...over,
});
const head: Message = { ...env(), kind: 'report.head', body: { scope: emptyReport.scope } } as Message;
const replace = {
  ...env(),
  kind: 'report.replace',
  body: {
    scope: emptyReport.scope,
    report_revision: 1n,
    report_digest: reportDigest(emptyReport),
    content: emptyReport,
  },
} as Message;

describe('spec §2.6 vectors', () => {
  it('M6-1 M6-6 empty report: exact encoding and digest', () => {
    const bytes = ReportContentCodec.encodeOrThrow(emptyReport);
    expect(toHex(bytes)).toBe(
      'a36573636f7065a3666e73645f69645000112233445566778899aabbccddeeff6a6e6574776f726b5f6964500190f3a0b1c2d3e4f5061728394a5b6c727075626c69736865725f6964656e7469747958200102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f206b7374726963745f6d6f6465f56c6465636c61726174696f6e7380',
    );
    expect(toHex(reportDigest(emptyReport))).toBe('289c9377079db2f357014882f39d501a8e420feb94a552bf346936b98ef3d4bb');
    expect(sha256('ns.service.report.v1', bytes)).toBe(
      '289c9377079db2f357014882f39d501a8e420feb94a552bf346936b98ef3d4bb',
    );
  });

  it('M6-6 SHA-256("ns.service.report.v1" ‖ 00 ‖ a0)', () => {
    expect(sha256(Domain.report, hex('a0'))).toBe('a54b787a71f23c0f79c483963b0a9a2b23a2a6760a4a30b7c0888a85fe4551f9');
    expect(
      toHex(
        ok(
          Either.mapLeft(encode({}), () => {
            throw new Error('x');
          }),
        ),
      ),
    ).toBe('a0');
  });

  it('M6-1 M6-6 listener digest vector: 320-byte encoding and the stated digest', () => {
    const bytes = ListenerDigestFields.encodeOrThrow(listener);
    expect(bytes.length).toBe(320);
    expect(toHex(listenerDigest(listener))).toBe('9082c22f70aff8a28fb46c26538692cd925cd6dd991c643f55a01d1a72bf99b7');
  });

  it('key orders of the envelope, the listener and the declaration', () => {
    expect(MessageCodecs['report.head'].keyOrder).toEqual([
      'body',
      'kind',
      'nsd_id',
      'schema',
      'network_id',
      'request_id',
      'runtime_id',
      'authority_epoch',
      'subject_identity',
      'runtime_generation',
    ]);
    expect(MessageCodecs['snapshot.ack'].keyOrder).toEqual([
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
    expect(DeclarationShape.keyOrder).toEqual([
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

describe('digests with the five domains', () => {
  it('M6-6 every digest is SHA-256(domain ‖ 0x00 ‖ canonical CBOR)', () => {
    const ref = listener.service_ref;
    const auth = {
      service_ref: ref,
      publisher_identity: PUB,
      policy_version: 1n,
      sources: [{ consumer_identity: seq(9, 32), protocols: ['tcp'] as const }],
    };
    const src = {
      service_ref: ref,
      publisher_identity: PUB,
      consumer_identity: seq(9, 32),
      protocols: ['udp'] as const,
    };
    const snap = {
      scope: { subject_identity: PUB, nsd_id: NSD, network_id: NET },
      snapshot_revision: 1n,
      resources: [],
      listeners: [],
      grants: [],
      withdrawals: [],
    };
    const cases: [string, string, Uint8Array][] = [
      ['ns.service.report.v1', toHex(reportDigest(emptyReport)), ReportContentCodec.encodeOrThrow(emptyReport)],
      ['ns.service.listener.v1', toHex(listenerDigest(listener)), ListenerDigestFields.encodeOrThrow(listener)],
      ['ns.service.snapshot.v1', toHex(snapshotDigest(snap)), SnapshotCodec.encodeOrThrow(snap)],
      [
        'ns.service.authorization.v1',
        toHex(authorizationDigest(auth)),
        ok(
          Either.mapLeft(encode(auth as never), () => {
            throw new Error('x');
          }),
        ),
      ],
      [
        'ns.service.source-authorization.v1',
        toHex(sourceAuthorizationDigest(src)),
        ok(
          Either.mapLeft(encode(src as never), () => {
            throw new Error('x');
          }),
        ),
      ],
    ];
    for (const [domain, digest, bytes] of cases) expect(digest, domain).toBe(sha256(domain, bytes));
    expect(new Set(cases.map((c) => c[1])).size).toBe(5);
  });

  it('M6-6 the listener digest ignores display name, nickname, runtime, session and lease', () => {
    const withNoise = {
      ...listener,
      display_name: 'Web',
      nickname: 'ab123',
      runtime_id: seq(1, 16),
      session_seq: 4n,
      remaining_ms: 30000,
    };
    expect(toHex(listenerDigest(withNoise as typeof listener))).toBe(toHex(listenerDigest(listener)));
    expect(toHex(listenerDigest({ ...listener, backend_port: 8081 }))).not.toBe(toHex(listenerDigest(listener)));
  });
});

describe('closed messages', () => {
  it('round-trips report.head and report.replace byte for byte', () => {
    for (const m of [head, replace]) {
      const bytes = encodeMessage(m);
      const back = ok(decodeMessage(bytes));
      expect(back.kind).toBe(m.kind);
      expect(toHex(encodeMessage(back))).toBe(toHex(bytes));
    }
  });

  const mutate = (m: Message, f: (o: Record<string, unknown>) => void): Uint8Array => {
    const o = structuredClone(m) as unknown as Record<string, unknown>;
    f(o);
    return ok(
      Either.mapLeft(encode(o as never), (e) => {
        throw e;
      }),
    );
  };

  it('M6-3 unknown keys at any level → unsupported-field; schema ≠ 1 → unsupported-version; unknown kind → unsupported-field', () => {
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            o['extra'] = 1;
          }),
        ),
      ),
    ).toBe('unsupported-field');
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            (o['body'] as Record<string, unknown>)['x'] = true;
          }),
        ),
      ),
    ).toBe('unsupported-field');
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            ((o['body'] as Record<string, Record<string, unknown>>)['scope'] as Record<string, unknown>)['label'] = 'x';
          }),
        ),
      ),
    ).toBe('unsupported-field');
    const withDecl = (d: Record<string, unknown>) =>
      mutate(replace, (o) => {
        ((o['body'] as Record<string, Record<string, unknown>>)['content'] as Record<string, unknown>)['declarations'] =
          [d];
      });
    const decl: DeclarationWire = {
      declaration_key: 'web',
      display_name: null,
      description: null,
      enabled: true,
      protocols: ['tcp'],
      backend_host: { dns: 'web.lan' },
      backend_port: 80,
      port_mode: 'auto',
      requested_port: null,
    };
    expect(errCode(decodeMessage(withDecl({ ...decl, sni: 'example.org' })))).toBe('unsupported-field');
    expect(errCode(decodeMessage(withDecl({ ...decl, protocols: ['http'] })))).toBe('unsupported-field');
    expect(errCode(decodeMessage(withDecl({ ...decl, backend_host: { url: 'http://x' } })))).toBe('unsupported-field');
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            o['schema'] = 2;
          }),
        ),
      ),
    ).toBe('unsupported-version');
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            o['schema'] = 0;
          }),
        ),
      ),
    ).toBe('unsupported-version');
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            o['kind'] = 'report.delete';
          }),
        ),
      ),
    ).toBe('unsupported-field');
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            o['session_seq'] = 3;
          }),
        ),
      ),
    ).toBe('unsupported-field'); // not stream-bound
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            delete o['request_id'];
          }),
        ),
      ),
    ).toBe('invalid-encoding');
    expect(errCode(decodeMessage(hex('a2616201616102')))).toBe('invalid-encoding'); // non-canonical before anything else
  });

  it('M6-4 wrong ID lengths and an all-zero nonce are rejected', () => {
    const short = (o: Record<string, unknown>, k: string, n: number) => {
      o[k] = new Uint8Array(n).fill(7);
    };
    for (const [k, n] of [
      ['nsd_id', 15],
      ['network_id', 17],
      ['runtime_id', 8],
      ['request_id', 32],
      ['subject_identity', 16],
    ] as const)
      expect(errCode(decodeMessage(mutate(head, (o) => short(o, k, n)))), k).toBe('invalid-encoding');
    expect(
      errCode(
        decodeMessage(
          mutate(replace, (o) => {
            (o['body'] as Record<string, unknown>)['report_digest'] = new Uint8Array(31);
          }),
        ),
      ),
    ).toBe('invalid-encoding');
    const envelope = {
      api: 'service.control.v1' as const,
      machine_id: PUB,
      nonce: new Uint8Array(16),
      payload: encodeMessage(head),
      signature: new Uint8Array(64).fill(1),
    };
    expect(Either.isLeft(SignedEnvelope.encode(envelope))).toBe(true);
    const good = SignedEnvelope.encodeOrThrow({ ...envelope, nonce: seq(1, 16) });
    const zeroed = Buffer.from(good);
    const at = zeroed.indexOf(Buffer.from(seq(1, 16)));
    zeroed.fill(0, at, at + 16);
    expect(SignedEnvelope.decode(new Uint8Array(zeroed)).pipe(Either.isLeft)).toBe(true);
    expect(Either.isRight(SignedEnvelope.decode(good))).toBe(true);
  });

  it('M6-5 M6-10 counters are ≥ 1 on the wire; null epoch/runtime only where the kind allows it', () => {
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            o['runtime_generation'] = 0;
          }),
        ),
      ),
    ).toBe('invalid-encoding');
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            o['authority_epoch'] = null;
          }),
        ),
      ),
    ).toBe('invalid-encoding');
    expect(
      errCode(
        decodeMessage(
          mutate(head, (o) => {
            o['runtime_id'] = null;
          }),
        ),
      ),
    ).toBe('invalid-encoding');
    expect(
      errCode(
        decodeMessage(
          mutate(replace, (o) => {
            (o['body'] as Record<string, unknown>)['report_revision'] = 0;
          }),
        ),
      ),
    ).toBe('invalid-encoding');
    const floor = {
      ...env({ runtime_generation: null, runtime_id: null, authority_epoch: null }),
      kind: 'runtime.floor',
      body: {},
    } as Message;
    expect(ok(decodeMessage(encodeMessage(floor))).kind).toBe('runtime.floor');
    const bind = {
      ...env({ authority_epoch: null }),
      kind: 'runtime.bind',
      body: { mode: 'normal', floor_request_id: null, owner_recovery: false },
    } as Message;
    expect(ok(decodeMessage(encodeMessage(bind))).kind).toBe('runtime.bind');
    expect(
      errCode(
        decodeMessage(
          mutate(bind, (o) => {
            o['runtime_id'] = null;
          }),
        ),
      ),
    ).toBe('invalid-encoding');
    const maxGen = {
      ...env({ runtime_generation: U64_MAX }),
      kind: 'report.head',
      body: { scope: emptyReport.scope },
    } as Message;
    expect(ok(decodeMessage(encodeMessage(maxGen))).runtime_generation).toBe(U64_MAX);
  });

  it('M6-22 fixed mode needs requested_port, auto refuses one (closed declaration shape)', () => {
    const decl = {
      declaration_key: 'db',
      display_name: null,
      description: null,
      enabled: true,
      protocols: ['tcp'],
      backend_host: { ipv4: hex('0a000002') },
      backend_port: 5432,
    };
    const msg = (d: Record<string, unknown>) =>
      mutate(replace, (o) => {
        ((o['body'] as Record<string, Record<string, unknown>>)['content'] as Record<string, unknown>)['declarations'] =
          [d];
      });
    expect(errCode(decodeMessage(msg({ ...decl, port_mode: 'fixed', requested_port: null })))).toBe('invalid-encoding');
    expect(errCode(decodeMessage(msg({ ...decl, port_mode: 'fixed', requested_port: 0 })))).toBe('invalid-encoding');
    expect(errCode(decodeMessage(msg({ ...decl, port_mode: 'auto', requested_port: 45000 })))).toBe('invalid-encoding');
    // a content whose digest does not match is caught one layer up (report domain: digest-conflict); the shape decodes
    expect(errCode(decodeMessage(msg({ ...decl, port_mode: 'fixed', requested_port: 45000 })))).toBeNull();
  });

  it('M6-7 nsd_id comes only from info.get.service_control_nsd_id; missing → contract off, no substitute', () => {
    const info = InfoGetResponseCodec.decodeOrThrow(
      InfoGetResponseCodec.encodeOrThrow({
        capabilities: ['service_control.v1'],
        service_control_nsd_id: '00112233-4455-6677-8899-aabbccddeeff',
      }),
    );
    expect(ok(nsdIdFromInfo(info))).toEqual(NSD);
    expect(ok(nsdIdFromInfo({ capabilities: [] }))).toBeNull();
    expect(
      Either.isLeft(
        InfoGetResponseCodec.encode({
          capabilities: [],
          service_control_nsd_id: '00112233-4455-6677-8899-AABBCCDDEEFF',
        }),
      ),
    ).toBe(true);
  });

  it('M6-15 machine.auth: the top-level runtime_id must be the lowercase hex of the object; heartbeat object is exact', () => {
    const obj = {
      nsd_id: NSD,
      subject_identity: PUB,
      runtime_generation: 3n,
      runtime_id: seq(0x40, 16),
      authority_epoch: 2n,
    };
    const good = {
      network_id: NET,
      runtime_id: toHex(seq(0x40, 16)),
      capabilities: ['service_control.v1'],
      service_control: obj,
    };
    expect(Either.isRight(MachineAuthRequestCodec.encode(good))).toBe(true);
    expect(Either.isLeft(MachineAuthRequestCodec.encode({ ...good, runtime_id: toHex(seq(0x41, 16)) }))).toBe(true);
    expect(
      Either.isLeft(MachineAuthRequestCodec.encode({ ...good, runtime_id: toHex(seq(0x40, 16)).toUpperCase() })),
    ).toBe(true);
    expect(
      Either.isLeft(
        MachineHeartbeatCodec.encode({ network_id: NET, service_control: { ...obj, authority_epoch: 0n } }),
      ),
    ).toBe(true);
    const hb = MachineHeartbeatCodec.encodeOrThrow({ network_id: NET, service_control: obj });
    expect(MachineHeartbeatCodec.decodeOrThrow(hb).service_control?.runtime_generation).toBe(3n);
  });

  it('random report.replace messages: encode → decode → encode is the identity, and a flipped bit is rejected or decodes to exactly those bytes', () => {
    const declArb = fc.record({
      declaration_key: fc.string({ minLength: 1, maxLength: 8 }),
      display_name: fc.option(fc.string({ maxLength: 12 }), { nil: null }),
      description: fc.constant(null),
      enabled: fc.boolean(),
      protocols: fc.constantFrom(['tcp'] as const, ['udp'] as const, ['tcp', 'udp'] as const),
      backend_host: fc.oneof(
        fc.uint8Array({ minLength: 4, maxLength: 4 }).map((ipv4) => ({ ipv4 })),
        fc.constant({ dns: 'svc.lan' }),
      ),
      backend_port: fc.integer({ min: 1, max: 65535 }),
      port_mode: fc.constant('auto' as const),
      requested_port: fc.constant(null),
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(declArb, { selector: (d) => d.declaration_key, maxLength: 4 }),
        fc.bigInt({ min: 1n, max: U64_MAX }),
        fc.nat(),
        (decls, rev, flip) => {
          const content = { ...emptyReport, declarations: decls as DeclarationWire[] };
          const m = {
            ...replace,
            body: { scope: emptyReport.scope, report_revision: rev, report_digest: reportDigest(content), content },
          } as Message;
          const bytes = encodeMessage(m);
          const back = ok(decodeMessage(bytes));
          expect(toHex(encodeMessage(back))).toBe(toHex(bytes));
          const mutated = new Uint8Array(bytes);
          const i = flip % mutated.length;
          mutated[i] = (mutated[i] as number) ^ 0x01;
          const r = decodeMessage(mutated);
          // a changed byte either fails to decode, or decodes to a message whose canonical encoding is exactly the
          // changed bytes: nothing is silently normalized back to the original
          if (Either.isRight(r)) expect(toHex(encodeMessage(r.right))).toBe(toHex(mutated));
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('catalogue and error messages', () => {
  it('every implemented message kind is in the catalogue; and every catalogue kind is implemented', async () => {
    const { ALL_KINDS } = await import('../src/domain/kinds.js');
    expect(Object.keys(MessageCodecs).sort()).toEqual([...ALL_KINDS].sort());
    const later = { ...head, kind: 'lease.teapot' };
    const bytes = ok(
      Either.mapLeft(encode(later as never), (e) => {
        throw e;
      }),
    );
    expect(errCode(decodeMessage(bytes))).toBe('unsupported-field');
  });

  it('an error message carries the stable code and the request kind; detail only for the local owner', async () => {
    const { errorBody } = await import('../src/api/message.js');
    const { scError } = await import('../src/domain/errors.js');
    const e = scError('stale-session', 'network 0190… has seq 9');
    expect(errorBody(e, 'snapshot.ack', 'peer')).toEqual({
      error: 'stale-session',
      request_kind: 'snapshot.ack',
      detail: null,
    });
    expect(errorBody(e, 'snapshot.ack', 'local-owner').detail).toBe('network 0190… has seq 9');
    const m = {
      ...env({ runtime_generation: null, runtime_id: null, authority_epoch: null }),
      kind: 'error',
      body: errorBody(e, 'runtime.floor', 'peer'),
    } as Message;
    const back = ok(decodeMessage(encodeMessage(m)));
    expect(back.kind === 'error' && back.body.error).toBe('stale-session');
    const bad = { ...m, body: { ...errorBody(e, 'x', 'peer'), error: 'teapot' } };
    expect(
      errCode(
        decodeMessage(
          ok(
            Either.mapLeft(encode(bad as never), (x) => {
              throw x;
            }),
          ),
        ),
      ),
    ).toBe('invalid-encoding');
  });
});

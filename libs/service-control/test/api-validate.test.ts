import { encode } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bytesEqual } from '../src/domain/bytes.js';
import type { CurrentFences } from '../src/domain/fence.js';
import { type Message, encodeMessage } from '../src/api/message.js';
import { type ValidationContext, validateRequest } from '../src/api/validate.js';
import { errCode, id16, id32, ok } from './helpers.js';

const NSD = id16(900);
const NET = id16(901);
const ME = id32(1);
const current: CurrentFences = { runtime: { generation: 4n, runtimeId: id16(4) }, epoch: 7n, session: { seq: 3n } };
const ctx: ValidationContext = {
  nsdId: NSD,
  signer: ME,
  isMember: (identity, net) => bytesEqual(identity, ME) && bytesEqual(net, NET),
  fences: () => current,
};
const scope = { subject_identity: ME, nsd_id: NSD, network_id: NET };
const ack = (o: Record<string, unknown> = {}): Record<string, unknown> => ({
  schema: 1,
  kind: 'snapshot.ack',
  nsd_id: NSD,
  network_id: NET,
  subject_identity: ME,
  runtime_generation: 4n,
  runtime_id: id16(4),
  authority_epoch: 7n,
  request_id: id16(50),
  session_seq: 3n,
  body: {
    scope,
    snapshot_revision: 2n,
    snapshot_digest: id32(9),
    accepted: true,
    enforcement_applied: true,
    dns_applied: true,
    errors: [],
  },
  ...o,
});
const bytesOf = (o: Record<string, unknown>): Uint8Array =>
  ok(
    Either.mapLeft(encode(o as never), (e) => {
      throw e;
    }),
  );

// Each defect, and the code it must produce when it is the only one (spec §3.2 order).
const DEFECTS = {
  noncanonical: 'invalid-encoding',
  schema: 'unsupported-version',
  unknownKey: 'unsupported-field',
  signer: 'unauthorized',
  nsd: 'unauthorized',
  runtime: 'stale-runtime',
  epoch: 'stale-epoch',
  session: 'stale-session',
} as const;
type Defect = keyof typeof DEFECTS;
const ORDER: Defect[] = ['noncanonical', 'schema', 'unknownKey', 'signer', 'nsd', 'runtime', 'epoch', 'session'];

const build = (defects: ReadonlySet<Defect>): { bytes: Uint8Array; ctx: ValidationContext } => {
  const o = ack({
    ...(defects.has('schema') ? { schema: 2 } : {}),
    ...(defects.has('unknownKey') ? { extra: true } : {}),
    ...(defects.has('nsd') ? { nsd_id: id16(1) } : {}),
    ...(defects.has('runtime') ? { runtime_generation: 3n } : {}),
    ...(defects.has('epoch') ? { authority_epoch: 6n } : {}),
    ...(defects.has('session') ? { session_seq: 2n } : {}),
  });
  let bytes = bytesOf(o);
  if (defects.has('noncanonical')) {
    // re-encode the first map header with a non-minimal length (0xb8 n): same content, not canonical
    const n = (bytes[0] as number) & 0x1f;
    bytes = new Uint8Array([0xb8, n, ...bytes.subarray(1)]);
  }
  return { bytes, ctx: defects.has('signer') ? { ...ctx, signer: id32(2) } : ctx };
};

describe('B validates a request in the order of spec §3.2', () => {
  it('a well-formed, current snapshot.ack passes', () => {
    const { bytes } = build(new Set());
    expect(ok(validateRequest(bytes, ctx)).kind).toBe('snapshot.ack');
  });

  it('M6-3 M6-9 M6-12 M6-14 each defect alone gives its code', () => {
    for (const d of ORDER) {
      const { bytes, ctx: c } = build(new Set([d]));
      expect(errCode(validateRequest(bytes, c)), d).toBe(DEFECTS[d]);
    }
  });

  it('M6-3 M6-9 M6-12 M6-14 with several defects the earliest step decides (random combinations)', () => {
    fc.assert(
      fc.property(fc.subarray(ORDER, { minLength: 1 }), (ds) => {
        const { bytes, ctx: c } = build(new Set(ds));
        const first = ORDER.find((d) => ds.includes(d)) as Defect;
        expect(errCode(validateRequest(bytes, c))).toBe(DEFECTS[first]);
      }),
    );
  });

  it('a non-member identity is unauthorized; B→A kinds are not requests to B; report messages need no session', () => {
    const notMember = { ...ctx, isMember: () => false };
    expect(errCode(validateRequest(build(new Set()).bytes, notMember))).toBe('unauthorized');
    const push = {
      ...ack(),
      kind: 'snapshot.push',
      body: {
        snapshot: { scope, snapshot_revision: 1n, resources: [], listeners: [], grants: [], withdrawals: [] },
        snapshot_digest: id32(3),
      },
    };
    expect(errCode(validateRequest(bytesOf(push), ctx))).toBe('unsupported-field');
    const headMsg = {
      ...ack(),
      kind: 'report.head',
      body: { scope: { publisher_identity: ME, nsd_id: NSD, network_id: NET } },
    } as Record<string, unknown>;
    delete headMsg['session_seq'];
    expect(
      ok(validateRequest(encodeMessage(headMsg as Message), { ...ctx, fences: () => ({ ...current, session: null }) }))
        .kind,
    ).toBe('report.head');
  });
});

// The pure layers joined through the wire: A's and B's state machines fed by decoded canonical messages.
import { encode } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { type Bytes, toHex } from '../src/domain/bytes.js';
import { acceptReport, prepareReport } from '../src/domain/report.js';
import { applySnapshot, buildAck } from '../src/domain/snapshot.js';
import { type Message, decodeMessage, encodeMessage } from '../src/api/message.js';
import { type ReportContent, reportDigest } from '../src/api/report.js';
import {
  type GrantWire,
  type ListenerIntentWire,
  type ResourceWire,
  type SnapshotWire,
  listenerDigest,
  snapshotDigest,
} from '../src/api/snapshot.js';
import { declarationRead, declarationToWire, replaceRequest, snapshotView } from '../src/api/convert.js';
import { declarationFromLocal } from '../src/domain/declaration.js';
import { errCode, id16, id32, ok, sha } from './helpers.js';

const NSD = id16(900);
const NET = id16(901);
const A = id32(1);
const deriveN6 = (identity: Bytes): Bytes => sha(`n6:${toHex(identity)}`).slice(0, 16);
const envFields = (kind: string, extra: Record<string, unknown> = {}) => ({
  schema: 1,
  kind,
  nsd_id: NSD,
  network_id: NET,
  subject_identity: A,
  runtime_generation: 2n,
  runtime_id: id16(2),
  authority_epoch: 1n,
  request_id: id16(77),
  ...extra,
});

const ref = (i: number) => ({ nsd_id: NSD, network_id: NET, service_id: id16(i) });
const listenerOf = (i: number, rev: bigint): ListenerIntentWire => {
  const fields = {
    service_ref: ref(i),
    publisher_identity: A,
    listener_revision: rev,
    P: 40000 + i,
    protocols: ['tcp'] as const,
    backend_host: { ipv4: new Uint8Array([10, 0, 0, i]) },
    backend_port: 8000 + i,
    enforcement_policy_version: 1n,
    enforcement_policy_digest: sha(`auth${i}`),
  };
  return { ...fields, intent_digest: listenerDigest(fields), proposal: null, state: 'ready' };
};
const resourceOf = (i: number): ResourceWire => ({
  service_ref: ref(i),
  publisher_identity: A,
  n6: deriveN6(A),
  display_name: `svc ${i}`,
  protocols: ['tcp'],
  P: 40000 + i,
  status: 'available',
});
const grantOf = (i: number, consumer: number): GrantWire => ({
  service_ref: ref(i),
  publisher_identity: A,
  consumer_identity: id32(consumer),
  protocols: ['tcp'],
  policy_digest: sha(`g${i}.${consumer}`),
  grant_version: 1n,
  policy_version: 1n,
});

const snapshot = (rev: bigint, services: number[]): SnapshotWire => ({
  scope: { subject_identity: A, nsd_id: NSD, network_id: NET },
  snapshot_revision: rev,
  resources: services.map(resourceOf),
  listeners: services.map((i) => listenerOf(i, 1n)),
  grants: services.flatMap((i) => [grantOf(i, 3), grantOf(i, 2)]),
  withdrawals: [],
});

const push = (s: SnapshotWire, digest = snapshotDigest(s)): Message =>
  ({ ...envFields('snapshot.push', { session_seq: 4n }), body: { snapshot: s, snapshot_digest: digest } }) as Message;

describe('snapshot.push → A apply → snapshot.ack, through the wire', () => {
  it('M6-24 M6-26 a decoded snapshot is verified, applied all-or-nothing, and acknowledged with three separate results', () => {
    const s = snapshot(1n, [3, 1, 2]); // encoder sorts the arrays canonically
    const m = ok(decodeMessage(encodeMessage(push(s))));
    if (m.kind !== 'snapshot.push') throw new Error('kind');
    expect(m.body.snapshot.resources.map((r) => r.service_ref.service_id[15])).toEqual([1, 2, 3]);
    const view = ok(snapshotView(m.body));
    const applied = applySnapshot({ state: 'uninitialized' }, view, deriveN6);
    const ack = buildAck({ revision: view.revision, digest: view.digest }, applied, { failed: [] }, { ok: false });
    const ackMsg = {
      ...envFields('snapshot.ack', { session_seq: 4n }),
      body: {
        scope: m.body.snapshot.scope,
        snapshot_revision: ack.snapshotRevision,
        snapshot_digest: ack.snapshotDigest,
        accepted: ack.accepted,
        enforcement_applied: ack.enforcementApplied,
        dns_applied: ack.dnsApplied,
        errors: [],
      },
    } as Message;
    const back = ok(decodeMessage(encodeMessage(ackMsg)));
    expect(
      back.kind === 'snapshot.ack' && [back.body.accepted, back.body.enforcement_applied, back.body.dns_applied],
    ).toEqual([true, true, false]);
  });

  it('M6-24 a snapshot_digest that does not match the content is refused before any floor is touched', () => {
    const s = snapshot(1n, [1]);
    const m = ok(decodeMessage(encodeMessage(push(s, sha('forged')))));
    if (m.kind !== 'snapshot.push') throw new Error('kind');
    expect(errCode(snapshotView(m.body))).toBe('digest-conflict');
  });

  it('M6-24 unsorted snapshot arrays, or grants duplicated per source, are non-canonical → invalid-encoding', () => {
    const s = snapshot(1n, [1, 2]);
    const raw = {
      ...push(s),
      body: { snapshot: { ...s, resources: [resourceOf(2), resourceOf(1)] }, snapshot_digest: snapshotDigest(s) },
    };
    const bytes = ok(
      Either.mapLeft(encode(raw as never), (e) => {
        throw e;
      }),
    );
    expect(errCode(decodeMessage(bytes))).toBe('invalid-encoding');
    const dup = {
      ...push(s),
      body: { snapshot: { ...s, grants: [grantOf(1, 2), grantOf(1, 2)] }, snapshot_digest: snapshotDigest(s) },
    };
    const dupBytes = ok(
      Either.mapLeft(encode(dup as never), (e) => {
        throw e;
      }),
    );
    expect(errCode(decodeMessage(dupBytes))).toBe('invalid-encoding');
  });

  it('M6-24 a listener whose intent_digest changed at the same listener revision is refused as a whole', () => {
    const s1 = snapshot(1n, [1, 2]);
    const v1 = ok(snapshotView({ snapshot: s1, snapshot_digest: snapshotDigest(s1) }));
    const floors = ok(applySnapshot({ state: 'uninitialized' }, v1, deriveN6)).floors;
    const l2 = listenerOf(2, 1n);
    const s2: SnapshotWire = {
      ...snapshot(2n, [1, 2]),
      listeners: [
        listenerOf(1, 2n),
        { ...l2, backend_port: 9999, intent_digest: listenerDigest({ ...l2, backend_port: 9999 } as never) },
      ],
    };
    const v2 = ok(snapshotView({ snapshot: s2, snapshot_digest: snapshotDigest(s2) }));
    expect(errCode(applySnapshot({ state: 'present', floors }, v2, deriveN6))).toBe('digest-conflict');
  });
});

describe('report.replace from A to B, through the wire', () => {
  it('M6-17 M6-18 A persists and sends; B decodes, recomputes the digest and accepts; a resend is the original result', () => {
    const d = ok(
      declarationFromLocal({
        key: 'web',
        protocols: ['https'],
        backend_host: '127.0.0.1',
        backend_port: 8443,
        display_name: 'Web',
      }),
    );
    const content: ReportContent = {
      scope: { publisher_identity: A, nsd_id: NSD, network_id: NET },
      strict_mode: true,
      declarations: [declarationToWire(d)],
    };
    const plan = ok(
      prepareReport(
        {
          state: 'present',
          report: { revision: 1n, digest: sha('old'), content: new Uint8Array() },
          acceptedRevision: 1n,
        },
        declarationRead(content),
      ),
    );
    if (plan.action !== 'send' || plan.send === null) throw new Error('expected a report to send');
    const msg = {
      ...envFields('report.replace'),
      body: { scope: content.scope, report_revision: plan.send.revision, report_digest: plan.send.digest, content },
    } as Message;
    const received = ok(decodeMessage(encodeMessage(msg)));
    if (received.kind !== 'report.replace') throw new Error('kind');
    const first = ok(acceptReport(null, replaceRequest(received.body), true));
    expect(first.outcome).toBe('replace');
    expect(toHex(first.row.digest)).toBe(toHex(reportDigest(content)));
    expect(ok(acceptReport(first.row, replaceRequest(received.body), true)).outcome).toBe('original');
    // the same revision with another content is a digest conflict
    const other = { ...received.body, content: { ...content, strict_mode: false } };
    expect(
      errCode(acceptReport(first.row, replaceRequest({ ...other, report_digest: reportDigest(other.content) }), true)),
    ).toBe('digest-conflict');
    // a claimed digest that does not match the content
    expect(
      errCode(
        acceptReport(
          first.row,
          replaceRequest({ ...received.body, report_revision: 3n, report_digest: sha('x') }),
          true,
        ),
      ),
    ).toBe('digest-conflict');
  });
});

describe('runtime, machine.auth and stream binding through the wire', () => {
  it('M6-9 M6-11 runtime.bind and runtime.floor.result travel as closed messages into and out of the domain', async () => {
    const { bindRequestFromMessage, floorResultBody } = await import('../src/api/convert.js');
    const { bind, floorView } = await import('../src/domain/runtime.js');
    const m = {
      ...envFields('runtime.bind', { authority_epoch: null, runtime_generation: 5n, runtime_id: id16(5) }),
      body: { mode: 'recovery', floor_request_id: id16(60), owner_recovery: false },
    } as Message;
    const decoded = ok(decodeMessage(encodeMessage(m)));
    if (decoded.kind !== 'runtime.bind') throw new Error('kind');
    const req = bindRequestFromMessage(decoded);
    expect(req).toEqual({
      generation: 5n,
      runtimeId: id16(5),
      mode: 'recovery',
      floorRequestId: id16(60),
      ownerRecovery: false,
    });
    const b = ok(bind(null, req, 'net', 0)).binding;
    const floor = {
      ...envFields('runtime.floor.result', { authority_epoch: 3n, runtime_generation: null, runtime_id: null }),
      body: floorResultBody({ subject_identity: A, nsd_id: NSD, network_id: NET }, floorView(b, 1), 3n),
    } as Message;
    const back = ok(decodeMessage(encodeMessage(floor)));
    expect(back.kind === 'runtime.floor.result' && back.body.runtime_status).toBe('active');
    // recovery mode without the floor request is not even a valid body
    const bad = { ...m, body: { mode: 'recovery', floor_request_id: null, owner_recovery: false } };
    expect(
      errCode(
        decodeMessage(
          ok(
            Either.mapLeft(encode(bad as never), (e) => {
              throw e;
            }),
          ),
        ),
      ),
    ).toBe('invalid-encoding');
  });

  it('M6-15 M6-13 machine.auth and the stream binding object map onto the domain checks', async () => {
    const { machineAuthFromWire, machineAuthToWire, streamBindingFromWire, streamBindingToWire } =
      await import('../src/api/convert.js');
    const { MachineAuthRequestCodec, StreamBindingCodec } = await import('../src/api/runtime.js');
    const { bind, machineAuth, prepareMachineAuth } = await import('../src/domain/runtime.js');
    const { openSession, streamMayDeliver } = await import('../src/domain/session.js');
    const binding = { identity: A, nsdId: NSD, networkId: NET, generation: 5n, runtimeId: id16(5), authorityEpoch: 3n };
    const b = ok(
      bind(
        null,
        { generation: 5n, runtimeId: id16(5), mode: 'normal', floorRequestId: null, ownerRecovery: false },
        'net',
        0,
      ),
    ).binding;
    const wire = machineAuthToWire(ok(prepareMachineAuth(binding)), NET, ['service_control.v1']);
    const received = MachineAuthRequestCodec.decodeOrThrow(MachineAuthRequestCodec.encodeOrThrow(wire));
    expect(
      ok(machineAuth(b, machineAuthFromWire(received), { nsdId: NSD, identity: A, currentEpoch: 3n, now: 1 })),
    ).toBe(wire.runtime_id);
    const legacy = MachineAuthRequestCodec.decodeOrThrow(
      MachineAuthRequestCodec.encodeOrThrow({ network_id: NET, runtime_id: wire.runtime_id, capabilities: [] }),
    );
    expect(
      errCode(machineAuth(b, machineAuthFromWire(legacy), { nsdId: NSD, identity: A, currentEpoch: 3n, now: 1 })),
    ).toBe('stale-runtime');
    const mark = ok(openSession(null, 1n, id16(70), 3n)).mark;
    const sb = {
      nsdId: NSD,
      networkId: NET,
      runtimeGeneration: 5n,
      runtimeId: id16(5),
      authorityEpoch: 3n,
      sessionSeq: 1n,
      sessionRequestId: id16(70),
    };
    const back = streamBindingFromWire(
      StreamBindingCodec.decodeOrThrow(StreamBindingCodec.encodeOrThrow(streamBindingToWire(sb))),
    );
    const tuple = { nsdId: NSD, networkId: NET, runtime: { generation: 5n, runtimeId: id16(5) }, epoch: 3n, mark };
    expect(streamMayDeliver(back, tuple)).toBe(true);
    expect(streamMayDeliver({ ...back, sessionRequestId: id16(71) }, tuple)).toBe(false);
  });
});

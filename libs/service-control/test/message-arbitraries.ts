// fast-check generators of valid Messages of every kind of the kinds table: the envelope values each kind's class
// allows (nulls for bind/bootstrap/echo, `session_seq` for stream kinds) and a body of the kind's closed shape,
// including the cross-field rules the body codecs refine (fixed/auto port, granted ⇔ grant_id, …).
import fc from 'fast-check';
import { LEASE_RESULT_CODES } from '../src/api/lease.js';
import type { Message } from '../src/api/message.js';
import { B_PORT_STATES, PORT_RESULTS } from '../src/api/port.js';
import { LISTENER_STATES } from '../src/api/snapshot.js';
import { ERROR_CODES } from '../src/domain/errors.js';
import { ALL_KINDS, KINDS, type Kind } from '../src/domain/kinds.js';

const U64_MAX = (1n << 64n) - 1n;
const bytes = (n: number) => fc.uint8Array({ minLength: n, maxLength: n });
const id16 = bytes(16);
const b32 = bytes(32);
const counter = fc.bigInt({ min: 1n, max: U64_MAX });
const u64 = fc.bigInt({ min: 0n, max: U64_MAX });
const port = fc.integer({ min: 1, max: 65535 });
const text = (minLength: number, maxLength: number) => fc.string({ minLength, maxLength });
const protocols = fc.constantFrom<('tcp' | 'udp')[]>(['tcp'], ['udp'], ['tcp', 'udp']);
const serviceRef = fc.record({ nsd_id: id16, network_id: id16, service_id: id16 });
const refKey = (r: { readonly service_ref: { readonly service_id: Uint8Array } }) =>
  Buffer.from(r.service_ref.service_id).toString('hex');
const subjectScope = fc.record({ subject_identity: b32, nsd_id: id16, network_id: id16 });
const publisherScope = fc.record({ publisher_identity: b32, nsd_id: id16, network_id: id16 });
const backendHost = fc.oneof(
  bytes(4).map((ipv4) => ({ ipv4 })),
  bytes(16).map((ipv6) => ({ ipv6 })),
  fc.constantFrom('svc.lan', 'db.example.org', 'a').map((dns) => ({ dns })),
);
const errorCode = fc.constantFrom(...ERROR_CODES);
const proposalRef = fc.record({
  service_ref: serviceRef,
  listener_revision: counter,
  intent_digest: b32,
  allocation_round: counter,
  proposal_seq: counter,
  proposal_id: id16,
  P: port,
});

const declaration = fc
  .record({
    declaration_key: text(1, 8),
    display_name: fc.option(text(0, 12), { nil: null }),
    description: fc.option(text(0, 12), { nil: null }),
    enabled: fc.boolean(),
    protocols,
    backend_host: backendHost,
    backend_port: port,
    fixed: fc.option(port, { nil: null }),
  })
  .map(({ fixed, ...d }) => ({
    ...d,
    port_mode: fixed === null ? ('auto' as const) : ('fixed' as const),
    requested_port: fixed,
  }));
const reportContent = fc.record({
  scope: publisherScope,
  strict_mode: fc.boolean(),
  declarations: fc.uniqueArray(declaration, { maxLength: 4, selector: (d) => d.declaration_key }),
});

const readyBody = fc.record({
  service_ref: serviceRef,
  refresh_seq: counter,
  listener_revision: counter,
  intent_digest: b32,
  proposal_id: id16,
  allocation_round: counter,
  proposal_seq: counter,
  P: port,
  snapshot_revision: counter,
  snapshot_digest: b32,
  proof: fc.record({ installed_protocols: protocols, installed_P: port, enforcement_policy_digest: b32 }),
});

const snapshot = fc.record({
  scope: subjectScope,
  snapshot_revision: counter,
  resources: fc.uniqueArray(
    fc.record({
      service_ref: serviceRef,
      publisher_identity: b32,
      n6: bytes(16),
      display_name: fc.option(text(0, 8), { nil: null }),
      protocols,
      P: fc.option(port, { nil: null }),
      status: fc.constantFrom('pending' as const, 'available' as const),
    }),
    { maxLength: 3, selector: refKey },
  ),
  listeners: fc.uniqueArray(
    fc.record({
      service_ref: serviceRef,
      publisher_identity: b32,
      listener_revision: counter,
      P: fc.option(port, { nil: null }),
      protocols,
      backend: fc.option(fc.tuple(backendHost, port), { nil: null }),
      enforcement_policy_version: counter,
      enforcement_policy_digest: b32,
      intent_digest: b32,
      proposal: fc.option(
        fc
          .tuple(proposalRef, fc.integer({ min: 1, max: 8 }))
          .map(([p, candidate_index]) => ({ ...p, candidate_index })),
        { nil: null },
      ),
      state: fc.constantFrom(...LISTENER_STATES),
    }),
    { maxLength: 2, selector: refKey },
  ),
  grants: fc.uniqueArray(
    fc.record({
      service_ref: serviceRef,
      publisher_identity: b32,
      consumer_identity: b32,
      protocols,
      policy_digest: b32,
      grant_version: counter,
      policy_version: counter,
    }),
    { maxLength: 2, selector: refKey },
  ),
  withdrawals: fc.uniqueArray(
    fc.record({
      service_ref: serviceRef,
      publisher_identity: b32,
      consumer_identity: fc.option(b32, { nil: null }),
      listener_revision: counter,
    }),
    { maxLength: 2, selector: refKey },
  ),
});

const leaseResultItem = fc
  .record({
    request_id: id16,
    scope: subjectScope,
    authority_epoch: counter,
    runtime_generation: counter,
    runtime_id: id16,
    session_seq: counter,
    service_ref: serviceRef,
    listener_revision: counter,
    intent_digest: b32,
    grant_id: id16,
    seq: counter,
    consumer: fc.option(fc.tuple(counter, b32), { nil: null }),
    remaining_ms: u64,
    result: fc.constantFrom(...LEASE_RESULT_CODES),
  })
  .map(({ grant_id, seq, consumer, remaining_ms, result, ...r }) => ({
    ...r,
    grant_id: result === 'granted' ? grant_id : null,
    remaining_ms: result === 'granted' ? remaining_ms : 0n,
    result,
    ...(consumer === null
      ? { refresh_seq: seq }
      : { consumer_seq: seq, snapshot_revision: consumer[0], snapshot_digest: consumer[1] }),
  }));

/** One arbitrary body per kind: a kind added to the table without one here fails to compile. */
const BODIES: { readonly [K in Kind]: fc.Arbitrary<unknown> } = {
  'runtime.floor': fc.constant({}),
  'runtime.floor.result': fc.record({
    scope: subjectScope,
    runtime_generation: fc.option(counter, { nil: null }),
    runtime_id: fc.option(id16, { nil: null }),
    runtime_status: fc.constantFrom('active', 'expired', 'stopped', 'none'),
    authority_epoch: counter,
  }),
  'runtime.bind': fc
    .record({ floor: fc.option(id16, { nil: null }), owner_recovery: fc.boolean() })
    .map(({ floor, owner_recovery }) => ({
      mode: floor === null ? 'normal' : 'recovery',
      floor_request_id: floor,
      owner_recovery,
    })),
  'runtime.bind.result': fc.record({
    authority_epoch: counter,
    runtime_generation: counter,
    runtime_id: id16,
    session_floor: u64,
  }),
  'session.open': fc.constant({}),
  'session.open.result': fc.record({ session_seq: counter, session_request_id: id16, authority_epoch: counter }),
  'report.head': fc.record({ scope: publisherScope }),
  'report.replace': fc.record({
    scope: publisherScope,
    report_revision: counter,
    report_digest: b32,
    content: reportContent,
  }),
  'report.accepted': fc
    .record({
      scope: publisherScope,
      accepted: fc.option(fc.tuple(counter, b32), { nil: null }),
      bindings: fc.uniqueArray(
        fc.record({
          declaration_key: text(1, 8),
          service_ref: serviceRef,
          P: fc.option(port, { nil: null }),
          proposal_state: text(1, 10),
        }),
        { maxLength: 3, selector: (b) => b.declaration_key },
      ),
    })
    .map(({ scope, accepted, bindings }) => ({
      scope,
      accepted_revision: accepted === null ? 0n : accepted[0],
      report_digest: accepted === null ? null : accepted[1],
      bindings: accepted === null ? [] : bindings,
    })),
  'snapshot.push': fc.record({
    snapshot: snapshot.map(({ listeners, ...s }) => ({
      ...s,
      listeners: listeners.map(({ backend, ...l }) => ({
        ...l,
        backend_host: backend === null ? null : backend[0],
        backend_port: backend === null ? null : backend[1],
      })),
    })),
    snapshot_digest: b32,
  }),
  'snapshot.ack': fc
    .record({
      scope: subjectScope,
      snapshot_revision: counter,
      snapshot_digest: b32,
      accepted: fc.boolean(),
      enforcement_applied: fc.boolean(),
      dns_applied: fc.boolean(),
      errors: fc.array(fc.record({ service_ref: fc.option(serviceRef, { nil: null }), error: errorCode }), {
        maxLength: 3,
      }),
    })
    .map((a) => (a.accepted ? a : { ...a, enforcement_applied: false, dns_applied: false })),
  'snapshot.ack.result': fc.record({ scope: subjectScope, snapshot_revision: counter, snapshot_digest: b32 }),
  'port.result': fc
    .record({ ref: proposalRef, result: fc.constantFrom(...PORT_RESULTS), floor: counter })
    .map(({ ref, result, floor }) => ({
      ...ref,
      result,
      termination_floor: result === 'terminated-pure' || result === 'conflict' ? floor : null,
    })),
  'port.result.result': fc.record({ proposal: proposalRef, state: fc.constantFrom(...B_PORT_STATES) }),
  'port.cancel': proposalRef,
  'port.query': proposalRef,
  'service.retry-port': fc.record({ service_ref: serviceRef }),
  'service.retry-port.result': fc.record({ service_ref: serviceRef, allocation_round: counter, proposal_seq: counter }),
  'listener.ready': readyBody,
  'lease.refresh': readyBody,
  'lease.acquire': fc.record({
    consumer_seq: counter,
    snapshot_revision: counter,
    snapshot_digest: b32,
    services: fc.uniqueArray(
      fc.record({ service_ref: serviceRef, publisher_identity: b32, listener_revision: counter, intent_digest: b32 }),
      { minLength: 1, maxLength: 4, selector: refKey },
    ),
  }),
  'lease.result': fc.record({ results: fc.array(leaseResultItem, { minLength: 1, maxLength: 3 }) }),
  error: fc.record({
    error: errorCode,
    request_kind: text(1, 20),
    detail: fc.option(text(0, 20), { nil: null }),
  }),
};

/** The envelope values of a kind: null only where its class allows, `session_seq` exactly for stream kinds. */
const envelope = (kind: Kind) => {
  const cls = KINDS[kind].envelope;
  const nullable = <A>(a: fc.Arbitrary<A>, allowed: boolean) => (allowed ? fc.option(a, { nil: null }) : a);
  const bootstrap = cls === 'bootstrap' || cls === 'echo';
  return fc.record({
    nsd_id: id16,
    network_id: id16,
    subject_identity: b32,
    runtime_generation: nullable(counter, bootstrap),
    runtime_id: nullable(id16, bootstrap),
    authority_epoch: nullable(counter, bootstrap || cls === 'bind'),
    request_id: id16,
    ...(KINDS[kind].stream ? { session_seq: counter } : {}),
  });
};

/** A valid Message of `kind`. */
export const messageOf = (kind: Kind): fc.Arbitrary<Message> =>
  fc.tuple(envelope(kind), BODIES[kind]).map(([e, body]) => ({ schema: 1, kind, ...e, body }) as unknown as Message);

/** A valid Message of any kind of the table. */
export const anyMessage: fc.Arbitrary<Message> = fc.constantFrom(...ALL_KINDS).chain(messageOf);

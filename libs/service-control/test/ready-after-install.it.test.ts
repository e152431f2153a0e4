// The ready after the install (decision 0197) between the real stores: B = Authority on the machine's PostgreSQL,
// A = PortArbiter on a temp-file SQLite endpoint table (and, in the second case, the whole Daemon in-process, its
// SQLite state file, talking to the Authority through an in-process transport instead of HTTP).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import type { ListenerReadyBodyWire } from '../src/api/lease.js';
import { type Message, decodeMessage } from '../src/api/message.js';
import type { DeclarationWire } from '../src/api/report.js';
import { StreamBindingCodec } from '../src/api/runtime.js';
import type { ListenerIntentWire } from '../src/api/snapshot.js';
import { streamBindingToWire } from '../src/api/convert.js';
import { openSqliteDaemonStore } from '../src/adapter/sqlite/daemon-store.js';
import { openSqliteEndpointStore } from '../src/adapter/sqlite/endpoint-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import {
  PortArbiter,
  SimulatedListenerInstaller,
  portResultBody,
  proposalFromWire,
} from '../src/application/port-arbiter.js';
import { endpointOf } from '../src/domain/port-endpoint.js';
import { authorityProcesses, eventually, inProcessTransport, runDaemon } from './in-process-daemon.js';
import { decl, msg, replaceBody, rid16 } from './wire.js';

const db = useDatabase('readyinstall');
const dir = mkdtempSync(join(tmpdir(), 'ns-readyinstall-'));
const { boot, close } = authorityProcesses(() => db.config);
afterAll(async () => {
  await close();
  rmSync(dir, { recursive: true, force: true });
});

type Pushed = Message & { body: Record<string, unknown> };
type Push = Message & {
  body: { snapshot_digest: Uint8Array; snapshot: { snapshot_revision: bigint; listeners: ListenerIntentWire[] } };
};

describe('the ready right after the install (decision 0197)', () => {
  it('M6-28 M6-29 B grants the ready naming the ACKed snapshot that carried the offered proposal, sent right after the claim — also when the claim’s production has already replaced that snapshot', async () => {
    const B = await boot();
    const net = rid16();
    const identity = generateSigner().signer.machineId;
    await B.store.addMember(identity, net);
    const w = { identity, nsdId: B.nsdId, networkId: net, gen: 1n, rid: rid16(), epoch: null as bigint | null };
    const send = async (bytes: Uint8Array) => {
      const r = decodeMessage(await B.authority.handle(identity, bytes));
      if (Either.isLeft(r)) throw r.left;
      return r.right as Pushed;
    };
    expect(
      (await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }))).kind,
    ).toBe('runtime.bind.result');
    w.epoch = B.epoch;
    const sessionRequestId = rid16();
    expect((await send(msg(w, 'session.open', {}, { session_seq: 1n, request_id: sessionRequestId }))).kind).toBe(
      'session.open.result',
    );
    const pushed: Push[] = [];
    const binding = {
      nsdId: B.nsdId,
      networkId: net,
      runtimeGeneration: 1n,
      runtimeId: w.rid,
      authorityEpoch: B.epoch,
      sessionSeq: 1n,
      sessionRequestId,
    };
    const opened = await B.authority.openStream(
      identity,
      StreamBindingCodec.encodeOrThrow(streamBindingToWire(binding)),
      {
        send: (p) => {
          const m = decodeMessage(p);
          if (Either.isRight(m) && m.right.kind === 'snapshot.push') pushed.push(m.right as unknown as Push);
          return true;
        },
        close: () => undefined,
      },
    );
    if (Either.isLeft(opened)) throw opened.left;
    await opened.right.start();
    await send(msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', null, 8080)])));
    await B.authority.idle();
    const first = pushed.at(-1) as Push;
    const offered = first.body.snapshot.listeners[0] as ListenerIntentWire;
    expect([offered.state, offered.P]).toEqual(['offered', 8080]);
    const scope = { subject_identity: identity, nsd_id: B.nsdId, network_id: net };
    const ackOf = (p: Push) => ({
      scope,
      snapshot_revision: p.body.snapshot.snapshot_revision,
      snapshot_digest: p.body.snapshot_digest,
      accepted: true,
      enforcement_applied: true,
      dns_applied: false,
      errors: [],
    });
    expect((await send(msg(w, 'snapshot.ack', ackOf(first), { session_seq: 1n }))).kind).toBe('snapshot.ack.result');

    // A arbitrates and installs, answers `installed`; B claims and queues the production of the next snapshot
    const A = openSqliteEndpointStore(join(dir, 'a.db'));
    const arbiter = new PortArbiter(A, new SimulatedListenerInstaller());
    const [answer] = await arbiter.onProposal(
      identity,
      proposalFromWire(offered.proposal as NonNullable<ListenerIntentWire['proposal']>),
    );
    expect(
      (await send(msg(w, 'port.result', portResultBody(answer as NonNullable<typeof answer>), { session_seq: 1n })))
        .body['state'],
    ).toBe('claimed');
    // the worst order for A: the claim's production has committed (a newer snapshot is current) before the ready
    await B.authority.idle();
    const second = pushed.at(-1) as Push;
    expect(second.body.snapshot.snapshot_revision).toBeGreaterThan(first.body.snapshot.snapshot_revision);
    expect(second.body.snapshot.listeners[0]?.state).toBe('claimed');

    const p = offered.proposal as NonNullable<ListenerIntentWire['proposal']>;
    const ready: ListenerReadyBodyWire = {
      service_ref: offered.service_ref,
      refresh_seq: 1n,
      listener_revision: offered.listener_revision,
      intent_digest: offered.intent_digest,
      proposal_id: p.proposal_id,
      allocation_round: p.allocation_round,
      proposal_seq: p.proposal_seq,
      P: 8080,
      snapshot_revision: first.body.snapshot.snapshot_revision, // the snapshot A ACKed, which carried the offer
      snapshot_digest: first.body.snapshot_digest,
      proof: {
        installed_protocols: offered.protocols,
        installed_P: 8080,
        enforcement_policy_digest: offered.enforcement_policy_digest,
      },
    };
    const r = await send(msg(w, 'listener.ready', ready, { session_seq: 1n }));
    expect(r.kind).toBe('lease.result');
    expect((r.body['results'] as { result: string }[]).map((x) => x.result)).toEqual(['granted']);
    A.close();
    await B.authority.idle();
  });

  it('M6-62 M6-61 §5.6 §5.15 the Daemon in-process: its first listener.ready goes out after its port.result and is granted, no ready is refused; a restarted daemon on the same state file re-readies the reinstalled intent', async () => {
    const B = await boot();
    const net = rid16();
    const identity = generateSigner().signer.machineId;
    await B.store.addMember(identity, net);
    const stateFile = join(dir, 'daemon.db');
    const web = decl('web', null, 8081) as unknown as DeclarationWire;

    /** One daemon process: its stores on the state file, a fresh data plane, every request it sends recorded in order. */
    const run = () => {
      const store = openSqliteDaemonStore(stateFile);
      const endpoints = openSqliteEndpointStore(stateFile);
      const installer = new SimulatedListenerInstaller();
      const arbiter = new PortArbiter(endpoints, installer);
      const sent: { kind: string; installed: boolean; body: Record<string, unknown> }[] = [];
      const transport = inProcessTransport(() => B, identity, {
        message: (payload) => {
          const m = decodeMessage(payload);
          if (Either.isLeft(m)) return;
          const body = m.right.body as Record<string, unknown>;
          // what A's endpoint table and data plane hold for the proven proposal at the moment the ready leaves
          const P = BigInt((body as unknown as ListenerReadyBodyWire).P ?? 0);
          // a refresh ready after the grant finds the endpoint Active (decision 0267): installed either way
          const phase = endpointOf(endpoints.read(), identity, P).phase;
          const installed =
            m.right.kind === 'listener.ready' &&
            (phase === 'installed-closed' || phase === 'active') &&
            installer.observe(identity, P) !== null;
          sent.push({ kind: m.right.kind, installed, body });
        },
      });
      const d = runDaemon(
        {
          store,
          identity,
          networkId: net,
          transport,
          declarations: () => Either.right([web]),
          enforce: () => [],
          ports: arbiter,
        },
        () => {
          store.close();
          endpoints.close();
        },
      );
      return { ...d, sent };
    };

    const first = run();
    await eventually(() => first.at('lease-receipt') >= 0, 'the first ready granted');
    const kinds = first.sent.map((s) => s.kind);
    // the snapshot with the offer is ACKed, the proposal answered, and only then the ready
    expect(kinds.indexOf('listener.ready')).toBeGreaterThan(kinds.indexOf('port.result'));
    expect(kinds.indexOf('port.result')).toBeGreaterThan(kinds.indexOf('snapshot.ack'));
    expect(first.at('lease-awaits-install')).toBeGreaterThan(first.at('snapshot-acked')); // the ACK found it not installed
    expect(first.sent.filter((s) => s.kind === 'listener.ready').every((s) => s.installed)).toBe(true);
    const proof = (first.sent.find((s) => s.kind === 'listener.ready')?.body as unknown as ListenerReadyBodyWire).proof;
    expect([proof.installed_P, proof.installed_protocols]).toEqual([8081, ['tcp']]);
    expect(first.daemon.status.leases).toEqual([
      expect.objectContaining({ role: 'publisher', active: true, lastResult: 'granted' }),
    ]);
    await B.authority.idle();
    await first.stop();

    // the granted ready opened the gate: the daemon itself committed the endpoint Active (spec §5.6), and the
    // process stopped with it so (the state a crash leaves behind)
    expect(first.at('endpoint-gate', (f) => f['open'] === true)).toBeGreaterThan(first.at('lease-awaits-install'));
    expect(first.at('endpoint-gate', (f) => f['open'] === false)).toBe(-1);
    const crashed = openSqliteEndpointStore(stateFile);
    expect(endpointOf(crashed.read(), identity, 8081n).phase).toBe('active');
    crashed.close();

    // a new process on the same state file: §5.15 — the gate closed first (observed on the committed table), ports
    // recovered (reinstalled, gate closed) before the stream, then the ready for the same intent, granted
    const again = run();
    await eventually(() => again.at('lease-receipt') >= 0, 'the restarted daemon’s ready granted');
    expect(again.log[0]).toEqual({
      event: 'startup',
      fields: { gates: 'closed', permits: 0, live_flows: 0, active_endpoints: 0, closed_from_disk: 1 },
    });
    const recovered = again.log[again.at('ports-recovered')]?.fields['reinstalled'];
    expect(recovered).toEqual([expect.objectContaining({ P: '8081', installed: true })]);
    expect(again.at('ports-recovered')).toBeLessThan(again.at('stream-open'));
    expect(again.at('lease-receipt')).toBeGreaterThan(again.at('snapshot-acked'));
    expect(again.sent.filter((s) => s.kind === 'listener.ready').every((s) => s.installed)).toBe(true);
    expect(again.sent.some((s) => s.kind === 'port.result')).toBe(false); // B already holds the claim: nothing to answer
    await B.authority.idle();
    await again.stop();

    for (const d of [first, again])
      expect(d.log.filter((l) => l.event === 'lease-receipt-refused' || l.event === 'failed')).toEqual([]);
  });
});

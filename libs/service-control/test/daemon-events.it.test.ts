// The Daemon's event table (decision 0530, addendum): a config.stream event reaches the handler of its kind — only
// the kinds B sends to A (snapshot.push, port.cancel, port.query), port requests only on a daemon with a port arbiter
// — and any other event is refused `unsupported-field` without ending the stream. B = Authority on the machine's
// PostgreSQL; A = the whole Daemon in-process on a temp-file SQLite state file; the test adds its own events to the
// stream B opened.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage, encodeMessage } from '../src/api/message.js';
import { openSqliteDaemonStore } from '../src/adapter/sqlite/daemon-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { proposalToWire } from '../src/application/port-arbiter.js';
import { authorityProcesses, eventually, inProcessTransport, runDaemon } from './in-process-daemon.js';
import { id16, id32 } from './helpers.js';
import { rid16 } from './wire.js';

const db = useDatabase('daemonevents');
const dir = mkdtempSync(join(tmpdir(), 'ns-daemonevents-'));
const { boot, close } = authorityProcesses(() => db.config);
afterAll(async () => {
  await close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the Daemon's event table", () => {
  it('§3.3 a stream event reaches its kind’s handler; a reply kind, and a port request to a daemon without a port arbiter, are refused unsupported-field and the stream goes on', async () => {
    const { store, authority, ...t } = await boot();
    const net = rid16();
    const identity = generateSigner().signer.machineId;
    await store.addMember(identity, net);

    const events: Uint8Array[] = [];
    let push: ((p: Uint8Array) => void) | null = null;
    const daemonStore = openSqliteDaemonStore(join(dir, 'daemon.db'));
    const d = runDaemon(
      {
        store: daemonStore,
        identity,
        networkId: net,
        transport: inProcessTransport(() => ({ authority, nsdId: t.nsdId }), identity, {
          event: (p) => events.push(p),
          streamOpened: (p) => {
            push = (payload) => p(payload);
          },
        }),
        declarations: () => Either.right([]),
      },
      () => daemonStore.close(),
    );
    // B's own events as they arrive: the first snapshot.push is the template of the test's events
    const firstAcked = () => d.count('snapshot-acked') >= 1;
    await eventually(firstAcked, 'the first snapshot acknowledged');
    expect(push).not.toBeNull();
    const template = decodeMessage(events[0] as Uint8Array);
    if (Either.isLeft(template) || template.right.kind !== 'snapshot.push') throw new Error('no snapshot.push from B');
    const push0 = template.right;
    const fence = {
      schema: 1,
      nsd_id: push0.nsd_id,
      network_id: push0.network_id,
      subject_identity: push0.subject_identity,
      runtime_generation: push0.runtime_generation,
      runtime_id: push0.runtime_id,
      authority_epoch: push0.authority_epoch,
    };
    const send = (m: Message) => (push as (p: Uint8Array) => void)(encodeMessage(m));
    const refusals = () => d.log.filter((l) => l.event === 'event-refused').map((l) => l.fields);

    // a reply kind on the stream (not a request B sends to A)
    send({
      ...fence,
      kind: 'error',
      request_id: id16(1),
      body: { error: 'unauthorized', request_kind: 'snapshot.ack', detail: null },
    });
    // a port request, but this daemon has no port arbiter
    send({
      ...fence,
      kind: 'port.cancel',
      request_id: id16(2),
      session_seq: push0.session_seq,
      body: proposalToWire({
        serviceRef: { nsdId: push0.nsd_id, networkId: push0.network_id, serviceId: id16(3) },
        listenerRevision: 1n,
        intentDigest: id32(4),
        allocationRound: 1n,
        proposalSeq: 1n,
        proposalId: id16(5),
        port: 8080n,
      }),
    });
    // B's own snapshot.push again, for another identity: past the table, refused by the identity check
    send({ ...push0, subject_identity: generateSigner().signer.machineId });
    // and B's own snapshot.push again as it was: handled (a repeated snapshot is ACKed again)
    const acked = d.count('snapshot-acked');
    send(push0);
    await eventually(() => d.count('snapshot-acked') > acked, 'the repeated snapshot acknowledged');

    expect(refusals()).toEqual([
      { code: 'unsupported-field', kind: 'error' },
      { code: 'unsupported-field', kind: 'port.cancel' },
      { code: 'unauthorized' },
    ]);
    expect(d.log.filter((l) => l.event === 'event-failed' || l.event === 'failed')).toEqual([]);
    expect(d.daemon.status.phase).toBe('streaming');
    await d.stop();
    await authority.idle();
  });
});

// The P flow across both real stores, through encoded messages: B (Authority + PortAllocator on the machine's
// PostgreSQL) ↔ A (PortArbiter on a temp-file SQLite endpoint table, simulated installer). The snapshot transport is
// not in between yet: the proposal B persisted is handed to A as the snapshot would carry it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { openSqliteEndpointStore } from '../src/adapter/sqlite/endpoint-store.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { PortAllocator } from '../src/application/port-allocator.js';
import {
  PortArbiter,
  SimulatedListenerInstaller,
  portResultBody,
  proposalFromWire,
  proposalToWire,
} from '../src/application/port-arbiter.js';
import type { CurrentProposal } from '../src/domain/port-allocation.js';
import { endpointOf } from '../src/domain/port-endpoint.js';
import { id16, ok } from './helpers.js';
import { seededRng } from './port-fixtures.js';
import { decl, msg, pubScope, replaceBody, rid16 } from './wire.js';

const db = useDatabase('portflow');
const dir = mkdtempSync(join(tmpdir(), 'ns-portflow-'));
const stores: AuthorityStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
  rmSync(dir, { recursive: true, force: true });
});
const sql = sqlOn(db);

describe('P flow: B on PostgreSQL ↔ A on SQLite', () => {
  it('M6-38 M6-40 M6-41 claimed → P in the service row; B offered then lost the send: cancel → fence → terminated-pure → release + floor; the late snapshot is refused', async () => {
    let n = 0;
    const boot = async () => {
      const store = makePgAuthorityStore(db.config);
      stores.push(store);
      await store.migrate();
      const t = await store.takeover();
      const authority = new Authority({ store, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now() });
      const alloc = new PortAllocator({
        store,
        rng: seededRng(3),
        newProposalId: () => id16(600_000 + n++),
        intentDigestFor: () => new Uint8Array(32).fill(9),
      });
      return { store, authority, alloc, ...t };
    };
    let B = await boot();
    const net = rid16();
    const identity = generateSigner().signer.machineId;
    await B.store.addMember(identity, net);
    const w = { identity, nsdId: B.nsdId, networkId: net, gen: 1n, rid: rid16(), epoch: null as bigint | null };
    let seq = 0n;
    const send = async (bytes: Uint8Array) => {
      const r = decodeMessage(await B.authority.handle(identity, bytes));
      if (Either.isLeft(r)) throw r.left;
      return r.right as Message & { body: Record<string, unknown> };
    };
    const connect = async () => {
      w.epoch = null; // a bind after an authority restart carries no epoch yet
      expect(
        (await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }))).kind,
      ).toBe('runtime.bind.result');
      w.epoch = B.epoch;
      seq += 1n;
      expect((await send(msg(w, 'session.open', {}, { session_seq: seq }))).kind).toBe('session.open.result');
    };
    await connect();
    const accepted = await send(
      msg(w, 'report.replace', replaceBody(w, 1n, [decl('api', null, 9000), decl('web', null, 8080)])),
    );
    const bindings = accepted.body['bindings'] as {
      declaration_key: string;
      service_ref: { nsd_id: Uint8Array; network_id: Uint8Array; service_id: Uint8Array };
    }[];
    const refOf = (key: string) => {
      const b = bindings.find((x) => x.declaration_key === key)?.service_ref;
      if (b === undefined) throw new Error(key);
      return { nsdId: b.nsd_id, networkId: b.network_id, serviceId: b.service_id };
    };
    const A = openSqliteEndpointStore(join(dir, 'a.db'));
    const installer = new SimulatedListenerInstaller();
    const arbiter = new PortArbiter(A, installer);
    const toB = async (answers: readonly ReturnType<typeof portResultBody>[]) => {
      const out = [];
      for (const body of answers) out.push(await send(msg(w, 'port.result', body, { session_seq: seq })));
      return out;
    };

    // the accepted report already offered both (persisted in the report's transaction, decision 0150)
    // 1. web: offered (persisted first), A registers → MayInstall → install → `installed`; B confirms P
    const web = { proposal: ok(await B.alloc.allocation(B.epoch, refOf('web')))?.current ?? null };
    const webP = web.proposal as CurrentProposal;
    const answers = await arbiter.onProposal(identity, proposalFromWire(proposalToWire(webP)));
    expect(answers.map((a) => a.result)).toEqual(['installed']);
    expect(installer.calls).toEqual([{ op: 'install', port: 8080n }]);
    const [res] = await toB(answers.map(portResultBody));
    expect([res?.kind, res?.body['state']]).toEqual(['port.result.result', 'claimed']);
    const head = await send(msg(w, 'report.head', { scope: pubScope(w) }));
    expect(
      (head.body['bindings'] as { declaration_key: string; P: number | null }[]).find(
        (b) => b.declaration_key === 'web',
      )?.P,
    ).toBe(8080);

    // 2. api: B persists the offer, then "crashes before sending"; the restarted B cancels the exact proposal
    const api = { proposal: ok(await B.alloc.allocation(B.epoch, refOf('api')))?.current ?? null };
    const apiP = api.proposal as CurrentProposal;
    B = await boot();
    await connect();
    expect(await sql(`SELECT kind FROM service_control.port_entry WHERE port = 9000`)).toEqual([{ kind: 'reserved' }]);
    // A has no record: a query says `absent`, which releases nothing
    const absent = arbiter.onQuery(identity, apiP);
    expect(absent.result).toBe('absent');
    const [q] = await toB([portResultBody(absent)]);
    expect(q?.body['state']).toBe('offered');
    expect(await sql(`SELECT kind FROM service_control.port_entry WHERE port = 9000`)).toEqual([{ kind: 'reserved' }]);
    // the cancel: A fences first, then answers terminated-pure; B releases exactly that reservation and keeps the floor
    const fenced = await arbiter.onCancel(identity, apiP);
    expect([fenced.result, fenced.terminationFloor]).toEqual(['terminated-pure', apiP.proposalSeq]);
    const [released] = await toB([portResultBody(fenced)]);
    expect(released?.body['state']).toBe('released-pure');
    expect(await sql(`SELECT kind FROM service_control.port_entry WHERE port = 9000`)).toEqual([]);
    // the original snapshot arrives late: refused by the fence, nothing installed, the proof is sent again
    const late = await arbiter.onProposal(identity, apiP);
    expect(late.map((a) => a.result)).toEqual(['terminated-pure']);
    expect(installer.calls).toHaveLength(1);
    expect(endpointOf(A.read(), identity, 9000n).owner).toBeNull();
    // and the web P stays owned on both sides through B's restart
    expect(await sql(`SELECT kind FROM service_control.port_entry WHERE port = 8080`)).toEqual([{ kind: 'owned' }]);
    expect(endpointOf(A.read(), identity, 8080n).phase).toBe('installed-closed');
    await B.authority.idle();
    A.close();
  });
});

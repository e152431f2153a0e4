// Shared set-up of B's port tests on the machine's PostgreSQL (port-change-pg, port-recovery): an Authority with a
// member whose runtime is bound, an open session and an open config.stream whose pushes are recorded, and A's
// PortArbiter on a temp-file SQLite endpoint table. Kept apart from port-fixtures.ts, which pure tests import.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, expect } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { StreamBindingCodec } from '../src/api/runtime.js';
import { streamBindingToWire } from '../src/api/convert.js';
import { openSqliteEndpointStore } from '../src/adapter/sqlite/endpoint-store.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { Authority, type AuthorityDeps } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { PortArbiter, SimulatedListenerInstaller, type portResultBody } from '../src/application/port-arbiter.js';
import { msg, rid16 } from './wire.js';

export type Pushed = Message & { body: Record<string, unknown> };

/** The same member and runtime after a B restart (a new authority epoch on the same database, session `seq`). */
export interface PortSessionAgain {
  readonly identity: Uint8Array;
  readonly net: Uint8Array;
  readonly rid: Uint8Array;
  readonly seq: bigint;
}

/** The publisher's row of service_control.port_allocation (the fields the tests read). */
export interface AllocationJson {
  state: string;
  round: string;
  seq: string;
  idx: number;
  tried: string[];
  floor: string;
  cur: { port: string } | null;
  pending: { mode: string; req: string | null } | null;
  cancelling: boolean;
}

/**
 * A database and a temp dir for this test file (both removed after it), and `open`: B with the given port timers
 * (`deps`: the Authority's options beyond store, ids and clock) and one publisher on a stream, A on `${name}.db`.
 */
export const usePortBed = (prefix: string) => {
  const db = useDatabase(prefix);
  const dir = mkdtempSync(join(tmpdir(), `ns-${prefix}-`));
  const stores: AuthorityStore[] = [];
  afterAll(async () => {
    for (const s of stores) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const sql = sqlOn(db);

  const open = async (
    name: string,
    deps: Pick<AuthorityDeps, 'portRecovery' | 'candidateSchedule'>,
    again?: PortSessionAgain,
  ) => {
    const store = makePgAuthorityStore(db.config);
    stores.push(store);
    await store.migrate();
    const t = await store.takeover();
    const authority = new Authority({ store, nsdId: t.nsdId, epoch: t.epoch, now: () => Date.now(), ...deps });
    const net = again?.net ?? rid16();
    const identity = again?.identity ?? generateSigner().signer.machineId;
    const seq = again?.seq ?? 1n;
    await store.addMember(identity, net);
    const w = {
      identity,
      nsdId: t.nsdId,
      networkId: net,
      gen: 1n,
      rid: again?.rid ?? rid16(),
      epoch: null as bigint | null,
    };
    const send = async (bytes: Uint8Array) => {
      const r = decodeMessage(await authority.handle(identity, bytes));
      if (Either.isLeft(r)) throw r.left;
      return r.right as Pushed;
    };
    expect(
      (await send(msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false }))).kind,
    ).toBe('runtime.bind.result');
    w.epoch = t.epoch;
    const sessionRequestId = rid16();
    expect((await send(msg(w, 'session.open', {}, { session_seq: seq, request_id: sessionRequestId }))).kind).toBe(
      'session.open.result',
    );
    const pushed: Pushed[] = [];
    const binding = {
      nsdId: t.nsdId,
      networkId: net,
      runtimeGeneration: 1n,
      runtimeId: w.rid,
      authorityEpoch: t.epoch,
      sessionSeq: seq,
      sessionRequestId,
    };
    const opened = await authority.openStream(
      identity,
      StreamBindingCodec.encodeOrThrow(streamBindingToWire(binding)),
      {
        send: (p) => {
          const m = decodeMessage(p);
          if (Either.isRight(m)) pushed.push(m.right as Pushed);
          return true;
        },
        close: () => undefined,
      },
    );
    if (Either.isLeft(opened)) throw opened.left;
    await opened.right.start();
    const A = openSqliteEndpointStore(join(dir, `${name}.db`));
    const arbiter = new PortArbiter(A, new SimulatedListenerInstaller());
    const answer = (body: ReturnType<typeof portResultBody>, requestId: Uint8Array = rid16()) =>
      send(msg(w, 'port.result', body, { session_seq: seq, request_id: requestId }));
    const allocation = async () =>
      (
        (
          await sql(`SELECT value FROM service_control.port_allocation WHERE publisher = $1`, [Buffer.from(identity)])
        )[0] as { value: AllocationJson }
      ).value;
    /** the publisher's port entries, by port */
    const entryRows = async () =>
      (await sql(`SELECT port, kind FROM service_control.port_entry WHERE publisher = $1 ORDER BY port`, [
        Buffer.from(identity),
      ])) as { port: number; kind: string }[];
    return { authority, A, arbiter, identity, net, w, seq, send, pushed, answer, allocation, entryRows };
  };
  return { db, sql, open };
};

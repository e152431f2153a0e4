// The next P candidate after A's explicit pure refusal (decision 0193), between real processes: nsd on PostgreSQL and
// ns-daemon child processes on loopback. The refusal is a real conflict in A's endpoint table: the node (one identity,
// one state file) is a member at another NSD X too, where its service `web` (auto, backend 8080) owns 8080. Run as a
// member at the NSD under test, the node's service there (auto, backend 8080 as well) gets 8080 as its first candidate
// (B's port table is per NSD and knows nothing of X), A's cut point refuses it (`conflict`: 8080 is confirmed for X's
// ServiceRef, fenced TerminatedPure), B waits the sampled backoff (≤ 100 ms after candidate 1, §5.14) and issues
// candidate 2 from 40000..50000 itself — no retry-port, no declaration change — and A claims it. Second case: B is
// SIGKILLed right after committing the refusal (`awaitingNext` persisted, no timer run), restarted (new epoch), and
// the next candidate still comes; 8080 is never offered again. Evidence: both processes' JSON logs, B's allocation,
// port table, snapshot and admin view, the publisher's lease on /healthz, and A's endpoint table on SQLite.
//
// The daemon serves one membership per process (NS_NSD_URL/NS_NSD_KEY/NS_NETWORK); its state file holds ONE endpoint
// table for all memberships (§5.10), the rest of its records per scope. So the node runs at X first and then at the
// NSD under test, one process after the other on the same state file (two concurrent daemon processes on one state
// file are not supported: each start's recover() closes every gate of the table, and the runtime record is per identity).
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type TestDatabase, useDatabase } from '@homelab/testbed/vitest';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { SnapshotPushBody, toHex } from '@homelab/service-control';
import { openSqliteEndpointStore } from '@homelab/service-control/sqlite';
import { type Proc, healthz, leaseOf, ownerAdmin, processWorkspace, startNs, startNsd, until } from './processes.js';

const dbX = useDatabase('nsd_next_x');
const dbY = useDatabase('nsd_next_y');
const dbZ = useDatabase('nsd_next_z');
const ws = processWorkspace('nsd-next-candidate');
const TOKEN = randomBytes(16).toString('hex');

/** A node: its identity, state file, its Network at X and at the NSD under test, one declaration file for each. */
const node = (name: string) => {
  const id = ws.identity(name);
  const web = (key: string) => [{ key, protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8080 }];
  writeFileSync(join(ws.dir, `${name}-x.json`), JSON.stringify(web('web')));
  writeFileSync(join(ws.dir, `${name}.json`), JSON.stringify(web('api')));
  return {
    ...id,
    name,
    netX: randomBytes(16).toString('hex'),
    net: randomBytes(16).toString('hex'),
    state: join(ws.dir, `${name}.db`),
  };
};
const N1 = node('n1');
const N2 = node('n2');

type Nsd = Awaited<ReturnType<typeof startNsd>>;
let x: Nsd;
const clients: pg.Client[] = [];
const client = async (db: TestDatabase) => {
  const c = new pg.Client(db.config);
  await c.connect();
  clients.push(c);
  return c;
};
beforeAll(async () => {
  x = await startNsd(
    ws,
    dbX,
    [N1, N2].map((n) => `${n.hex}:${n.netX}`),
    { NSD_KEY_FILE: join(ws.dir, 'nsd-x.pem') },
  );
  ws.closers.push(async () => void (await Promise.all(clients.map((c) => c.end()))));
});

const logged =
  (event: string, fields: Record<string, unknown> = {}) =>
  (l: Record<string, unknown>) =>
    l['event'] === event && Object.entries(fields).every(([k, v]) => l[k] === v);
const events = (proc: Proc, event: string, fields: Record<string, unknown> = {}) =>
  proc.lines.filter(logged(event, fields));
const stop = async (p: Proc) => {
  p.child.kill('SIGTERM');
  expect((await p.exited).code).toBe(0);
};
const nsPort = async (p: Proc) => (await p.waitFor(logged('listening')))['port'] as number;
const taken = (l: Record<string, unknown>) => l['result'] === 'claimed' || l['result'] === 'installed';

/** The node at X: `web` gets 8080 there, so A's endpoint table holds (identity, 8080) owned by X's ServiceRef. */
const ownAtX = async (n: typeof N1) => {
  const ns = startNs(ws, x, n, n.name, n.netX, { NS_DECLARATIONS: join(ws.dir, `${n.name}-x.json`) });
  const r = await ns.waitFor(logged('port-result', { P: '8080' }), 90_000);
  expect([r['result'], r['state']]).toEqual(['installed', 'claimed']);
  await stop(ns);
};

type Row = {
  state: string;
  round: string;
  seq: string;
  idx: number;
  tried: string[];
  floor: string;
  next?: boolean;
  cur: { port: string; seq: string } | null;
};
const allocationOf = async (c: pg.Client, n: { hex: string }): Promise<Row | undefined> =>
  (
    (
      await c.query(`SELECT value FROM service_control.port_allocation WHERE publisher = $1`, [
        Buffer.from(n.hex, 'hex'),
      ])
    ).rows[0] as { value: Row } | undefined
  )?.value;
const entriesOf = async (c: pg.Client, n: { hex: string }) =>
  (
    await c.query(`SELECT port, kind FROM service_control.port_entry WHERE publisher = $1 ORDER BY port`, [
      Buffer.from(n.hex, 'hex'),
    ])
  ).rows.map((r: { port: number; kind: string }) => `${r.port}:${r.kind}`);
const snapshotOf = async (c: pg.Client, n: { hex: string }) => {
  const r = (await c.query(`SELECT body FROM service_control.snapshot WHERE target = $1`, [Buffer.from(n.hex, 'hex')]))
    .rows[0] as { body: Buffer } | undefined;
  return r === undefined ? undefined : SnapshotPushBody.decodeOrThrow(new Uint8Array(r.body)).snapshot;
};

/** A's endpoint table after the daemon stopped: every proposal it ever registered and every endpoint, by NSD. */
const endpointTable = (n: typeof N1) => {
  const store = openSqliteEndpointStore(n.state);
  try {
    const t = store.read();
    return {
      proposals: [...t.proposals.values()].map((p) => ({
        nsd: toHex(p.ref.serviceRef.nsdId),
        seq: String(p.ref.proposalSeq),
        P: String(p.ref.port),
        status: p.status,
      })),
      endpoints: [...t.endpoints.values()].map((e) => ({
        P: String(e.port),
        phase: e.phase,
        nsd: e.owner === null ? null : toHex(e.owner.nsdId),
      })),
    };
  } finally {
    store.close();
  }
};
const inPool = (p: string) => Number(p) >= 40000 && Number(p) <= 50000;

describe('the next P candidate after a pure refusal, across processes (decision 0193)', () => {
  it("M6-42 M6-43 §5.14 the first auto candidate (the backend port 8080) is refused by A purely, because its endpoint table holds 8080 for the node's service at another NSD; after the backoff B issues candidate 2 from 40000..50000 on its own, the daemon claims it, the service gets that P (snapshot, admin view, publisher lease) while X's 8080 stays owned on A", async () => {
    await ownAtX(N1);
    // a long confirmation window: only A's answers move the allocation here, never the recovery driver (decision 0171)
    const y = await startNsd(ws, dbY, [`${N1.hex}:${N1.net}`], {
      NSD_KEY_FILE: join(ws.dir, 'nsd-y.pem'),
      NSD_ADMIN_TOKEN: TOKEN,
      NSD_PORT_UNCERTAIN_MS: '120000',
    });
    const c = await client(dbY);
    const ns = startNs(ws, y, N1, N1.name, N1.net);
    const port = await nsPort(ns);

    // §5.15: the endpoint X's service owns is reinstalled (gate closed) before the stream; nothing was left Proposed
    const rec = await ns.waitFor(logged('ports-recovered'), 90_000);
    expect(rec['reinstalled']).toEqual([{ P: '8080', installed: true, service_id: expect.any(String) as string }]);
    expect(rec['rearbitrated']).toEqual([]);
    // candidate 1 = the backend port; A's cut point refuses it (another ServiceRef owns 8080), B releases it purely
    const refused = await ns.waitFor(logged('port-result', { P: '8080' }), 90_000);
    expect([refused['result'], refused['state']]).toEqual(['conflict', 'released-pure']);
    // B: the next candidate after the sampled backoff, in its own transaction, proposal seq 1 → 2
    await y.proc.waitFor(logged('next-candidate', { after_seq: '1' }), 90_000);
    const claimed = await ns.waitFor((l) => logged('port-result')(l) && l['P'] !== '8080', 90_000);
    expect([claimed['result'], claimed['state']]).toEqual(['installed', 'claimed']);
    const p2 = claimed['P'] as string;
    expect(inPool(p2)).toBe(true);

    const a = await until(
      () => allocationOf(c, N1),
      (v) => v?.state === 'claimed',
    );
    expect([a?.round, a?.seq, a?.idx, a?.tried, a?.floor, a?.next, a?.cur?.port]).toEqual([
      '1',
      '2',
      2,
      ['8080', p2],
      '1',
      false,
      p2,
    ]);
    expect(await entriesOf(c, N1)).toEqual([`${p2}:owned`]); // 8080 was a pure candidate: released, no tombstone
    // the service's P: B's next snapshot for the publisher carries it (Resource and claimed listener), the daemon
    // applies it, the owner's view shows it, and the publisher's ready lease on that listener is active
    const snap = await until(
      () => snapshotOf(c, N1),
      (s) => s?.resources[0]?.P === Number(p2) && s.listeners[0]?.state === 'claimed',
    );
    expect([snap?.listeners[0]?.proposal?.P, snap?.listeners[0]?.proposal?.proposal_seq]).toEqual([Number(p2), 2n]);
    await until(
      () => healthz(port),
      (h) => h['snapshotRevision'] === String(snap?.snapshot_revision),
    );
    const services = (await ownerAdmin(y.url, TOKEN)('GET', `/v1/admin/services?network=${N1.net}`)).body[
      'services'
    ] as { service_id: string; declaration_key: string; P: number | null }[];
    expect(services.map((s) => [s.declaration_key, s.P])).toEqual([['api', Number(p2)]]);
    await until(
      () => healthz(port),
      (h) => leaseOf(h, 'publisher', services[0]?.service_id as string)?.active === true,
      90_000,
    );

    // resolved by A's answers and B's own timer: no uncertainty, no owner retry, 8080 never taken for this NSD
    expect(events(y.proc, 'port-uncertain')).toEqual([]);
    expect(events(y.proc, 'next-candidate')).toHaveLength(1);
    expect(events(ns, 'retry-port')).toEqual([]);
    expect(ns.lines.filter((l) => l['P'] === '8080' && taken(l))).toEqual([]);
    await stop(ns);
    await stop(y.proc);
    // A's table: X's 8080 still owned by X's ServiceRef; this NSD's 8080 proposal fenced, its P2 owned
    const t = endpointTable(N1);
    // installed either closed or Active: a granted publisher lease opens the gate (decision 0267), and whether the
    // stop found it open depends on the lease's timing, not on this allocation
    const installed = (phase: string) => (phase === 'active' ? 'installed-closed' : phase);
    expect(
      t.endpoints.map((e) => ({ ...e, phase: installed(e.phase) })).sort((p, q) => Number(p.P) - Number(q.P)),
    ).toEqual([
      { P: '8080', phase: 'installed-closed', nsd: x.nsdId },
      { P: p2, phase: 'installed-closed', nsd: y.nsdId },
    ]);
    expect(t.proposals.filter((p) => p.nsd === y.nsdId).sort((p, q) => Number(p.seq) - Number(q.seq))).toEqual([
      { nsd: y.nsdId, seq: '1', P: '8080', status: 'terminated-pure' },
      { nsd: y.nsdId, seq: '2', P: p2, status: 'confirmed' },
    ]);
  });

  it('M6-42 M6-43 M6-58 §5.14 nsd SIGKILLed right after committing the pure refusal (awaitingNext persisted, before its reply and its timer): restarted with a new epoch, it resumes the waiting allocation with a fresh backoff and issues candidate 2 — tried ports kept, 8080 never offered again — and the daemon claims it', async () => {
    await ownAtX(N2);
    const env = { NSD_KEY_FILE: join(ws.dir, 'nsd-z.pem'), NSD_ADMIN_TOKEN: TOKEN, NSD_PORT_UNCERTAIN_MS: '120000' };
    const z1 = await startNsd(ws, dbZ, [`${N2.hex}:${N2.net}`], { ...env, NSD_FAULT: 'port.result' });
    const c = await client(dbZ);
    const ns = startNs(ws, z1, N2, N2.name, N2.net);
    const port = await nsPort(ns);

    // the first port.result B gets is A's refusal of 8080: committed, then B dies before the reply and the timer
    expect(await z1.proc.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(events(z1.proc, 'fault', { point: 'port.result' })).toHaveLength(1);
    expect(events(z1.proc, 'next-candidate')).toEqual([]);
    // A never got the reply (its transport gives up, or meets the next epoch); it does not decide anything again
    await ns.waitFor(logged('port-result-refused', { P: '8080', result: 'conflict' }), 90_000);
    const waiting = await allocationOf(c, N2);
    expect([
      waiting?.state,
      waiting?.next,
      waiting?.round,
      waiting?.seq,
      waiting?.idx,
      waiting?.tried,
      waiting?.floor,
    ]).toEqual(['released-pure', true, '1', '1', 1, ['8080'], '1']);
    expect(await entriesOf(c, N2)).toEqual([]); // the pure candidate's reservation is released

    // restarted on the same address: a new epoch; the waiting allocation is resumed (backoff sampled again)
    const z2 = await startNsd(ws, dbZ, [`${N2.hex}:${N2.net}`], { ...env, NSD_PORT: String(z1.port) });
    expect(z2.epoch).toBe(z1.epoch + 1n);
    expect(await z2.proc.waitFor(logged('authority-ready'))).toMatchObject({ next_candidates_due: 1 });
    await z2.proc.waitFor(logged('next-candidate', { after_seq: '1' }), 90_000);
    // the daemon re-binds in the new epoch, gets the snapshot with candidate 2 and claims it
    const claimed = await ns.waitFor((l) => logged('port-result')(l) && taken(l), 120_000);
    expect(claimed['state']).toBe('claimed');
    const p2 = claimed['P'] as string;
    expect(p2).not.toBe('8080');
    expect(inPool(p2)).toBe(true);
    const a = await until(
      () => allocationOf(c, N2),
      (v) => v?.state === 'claimed',
    );
    expect([a?.round, a?.seq, a?.idx, a?.tried, a?.floor, a?.next, a?.cur?.port]).toEqual([
      '1',
      '2',
      2,
      ['8080', p2],
      '1',
      false,
      p2,
    ]);
    expect(await entriesOf(c, N2)).toEqual([`${p2}:owned`]);
    const snap = await until(
      () => snapshotOf(c, N2),
      (s) => s?.resources[0]?.P === Number(p2) && s.listeners[0]?.state === 'claimed',
    );
    await until(
      () => healthz(port),
      (h) => h['epoch'] === String(z2.epoch) && h['snapshotRevision'] === String(snap?.snapshot_revision),
      90_000,
    );
    const services = (await ownerAdmin(z2.url, TOKEN)('GET', `/v1/admin/services?network=${N2.net}`)).body[
      'services'
    ] as { service_id: string; declaration_key: string; P: number | null }[];
    expect(services.map((s) => [s.declaration_key, s.P])).toEqual([['api', Number(p2)]]);
    const lease = await until(
      () => healthz(port),
      (h) => leaseOf(h, 'publisher', services[0]?.service_id as string)?.active === true,
      90_000,
    );
    expect(leaseOf(lease, 'publisher', services[0]?.service_id as string)?.epoch).toBe(String(z2.epoch));

    expect(events(z2.proc, 'next-candidate')).toHaveLength(1);
    expect(events(z2.proc, 'port-uncertain')).toEqual([]);
    expect(ns.lines.filter((l) => l['P'] === '8080' && taken(l))).toEqual([]);
    await stop(ns);
    await stop(z2.proc);
    // A registered exactly two proposals of this NSD: 8080 once (fenced) and candidate 2 — 8080 was never re-offered
    const t = endpointTable(N2);
    expect(t.proposals.filter((p) => p.nsd === z1.nsdId).sort((p, q) => Number(p.seq) - Number(q.seq))).toEqual([
      { nsd: z1.nsdId, seq: '1', P: '8080', status: 'terminated-pure' },
      { nsd: z1.nsdId, seq: '2', P: p2, status: 'confirmed' },
    ]);
    expect(t.endpoints.find((e) => e.P === '8080')).toEqual({ P: '8080', phase: 'installed-closed', nsd: x.nsdId });
  });
});

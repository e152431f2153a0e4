// P recovery between real processes (decisions 0170–0172): nsd on PostgreSQL and ns-daemons whose proposal answers are
// lost, late or never sent. B: an offered proposal unanswered for 3 × 2 s → RecoveryRequired (P kept reserved, no next
// candidate), then port.query / port.cancel on config.stream. A: PortArbiter.recover() at start (§5.15), the answers
// to B's requests as port.result. Evidence: B's port rows in PostgreSQL and both processes' JSON logs.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { type Proc, processWorkspace, startNs, startNsd, until } from './processes.js';

const db = useDatabase('nsd_port_recovery');
const ws = processWorkspace('nsd-port-recovery');

/** One publisher per test: its own identity, Network and one auto-mode declaration whose backend port is the P. */
const publisher = (name: string, backendPort: number) => {
  const id = ws.identity(name);
  writeFileSync(
    join(ws.dir, `${name}.json`),
    JSON.stringify([{ key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: backendPort }]),
  );
  return { ...id, name, net: randomBytes(16).toString('hex') };
};
const A = publisher('a', 8081);
const C = publisher('c', 8082);
const E = publisher('e', 8083);

let nsd: Awaited<ReturnType<typeof startNsd>>;
let c: pg.Client;
beforeAll(async () => {
  nsd = await startNsd(
    ws,
    db,
    [A, C, E].map((p) => `${p.hex}:${p.net}`),
  );
  c = new pg.Client(db.config);
  await c.connect();
  ws.closers.push(() => c.end());
});

type Row = { state: string; idx: number; tried: string[]; floor: string; seq: string };
const allocation = async (p: { hex: string }): Promise<Row> => {
  const r = await c.query(`SELECT value FROM service_control.port_allocation WHERE publisher = $1`, [
    Buffer.from(p.hex, 'hex'),
  ]);
  return (r.rows[0] as { value: Row }).value;
};
const entries = async (p: { hex: string }) =>
  (
    await c.query(`SELECT port, kind FROM service_control.port_entry WHERE publisher = $1 ORDER BY port`, [
      Buffer.from(p.hex, 'hex'),
    ])
  ).rows;
const logged =
  (event: string, fields: Record<string, unknown> = {}) =>
  (l: Record<string, unknown>) =>
    l['event'] === event && Object.entries(fields).every(([k, v]) => l[k] === v);
const events = (proc: Proc, event: string, fields: Record<string, unknown> = {}) =>
  proc.lines.filter(logged(event, fields));

describe('P recovery across processes', () => {
  it('M6-38 M6-61 ns-daemon SIGKILLed right after the MayInstall commit, before the install: restarted, recover() reinstalls its P from the endpoint table (after session and report, before the stream), nothing is released, and the snapshot proposal is answered from the table → B Claimed', async () => {
    const first = startNs(ws, nsd, A, A.name, A.net, { NS_FAULT: 'endpoint-may-install' });
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(events(first, 'fault', { point: 'endpoint-may-install' })).toHaveLength(1);
    expect(events(first, 'port-result')).toEqual([]); // B never got an answer
    // B: the proposal is still unanswered (offered, or already RecoveryRequired after 3 × 2 s), its P reserved
    expect(['offered', 'recovery-required']).toContain((await allocation(A)).state);
    expect(await entries(A)).toEqual([{ port: 8081, kind: 'reserved' }]);

    const again = startNs(ws, nsd, A, A.name, A.net);
    const rec = await again.waitFor(logged('ports-recovered'));
    expect(rec['reinstalled']).toEqual([{ P: '8081', installed: true, service_id: expect.any(String) as string }]);
    expect(rec['rearbitrated']).toEqual([]);
    // §5.15 order in the log: gates closed, nothing Active → floors → bind → session → report → ports → stream
    await again.waitFor(logged('stream-open'));
    const order = ['startup', 'floors-loaded', 'bound', 'session-open', 'ports-recovered', 'stream-open'].map((e) =>
      again.lines.findIndex((l) => l['event'] === e),
    );
    expect(order.every((i, k) => i >= 0 && (k === 0 || i > (order[k - 1] as number)))).toBe(true);
    expect(again.lines.find((l) => l['event'] === 'startup')).toMatchObject({ gates: 'closed', permits: 0 });
    // the snapshot's proposal (offered or recovery-required) is answered from the table: installed, never a new decision
    const answer = await again.waitFor(
      (l) => (l['event'] === 'port-result' || l['event'] === 'port-request-answered') && l['P'] === '8081',
    );
    expect(answer).toMatchObject({ result: 'installed', state: 'claimed' });
    await until(
      () => allocation(A),
      (a) => a.state === 'claimed',
    );
    expect(await entries(A)).toEqual([{ port: 8081, kind: 'owned' }]);
    expect(
      [...first.lines, ...again.lines].filter((l) => l['result'] === 'terminated-pure' || l['result'] === 'conflict'),
    ).toEqual([]);
    again.child.kill('SIGTERM');
    await again.exited;
  });

  it('M6-44 M6-41 a publisher that stops before its port.result: after 3 × 2 s B holds the allocation RecoveryRequired (P still reserved, no next candidate), its port.query re-sent unanswered changes nothing; once the daemon runs again its answers resolve it to Claimed', async () => {
    const ns = startNs(ws, nsd, C, C.name, C.net, { NS_FAULT: 'stop:before-port-result' });
    await ns.waitFor(logged('fault', { point: 'before-port-result', signal: 'SIGSTOP' }));
    await nsd.proc.waitFor(logged('port-uncertain', { P: '8082' }));
    const held = await allocation(C);
    expect([held.state, held.idx, held.tried]).toEqual(['recovery-required', 1, ['8082']]);
    expect(await entries(C)).toEqual([{ port: 8082, kind: 'reserved' }]);
    // the query is re-sent after another window with no answer: still RecoveryRequired, still reserved, no candidate
    await until(
      async () => events(nsd.proc, 'port-request-sent', { kind: 'port.query', P: '8082' }).length,
      (n) => n >= 2,
      30_000,
    );
    const still = await allocation(C);
    expect([still.state, still.idx, still.tried]).toEqual(['recovery-required', 1, ['8082']]);
    expect(await entries(C)).toEqual([{ port: 8082, kind: 'reserved' }]);

    ns.child.kill('SIGCONT');
    // its own answer and the answers to the buffered queries arrive; the first one resolves B
    await ns.waitFor(logged('port-result', { P: '8082', result: 'installed', state: 'claimed' }));
    await ns.waitFor(
      logged('port-request-answered', { kind: 'port.query', P: '8082', result: 'installed', state: 'claimed' }),
    );
    await nsd.proc.waitFor(logged('port-recovery-resolved', { P: '8082', state: 'claimed' }));
    expect((await allocation(C)).state).toBe('claimed');
    expect(await entries(C)).toEqual([{ port: 8082, kind: 'owned' }]);
    ns.child.kill('SIGTERM');
    await ns.exited;
  });

  it('M6-40 M6-41 a proposal A never registered: port.query answers absent (no release, still RecoveryRequired); port.cancel makes A fence it TerminatedPure, then B releases the reservation and persists the floor; the late snapshot proposal is refused by the fence', async () => {
    // the daemon arbitrates snapshot proposals 15 s late: B's confirmation window (6 s) ends first
    const ns = startNs(ws, nsd, E, E.name, E.net, { NS_DEBUG_DEFER_PROPOSALS_MS: '15000' });
    await nsd.proc.waitFor(logged('port-uncertain', { P: '8083' }));
    const absent = await ns.waitFor(
      logged('port-request-answered', { kind: 'port.query', P: '8083', result: 'absent' }),
    );
    expect(absent['state']).toBe('recovery-required'); // "absent" is no release proof
    await ns.waitFor(
      logged('port-request-answered', {
        kind: 'port.cancel',
        P: '8083',
        result: 'terminated-pure',
        state: 'released-pure',
      }),
    );
    const released = await allocation(E);
    expect([released.state, released.floor]).toEqual(['released-pure', released.seq]);
    expect(await entries(E)).toEqual([]); // never exposed to consumers: the pure reservation is released
    // the late original proposal meets the fence: refused (terminated-pure again), nothing installed, B unchanged
    const late = await ns.waitFor(logged('port-result', { P: '8083' }), 30_000);
    expect(late).toMatchObject({ result: 'terminated-pure', state: 'released-pure' });
    expect(
      ns.lines.filter((l) => l['P'] === '8083' && (l['result'] === 'installed' || l['result'] === 'claimed')),
    ).toEqual([]);
    expect((await allocation(E)).state).toBe('released-pure');
    expect(await entries(E)).toEqual([]);
    ns.child.kill('SIGTERM');
    await ns.exited;
  });
});

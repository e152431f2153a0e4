// A substantive declaration change while B's proposal is still offered (decision 0190), between real processes: nsd on
// PostgreSQL and one ns-daemon. The first daemon instance arbitrates snapshot proposals late (test-only delay) and is
// stopped before it does, so fixed P 41000 stays offered and unregistered on A; the restarted daemon reports fixed
// 42000. B keeps the old proposal until A's answer: port.cancel on the stream → A fences it TerminatedPure → B
// releases 41000 and opens round 2 with 42000 in that transaction → the daemon claims 42000. Evidence: B's port rows
// and both processes' JSON logs.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { processWorkspace, startNs, startNsd, until } from './processes.js';

const db = useDatabase('nsd_port_change');
const ws = processWorkspace('nsd-port-change');

const fixedWeb = (p: number) => [
  {
    key: 'web',
    protocols: ['tcp'],
    backend_host: '127.0.0.1',
    backend_port: 8090,
    port_mode: 'fixed',
    requested_port: p,
  },
];
const F = { ...ws.identity('f'), name: 'f', net: randomBytes(16).toString('hex') };
writeFileSync(join(ws.dir, 'f.json'), JSON.stringify(fixedWeb(41000)));

let nsd: Awaited<ReturnType<typeof startNsd>>;
let c: pg.Client;
beforeAll(async () => {
  // a long confirmation window: the recovery driver (decision 0171) must not be what resolves the old proposal here
  nsd = await startNsd(ws, db, [`${F.hex}:${F.net}`], { NSD_PORT_UNCERTAIN_MS: '120000' });
  c = new pg.Client(db.config);
  await c.connect();
  ws.closers.push(() => c.end());
});

type Row = {
  state: string;
  round: string;
  seq: string;
  tried: string[];
  floor: string;
  cur: { port: string } | null;
  pending: { req: string | null } | null;
  cancelling?: boolean;
};
const allocation = async (): Promise<Row | undefined> =>
  (
    (
      await c.query(`SELECT value FROM service_control.port_allocation WHERE publisher = $1`, [
        Buffer.from(F.hex, 'hex'),
      ])
    ).rows[0] as { value: Row } | undefined
  )?.value;
const entries = async () =>
  (
    await c.query(`SELECT port, kind FROM service_control.port_entry WHERE publisher = $1 ORDER BY port`, [
      Buffer.from(F.hex, 'hex'),
    ])
  ).rows.map((r: { port: number; kind: string }) => `${r.port}:${r.kind}`);

describe('a fixed-P change while the proposal is offered, across processes (decision 0190)', () => {
  it('M6-41 M6-45 §5.14 fixed 41000 → 42000 while 41000 is offered: B sends port.cancel, the daemon fences it and answers terminated-pure, B releases 41000 and offers 42000 in round 2, the daemon claims it', async () => {
    const ns1 = startNs(ws, nsd, F, F.name, F.net, { NS_DEBUG_DEFER_PROPOSALS_MS: '600000' });
    await ns1.waitFor((l) => l['event'] === 'snapshot-acked');
    const offered = await until(allocation, (a) => a?.state === 'offered');
    expect([offered?.cur?.port, offered?.round, offered?.seq]).toEqual(['41000', '1', '1']);
    expect(await entries()).toEqual(['41000:reserved']);
    ns1.child.kill('SIGTERM');
    await ns1.exited;

    writeFileSync(join(ws.dir, 'f.json'), JSON.stringify(fixedWeb(42000)));
    const ns2 = startNs(ws, nsd, F, F.name, F.net);
    const cancelled = await ns2.waitFor(
      (l) => l['event'] === 'port-request-answered' && l['kind'] === 'port.cancel' && l['P'] === '41000',
    );
    expect([cancelled['result'], cancelled['state']]).toEqual(['terminated-pure', 'released-pure']);
    const claimed = await ns2.waitFor((l) => l['event'] === 'port-result' && l['P'] === '42000');
    expect(['claimed', 'installed']).toContain(claimed['result']);
    expect(claimed['state']).toBe('claimed');
    const a = await until(allocation, (x) => x?.state === 'claimed');
    expect([a?.round, a?.seq, a?.cur?.port, a?.tried, a?.floor, a?.pending, a?.cancelling]).toEqual([
      '2',
      '2',
      '42000',
      ['42000'],
      '1',
      null,
      false,
    ]);
    expect(await entries()).toEqual(['42000:owned']);
    // resolved by the cancel's answer, not by the confirmation window; 41000 was never answered as taken
    expect(nsd.proc.lines.filter((l) => l['event'] === 'port-uncertain')).toEqual([]);
    expect(
      [...ns1.lines, ...ns2.lines].filter(
        (l) => l['P'] === '41000' && (l['result'] === 'claimed' || l['result'] === 'installed'),
      ),
    ).toEqual([]);
    ns2.child.kill('SIGTERM');
    await ns2.exited;
  });
});

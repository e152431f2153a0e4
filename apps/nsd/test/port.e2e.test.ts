// End to end on loopback for `ns service retry-port` (decision 0128): NSD (fresh PostgreSQL database) and two
// ns-daemons as real processes; the CLI is the ns-daemon bin's `service retry-port` subcommand talking to its running
// daemon, which relays `service.retry-port` to NSD. The P flow runs between the processes (decision 0150, 0152): the
// accepted report offers P, the publisher's snapshot carries the proposal, its daemon claims it through the
// PortArbiter and answers port.result, and the next snapshot carries the confirmed P.
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { SnapshotPushBody, uuidText } from '@homelab/service-control';
import { healthz, processWorkspace, start, until } from './processes.js';

const db = useDatabase('nsd_port');
const { dir, procs, closers, identity } = processWorkspace('nsd-port');

const NET = randomBytes(16).toString('hex');
const a = identity('a');
const b = identity('b');
writeFileSync(
  join(dir, 'a.json'),
  JSON.stringify([{ key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8080 }]),
);
writeFileSync(join(dir, 'b.json'), JSON.stringify([]));

/** Run `ns-daemon service retry-port …` (the bin's subcommand) and collect its exit code and output. */
const cli = (args: string[]): Promise<{ code: number | null; out: string }> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts', ...args], {
      cwd: join(import.meta.dirname, '../../ns-daemon'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });

describe('P allocation and ns service retry-port against real processes', () => {
  it('M6-38 M6-41 M6-45 M6-47 report → offer → snapshot with the proposal → the daemon claims → port table Claimed, next snapshot carries P; the CLI retry relays service.retry-port: round+1, idempotent per request id, foreign daemon refused', async () => {
    const nsd = start('nsd', {
      NSD_PORT: '0',
      NSD_DB_HOST: db.host,
      NSD_DB_PORT: String(db.port),
      NSD_DB_USER: db.user,
      NSD_DB_NAME: db.database,
      NSD_KEY_FILE: join(dir, 'nsd.pem'),
      NSD_MEMBERS: `${a.hex}:${NET},${b.hex}:${NET}`,
    });
    procs.push(nsd);
    const l = await nsd.waitFor((x) => x['event'] === 'listening');
    const ns = (who: { keyFile: string }, name: string) => {
      const p = start('ns-daemon', {
        NS_NSD_URL: `http://127.0.0.1:${l['port'] as number}`,
        NS_NSD_KEY: l['nsd_public_key'] as string,
        NS_NETWORK: NET,
        NS_KEY_FILE: who.keyFile,
        NS_STATE_FILE: join(dir, `${name}.db`),
        NS_DECLARATIONS: join(dir, `${name}.json`),
        NS_PORT: '0',
      });
      procs.push(p);
      return p;
    };
    const na = ns(a, 'a');
    const nb = ns(b, 'b');
    const pa = (await na.waitFor((x) => x['event'] === 'listening'))['port'] as number;
    const pb = (await nb.waitFor((x) => x['event'] === 'listening'))['port'] as number;
    await until(
      () => healthz(pa),
      (h) => h['phase'] === 'streaming' && h['acceptedRevision'] === '1',
    );
    await until(
      () => healthz(pb),
      (h) => h['phase'] === 'streaming',
    );

    const c = new pg.Client(db.config);
    await c.connect();
    closers.push(() => c.end());
    const row = (
      await c.query(
        `SELECT s.service_id, s.network_id, a.nsd_id FROM service_control.service s, service_control.authority a WHERE s.publisher = $1`,
        [Buffer.from(a.hex, 'hex')],
      )
    ).rows[0] as Record<string, Buffer>;
    const ref = {
      nsdId: new Uint8Array(row['nsd_id'] as Buffer),
      networkId: new Uint8Array(row['network_id'] as Buffer),
      serviceId: new Uint8Array(row['service_id'] as Buffer),
    };
    const refText = `${uuidText(ref.nsdId)}/${uuidText(ref.networkId)}/${uuidText(ref.serviceId)}`;

    // B offered P in the report's transaction; the snapshot carried the proposal; a's daemon claimed it (installed)
    const claimed = await na.waitFor((x) => x['event'] === 'port-result');
    expect([claimed['P'], claimed['result'], claimed['state']]).toEqual(['8080', 'installed', 'claimed']);
    const alloc = (
      await c.query(`SELECT value FROM service_control.port_allocation WHERE service_id = $1`, [
        Buffer.from(ref.serviceId),
      ])
    ).rows[0] as { value: Record<string, unknown> };
    expect(alloc.value['state']).toBe('claimed');
    const entry = (
      await c.query(`SELECT port, kind FROM service_control.port_entry WHERE publisher = $1`, [
        Buffer.from(a.hex, 'hex'),
      ])
    ).rows;
    expect(entry).toEqual([{ port: 8080, kind: 'owned' }]);
    // the next snapshot for the publisher carries the confirmed P in its Resource and the claimed listener intent
    const snap = await until(
      async () => {
        const r = (
          await c.query(`SELECT body FROM service_control.snapshot WHERE target = $1`, [Buffer.from(a.hex, 'hex')])
        ).rows[0] as { body: Buffer };
        return SnapshotPushBody.decodeOrThrow(new Uint8Array(r.body)).snapshot;
      },
      (x) => x.resources[0]?.P === 8080 && x.listeners[0]?.state === 'claimed',
    );
    expect(snap.listeners[0]?.proposal?.P).toBe(8080);
    const seq1 = snap.listeners[0]?.proposal?.proposal_seq as bigint;
    await until(
      () => healthz(pa),
      (h) => h['snapshotRevision'] === String(snap.snapshot_revision),
    );
    // b (a consumer) sees the Resource with P and no listener of a's
    const snapB = (
      await c.query(`SELECT body FROM service_control.snapshot WHERE target = $1`, [Buffer.from(b.hex, 'hex')])
    ).rows[0] as { body: Buffer };
    const viewB = SnapshotPushBody.decodeOrThrow(new Uint8Array(snapB.body)).snapshot;
    expect(viewB.listeners).toEqual([]);

    const rid2 = randomUUID();
    const r1 = await cli(['service', 'retry-port', refText, '--request-id', rid2, `--port=${pa}`]);
    expect(r1.code).toBe(0);
    expect(r1.out).toContain(`"allocation_round":"2","proposal_seq":"${seq1 + 1n}"`);
    // the same request id again (after an uncertain result): the same answer, no second round
    const r2 = await cli(['service', 'retry-port', refText, '--request-id', rid2, `--port=${pa}`]);
    expect(r2.code).toBe(0);
    expect(r2.out).toContain(`"allocation_round":"2","proposal_seq":"${seq1 + 1n}"`);
    // another node's daemon relaying a retry for a's service: refused with the category only
    const foreign = await cli(['service', 'retry-port', refText, '--request-id', randomUUID(), `--port=${pb}`]);
    expect(foreign.code).toBe(1);
    expect(foreign.out).toContain('"error":"unauthorized","detail":null');
    // usage errors never reach the daemon
    expect((await cli(['service', 'retry-port', 'not-a-ref', '--request-id', randomUUID()])).code).toBe(2);
    // round 2 proposes the confirmed P again; the daemon claims it (the P stays 8080, owned)
    await until(
      async () =>
        (
          (
            await c.query(`SELECT value FROM service_control.port_allocation WHERE service_id = $1`, [
              Buffer.from(ref.serviceId),
            ])
          ).rows[0] as { value: Record<string, unknown> }
        ).value,
      (v) => v['state'] === 'claimed' && String(v['round']) === '2',
    );
    expect(
      (
        await c.query(`SELECT port, kind FROM service_control.port_entry WHERE publisher = $1`, [
          Buffer.from(a.hex, 'hex'),
        ])
      ).rows,
    ).toEqual([{ port: 8080, kind: 'owned' }]);
  });
});

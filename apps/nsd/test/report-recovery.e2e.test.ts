// M6-20 between real processes, the case the lost-state test of pair.e2e.test.ts does not reach: A lost its report row and
// its declarations CHANGED meanwhile. report.head gives B's accepted revision R with another digest, so A persists
// R+1 with the new content before sending it, and B accepts R+1 (never R again with other content). Evidence: A's
// SQLite report record, B's report row and service rows, both logs.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openSqliteDaemonStore } from '@homelab/service-control/sqlite';
import { type Proc, healthz, processWorkspace, startNs, startNsd, until } from './processes.js';

const db = useDatabase('nsd_report_rec');
const ws = processWorkspace('nsd-report-rec');
const sql = sqlOn(db);
const nsPort = async (p: Proc) => (await p.waitFor((x) => x['event'] === 'listening'))['port'] as number;
const stop = async (p: Proc) => {
  p.child.kill('SIGTERM');
  expect((await p.exited).code).toBe(0);
};

describe('M6-20 report recovery with changed declarations', () => {
  it("M6-20 lost report row + changed declarations: report.head → B's revision R has another digest → A persists R+1, then sends it; B accepts R+1 with the new declaration", async () => {
    const who = { ...ws.identity('a'), net: randomBytes(16).toString('hex') };
    const decls = join(ws.dir, 'a.json');
    const stateFile = join(ws.dir, 'a.db');
    writeFileSync(
      decls,
      JSON.stringify([{ key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8080 }]),
    );
    const nsd = await startNsd(ws, db, [`${who.hex}:${who.net}`]);
    const scope = `${who.hex}/${nsd.nsdId}/${who.net}`;
    const reportRow = () =>
      sql(
        `SELECT revision::text AS revision, encode(digest, 'hex') AS digest FROM service_control.report WHERE identity = '\\x${who.hex}'`,
      );

    // two accepted revisions (a display-name edit while running is re-reported on restart)
    const n1 = startNs(ws, nsd, who, 'a', who.net);
    await until(
      () => nsPort(n1).then(healthz),
      (h) => h['phase'] === 'streaming' && h['acceptedRevision'] === '1',
      90_000,
    );
    await stop(n1);
    writeFileSync(
      decls,
      JSON.stringify([
        { key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8080, display_name: 'Web' },
      ]),
    );
    const n2 = startNs(ws, nsd, who, 'a', who.net);
    await until(
      () => nsPort(n2).then(healthz),
      (h) => h['phase'] === 'streaming' && h['acceptedRevision'] === '2',
      90_000,
    );
    await stop(n2);
    const [atR] = await reportRow();
    expect(atR?.['revision']).toBe('2');

    // A loses its report row (only that row: runtime, binding and floors stay) and the declarations change
    const raw = new Database(stateFile);
    expect(raw.prepare(`DELETE FROM record WHERE kind = 'report' AND scope = ?`).run(scope).changes).toBe(1);
    raw.close();
    writeFileSync(
      decls,
      JSON.stringify([
        { key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8081, display_name: 'Web' },
      ]),
    );

    const n3 = startNs(ws, nsd, who, 'a', who.net);
    const h3 = await until(
      () => nsPort(n3).then(healthz),
      (h) => h['phase'] === 'streaming' && h['acceptedRevision'] === '3',
      90_000,
    );
    expect(h3['reportRevision']).toBe('3');
    // through report.head: B had R = 2, A sends R+1 = 3
    expect(
      n3.lines
        .filter((l) => l['event'] === 'report-head')
        .map((l) => [l['accepted_revision'], l['action'], l['sends']]),
    ).toEqual([['2', 'send', '3']]);
    const [atR1] = await reportRow();
    expect(atR1?.['revision']).toBe('3');
    expect(atR1?.['digest']).not.toBe(atR?.['digest']);
    // the durable local record is R+1 with the digest B accepted
    await stop(n3);
    const s = openSqliteDaemonStore(stateFile);
    const rec = s.report(scope);
    s.close();
    expect(rec.state).toBe('present');
    if (rec.state !== 'present') return;
    expect([rec.report.revision, rec.acceptedRevision, Buffer.from(rec.report.digest).toString('hex')]).toEqual([
      3n,
      3n,
      atR1?.['digest'],
    ]);
    // B's service carries the new backend port (the declaration of R+1), under the same ServiceRef as before
    const services = await sql(
      `SELECT declaration_key, state FROM service_control.service WHERE publisher = '\\x${who.hex}'`,
    );
    expect(services).toEqual([{ declaration_key: 'web', state: 'active' }]);
    await stop(nsd.proc);
  });
});

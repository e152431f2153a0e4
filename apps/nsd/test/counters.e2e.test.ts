// M6-5 at the stores, between real processes: a counter at 2^64−1 makes its next increment `counter-exhausted` and
// leaves the PERSISTED value unchanged — B's authority_epoch in PostgreSQL, A's runtime_generation and session_seq in
// its SQLite state — and nothing is sent or served on the exhausted value. (The pure rules are in
// libs/service-control/test/{runtime,session,report,fence-epoch}.test.ts.)
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { openSqliteDaemonStore } from '@homelab/service-control/sqlite';
import { type Proc, healthz, nsdEnv, processWorkspace, start, startNs, startNsd, until } from './processes.js';

const U64_MAX = 18446744073709551615n;
const db = useDatabase('nsd_counters');
const ws = processWorkspace('nsd-counters');
const sql = sqlOn(db);

const daemon = (name: string) => {
  const id = ws.identity(name);
  writeFileSync(
    join(ws.dir, `${name}.json`),
    JSON.stringify([{ key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8080 }]),
  );
  return { ...id, name, net: randomBytes(16).toString('hex'), stateFile: join(ws.dir, `${name}.db`) };
};
type Daemon = ReturnType<typeof daemon>;
const nsPort = async (p: Proc) => (await p.waitFor((x) => x['event'] === 'listening'))['port'] as number;
const stop = async (p: Proc) => {
  p.child.kill('SIGTERM');
  expect((await p.exited).code).toBe(0);
};
const failedWith = (p: Proc, code: string) => p.waitFor((l) => l['event'] === 'failed' && l['code'] === code);
/** A's scope key: identity / nsd_id / network_id, lowercase hex (domain/ids.ts scopeKey). */
const scopeOf = (who: Daemon, nsdIdHex: string) => `${who.hex}/${nsdIdHex}/${who.net}`;
const healthStatus = async (port: number) => (await fetch(`http://127.0.0.1:${port}/healthz`)).status;

describe('M6-5 counters at 2^64-1 in the real stores', () => {
  it('M6-5 M6-12 nsd at authority_epoch 2^64-1 refuses to serve: counter-exhausted, exit 1, never listens; the persisted epoch and nsd_id are unchanged', async () => {
    const first = await startNsd(ws, db, []);
    await stop(first.proc);
    await sql(`UPDATE service_control.authority SET epoch = ${U64_MAX}`);
    const [before] = await sql(
      `SELECT encode(nsd_id, 'hex') AS nsd_id, epoch::text AS epoch FROM service_control.authority`,
    );
    expect(before?.['epoch']).toBe(String(U64_MAX));

    try {
      const again = start('nsd', nsdEnv(ws, db, [])); // not startNsd: it must not reach 'listening'
      ws.procs.push(again);
      expect((await again.exited).code).toBe(1);
      const failed = again.lines.find((l) => l['event'] === 'failed');
      expect(String(failed?.['error'])).toContain('counter-exhausted: authority_epoch at 2^64-1');
      expect(again.lines.some((l) => l['event'] === 'listening')).toBe(false);
      expect(
        await sql(`SELECT encode(nsd_id, 'hex') AS nsd_id, epoch::text AS epoch FROM service_control.authority`),
      ).toEqual([before]);
    } finally {
      await sql(`UPDATE service_control.authority SET epoch = 1`); // the other tests' nsd starts normally
    }
  });

  it('M6-5 M6-8 ns-daemon at runtime_generation 2^64-1 never binds: counter-exhausted, /healthz 503 failed; the persisted generation is unchanged and B has no binding for it', async () => {
    const who = daemon('gen');
    const nsd = await startNsd(ws, db, [`${who.hex}:${who.net}`]);
    const s = openSqliteDaemonStore(who.stateFile);
    s.saveRuntime(Buffer.from(who.hex, 'hex'), { state: 'normal', generation: U64_MAX });
    s.close();

    const ns = startNs(ws, nsd, who, who.name, who.net);
    const port = await nsPort(ns);
    await failedWith(ns, 'counter-exhausted');
    const h = await until(
      () => healthz(port),
      (x) => x['phase'] === 'failed',
    );
    expect(h['lastError']).toBe('counter-exhausted');
    expect(await healthStatus(port)).toBe(503);
    expect(ns.lines.some((l) => l['event'] === 'bound')).toBe(false);
    await stop(ns);

    const r = openSqliteDaemonStore(who.stateFile);
    expect(r.runtime(Buffer.from(who.hex, 'hex'))).toEqual({ state: 'normal', generation: U64_MAX });
    r.close();
    expect(await sql(`SELECT 1 FROM service_control.runtime_binding WHERE identity = '\\x${who.hex}'`)).toEqual([]);
    await stop(nsd.proc);
  });

  it("M6-5 M6-13 ns-daemon at session_seq 2^64-1 binds but never opens a session: counter-exhausted; the persisted seq and B's session mark are unchanged", async () => {
    const who = daemon('seq');
    const nsd = await startNsd(ws, db, [`${who.hex}:${who.net}`]);
    const ns1 = startNs(ws, nsd, who, who.name, who.net);
    const p1 = await nsPort(ns1);
    await until(
      () => healthz(p1),
      (x) => x['phase'] === 'streaming' && Number(x['acks']) >= 1,
      90_000,
    );
    await stop(ns1);
    const markQuery = `SELECT generation::text AS generation, seq::text AS seq, epoch::text AS epoch FROM service_control.session_mark WHERE identity = '\\x${who.hex}'`;
    const mark = await sql(markQuery);
    expect(mark).toHaveLength(1);

    const scope = scopeOf(who, nsd.nsdId);
    const s = openSqliteDaemonStore(who.stateFile);
    expect(s.lastSessionSeq(scope)).toBe(1n); // the scope key is the daemon's own
    s.saveSessionSeq(scope, U64_MAX);
    s.close();

    const ns2 = startNs(ws, nsd, who, who.name, who.net);
    const p2 = await nsPort(ns2);
    await failedWith(ns2, 'counter-exhausted');
    expect(ns2.lines.some((l) => l['event'] === 'bound')).toBe(true); // the new instance bound (generation 2) …
    expect(ns2.lines.some((l) => l['event'] === 'session-open')).toBe(false); // … and sent no session.open
    expect((await healthz(p2))['lastError']).toBe('counter-exhausted');
    await stop(ns2);

    const r = openSqliteDaemonStore(who.stateFile);
    expect(r.lastSessionSeq(scope)).toBe(U64_MAX);
    r.close();
    expect(await sql(markQuery)).toEqual(mark);
    await stop(nsd.proc);
  });
});

// issue 26 item 6: readiness means "can serve", between real processes. nsd's /readyz is 200 only while PostgreSQL
// answers and still holds this process's epoch (a newer takeover fences it out; the database refusing connections
// makes it storage-unavailable, and it recovers when the database does). ns-daemon's /readyz is 200 only while
// streaming. /healthz stays liveness in both.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { adminQuery, useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { processWorkspace, startNs, startNsListening, startNsd, until } from './processes.js';

const db = useDatabase('nsd_ready');
const ws = processWorkspace('nsd-ready');

const probe = async (port: number, path: '/readyz' | '/healthz') => {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};

describe('readiness means can serve', () => {
  it('nsd: ready while it holds the epoch; a newer takeover makes the older process unready (fenced), alive', async () => {
    const first = await startNsd(ws, db, []);
    expect(await probe(first.port, '/readyz')).toEqual({
      status: 200,
      body: { ready: true, epoch: String(first.epoch) },
    });
    const second = await startNsd(ws, db, []);
    expect(await probe(second.port, '/readyz')).toMatchObject({ status: 200, body: { ready: true } });
    expect(await probe(first.port, '/readyz')).toEqual({
      status: 503,
      body: { ready: false, reason: 'fenced', epoch: String(first.epoch), current: String(second.epoch) },
    });
    expect((await probe(first.port, '/healthz')).status).toBe(200);
    first.proc.child.kill('SIGTERM');
    second.proc.child.kill('SIGTERM');
    await Promise.all([first.proc.exited, second.proc.exited]);
  });

  it('nsd: storage-unavailable while PostgreSQL refuses connections, ready again once it accepts them', async () => {
    const nsd = await startNsd(ws, db, []);
    try {
      await adminQuery(`ALTER DATABASE "${db.database}" ALLOW_CONNECTIONS false`);
      await adminQuery(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${db.database}'`);
      const down = await until(
        () => probe(nsd.port, '/readyz'),
        (r) => r.status === 503,
        20_000,
      );
      expect(down.body).toEqual({ ready: false, reason: 'storage-unavailable' });
      expect((await probe(nsd.port, '/healthz')).status).toBe(200);
    } finally {
      await adminQuery(`ALTER DATABASE "${db.database}" ALLOW_CONNECTIONS true`);
    }
    const up = await until(
      () => probe(nsd.port, '/readyz'),
      (r) => r.status === 200,
      20_000,
    );
    expect(up.body).toMatchObject({ ready: true });
    nsd.proc.child.kill('SIGTERM');
    await nsd.proc.exited;
  });

  it('ns-daemon: unready (its phase) while the NSD is unreachable, ready once streaming', async () => {
    const net = randomBytes(16).toString('hex');
    const who = ws.identity('a');
    writeFileSync(join(ws.dir, 'a.json'), '[]');
    writeFileSync(join(ws.dir, 'b.json'), '[]');
    // an NSD URL where nothing listens: the daemon is alive but can serve nothing
    const lonely = await startNsListening(
      ws,
      { url: 'http://127.0.0.1:9', key: 'e'.repeat(64) },
      ws.identity('b'),
      'b',
      net,
    );
    const unready = await probe(lonely.port, '/readyz');
    expect(unready.status).toBe(503);
    expect(unready.body['ready']).toBe(false);
    expect(unready.body['phase']).not.toBe('streaming');
    expect(typeof unready.body['phase']).toBe('string');
    expect((await probe(lonely.port, '/healthz')).status).toBe(200);

    const nsd = await startNsd(ws, db, [`${who.hex}:${net}`]);
    const a = await startNsListening(ws, nsd, who, 'a', net);
    const ready = await until(
      () => probe(a.port, '/readyz'),
      (r) => r.status === 200,
      30_000,
    );
    expect(ready.body).toEqual({ ready: true, phase: 'streaming' });
  });
});

describe('ns-daemon probe listener (--health-port)', () => {
  it('serves /healthz, /readyz and /metrics on its own port and none of the owner endpoints', async () => {
    writeFileSync(join(ws.dir, 'c.json'), '[]');
    const p = startNs(
      ws,
      { url: 'http://127.0.0.1:9', key: 'e'.repeat(64) },
      ws.identity('c'),
      'c',
      randomBytes(16).toString('hex'),
      { NS_HEALTH_PORT: '0' },
    );
    const owner = (await p.waitFor((x) => x['event'] === 'listening'))['port'] as number;
    const health = (await p.waitFor((x) => x['event'] === 'health-listening'))['port'] as number;
    expect(health).not.toBe(owner);
    expect((await probe(health, '/healthz')).status).toBe(200);
    expect((await probe(health, '/readyz')).status).toBe(503);
    const scrape = await fetch(`http://127.0.0.1:${health}/metrics`);
    expect([scrape.status, (await scrape.text()).includes('ns_phase')]).toEqual([200, true]);
    expect((await fetch(`http://127.0.0.1:${health}/v1/owner/names`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${owner}/v1/owner/names`)).status).not.toBe(404);
  });
});

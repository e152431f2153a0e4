// Authority shards between real processes (decision 0455, issue 25 "two nsd processes that split the Networks between
// them, each Network still has exactly one fenced authority"): nsd --shard 1/2 and --shard 2/2 on one database, one
// ns-daemon per Network, both configured alike with the list of the shards' nsd (`--nsd-url 1=…,2=…`, decision 0485):
// each picks its Network's shard and streams. A daemon directed to the other shard's nsd is refused (unauthorized,
// not-this-shard), and so is the owner's admin API for another shard's Network (421, the shard named). A second shard-1 nsd takes shard 1 over: the first shard-1 process is fenced
// (unready) while the shard-2 nsd keeps its epoch, stays ready and keeps serving its daemon.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import { shardOf } from '@homelab/service-control';
import { describe, expect, it } from 'vitest';
import { ownerAdmin, processWorkspace, startNs, startNsListening, startNsd, until } from './processes.js';

const db = useDatabase('nsd_shard');
const ws = processWorkspace('nsd-shard');

const probe = async (port: number, path: '/readyz' | '/healthz') => {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};
/** A random Network id (hex) of shard `index` of 2. */
const networkOf = (index: number): string => {
  for (;;) {
    const n = randomBytes(16);
    if (shardOf(new Uint8Array(n), 2) === index) return n.toString('hex');
  }
};

describe('two nsd processes split the Networks (decision 0455)', () => {
  it('each nsd serves the daemons of its own Networks, refuses another shard’s, and a takeover of shard 1 leaves shard 2 serving in its epoch', async () => {
    const net1 = networkOf(1);
    const net2 = networkOf(2);
    const a = ws.identity('a');
    const b = ws.identity('b');
    const stray = ws.identity('stray');
    for (const name of ['b', 'stray']) writeFileSync(join(ws.dir, `${name}.json`), '[]');
    const web = [{ key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8080 }];
    writeFileSync(join(ws.dir, 'a.json'), JSON.stringify(web));
    const members = [`${a.hex}:${net1}`, `${b.hex}:${net2}`, `${stray.hex}:${net1}`];
    const token = randomBytes(16).toString('hex');
    const nsd1 = await startNsd(ws, db, members, { NSD_SHARD: '1/2', NSD_ADMIN_TOKEN: token });
    const nsd2 = await startNsd(ws, db, members, { NSD_SHARD: '2/2', NSD_ADMIN_TOKEN: token });
    expect([nsd1.epoch, nsd2.epoch]).toEqual([1n, 1n]);
    expect(nsd2.nsdId).toBe(nsd1.nsdId);

    // the same configuration for every daemon — the list of the shards' nsd — and each streams from its Network's shard
    const shards = { NS_NSD_URL: `2=${nsd2.url},1=${nsd1.url}` };
    const daemonA = await startNsListening(ws, nsd1, a, 'a', net1, shards);
    const daemonB = await startNsListening(ws, nsd1, b, 'b', net2, shards);
    expect(daemonA.p.lines.find((l) => l['event'] === 'nsd-shard')).toMatchObject({ shard: '1/2', nsd_url: nsd1.url });
    expect(daemonB.p.lines.find((l) => l['event'] === 'nsd-shard')).toMatchObject({ shard: '2/2', nsd_url: nsd2.url });
    const streaming = (port: number) =>
      until(
        () => probe(port, '/readyz'),
        (r) => r.status === 200,
        60_000,
      );
    await streaming(daemonA.port);
    await streaming(daemonB.port);

    // a daemon of a shard-1 Network directed to the shard-2 nsd is refused before anything is written
    startNs(ws, nsd2, stray, 'stray', net1);
    const refused = await nsd2.proc.waitFor((l) => l['event'] === 'refused');
    expect(refused).toMatchObject({ code: 'unauthorized' });
    expect(String(refused['detail'])).toMatch(/^not-this-shard: the Network belongs to authority shard 1\/2/);

    // the owner's admin API: the policy view and edits of a shard-1 Network answer 421 at nsd 2/2 (naming shard 1/2)
    // and change nothing; nsd 1/2 serves them
    const admin1 = ownerAdmin(nsd1.url, token);
    const admin2 = ownerAdmin(nsd2.url, token);
    const services = await until(
      () => admin1('GET', `/v1/admin/services?network=${net1}`),
      (r) => r.status === 200 && (r.body['services'] as unknown[]).length === 1,
    );
    const service = (services.body['services'] as { service_id: string; policy_version: string }[])[0];
    const misdirected = {
      status: 421,
      body: {
        error: 'unauthorized',
        detail: 'not-this-shard: the Network belongs to authority shard 1/2, this is 2/2',
      },
    };
    expect(await admin2('GET', `/v1/admin/services?network=${net1}`)).toEqual(misdirected);
    const allow = { service_id: service?.service_id, consumer: stray.hex, protocols: ['tcp'] };
    expect(await admin2('PUT', '/v1/admin/policy', allow)).toEqual(misdirected);
    expect(
      await admin2('DELETE', '/v1/admin/policy', { service_id: service?.service_id, consumer: stray.hex }),
    ).toEqual(misdirected);
    expect(await admin1('GET', `/v1/admin/services?network=${net1}`)).toEqual(services);
    expect(await admin1('PUT', '/v1/admin/policy', allow)).toEqual({
      status: 200,
      body: { outcome: 'changed', policy_version: '2' },
    });

    // a second shard-1 nsd takes shard 1 over: the first is fenced, shard 2 keeps its epoch and its daemon
    const nsd1b = await startNsd(ws, db, members, { NSD_SHARD: '1/2' });
    expect(nsd1b.epoch).toBe(2n);
    expect(await probe(nsd1.port, '/readyz')).toEqual({
      status: 503,
      body: { ready: false, reason: 'fenced', epoch: '1', current: '2' },
    });
    expect(await probe(nsd2.port, '/readyz')).toEqual({ status: 200, body: { ready: true, epoch: '1' } });
    // shard 2 still commits: its daemon's next request (a restart of the daemon: bind, session, stream) is served by
    // nsd 2 in epoch 1
    daemonB.p.child.kill('SIGTERM');
    await daemonB.p.exited;
    const daemonB2 = await startNsListening(ws, nsd2, b, 'b', net2, shards);
    expect((await streaming(daemonB2.port)).status).toBe(200);
    expect(nsd2.proc.lines.filter((l) => l['event'] === 'refused' && l['code'] === 'stale-epoch')).toEqual([]);
  });
});

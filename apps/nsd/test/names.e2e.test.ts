// M6-57 (multi-source names) across real processes: a consumer's multi-source local name whose selected source is the
// publisher's service, answered over the consumer daemon's DNS listener; when the owner removes the consumer's
// authorization on nsd, B's snapshot carries the source Withdrawal, and the daemon stops the entry (REFUSED, AA) —
// no other source is chosen — and it stays stopped when the consumer is allowed again, until the owner selects.
import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { type DecodedReply, QTYPE, RCODE, decodeReply, encodeQuery, ipv6Groups } from '@homelab/service-control/dns';
import {
  healthz,
  leaseOf,
  ownerAdmin,
  processWorkspace,
  publisherAndConsumer,
  startNs,
  startNsd,
  until,
} from './processes.js';

const db = useDatabase('nsd_names');
const ws = processWorkspace('nsd-names');
const { net: NET, token: TOKEN, pub, con, members } = publisherAndConsumer(ws);

const uuid = (hex: string) =>
  `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
const owner = async (port: number, body: unknown) => {
  const r = await fetch(`http://127.0.0.1:${port}/v1/owner/names`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};
const udp = (port: number, name: string): Promise<DecodedReply> =>
  new Promise((resolve) => {
    const s = createSocket('udp4');
    s.on('message', (m) => {
      s.close();
      resolve(decodeReply(new Uint8Array(m)) as DecodedReply);
    });
    s.send(encodeQuery(name, QTYPE.AAAA), port, '127.0.0.1');
  });
const consumerActive = (h: Record<string, unknown>, id: string) => leaseOf(h, 'consumer', id)?.active === true;

describe("M6-57 multi-source names follow B's withdrawals", () => {
  it("M6-57 M6-25 a selected source withdrawn by B (the owner removes the consumer) stops the consumer's multi-source name over DNS; the other candidate is not chosen; allowed again it stays stopped until the owner selects", async () => {
    const nsd = await startNsd(ws, db, members, { NSD_ADMIN_TOKEN: TOKEN });
    const admin = ownerAdmin(nsd.url, TOKEN);
    const a = startNs(ws, nsd, pub, 'publisher', NET);
    const b = startNs(ws, nsd, con, 'consumer', NET, { NS_DNS_PORT: '0' });
    const bHttp = (await b.waitFor((x) => x['event'] === 'listening'))['port'] as number;
    const bDns = (await b.waitFor((x) => x['event'] === 'dns-listening'))['port'] as number;
    await a.waitFor((x) => x['event'] === 'listening');
    const services = await until(
      () => admin('GET', `/v1/admin/services?network=${NET}`),
      (r) => (r.body['services'] as { P: number | null }[] | undefined)?.[0]?.P != null,
    );
    const id = (services.body['services'] as { service_id: string }[])[0]?.service_id as string;
    const ref = `${uuid(nsd.nsdId)}/${uuid(NET)}/${uuid(id)}`;
    const other = `${uuid(nsd.nsdId)}/${uuid(NET)}/${uuid(randomBytes(16).toString('hex'))}`;
    expect(
      (await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp'] })).body[
        'outcome'
      ],
    ).toBe('changed');
    await until(
      () => healthz(bHttp),
      (h) => consumerActive(h, id),
      90_000,
    );

    expect(
      (
        await owner(bHttp, {
          op: 'create-multi-source',
          name: 'web',
          sources: [
            { ref, address: 'fd00::80' },
            { ref: other, address: 'fd00::81' },
          ],
        })
      ).status,
    ).toBe(200);
    expect((await owner(bHttp, { op: 'select', name: 'web', ref })).status).toBe(200);
    const answered = await udp(bDns, 'web');
    expect([answered.rcode, answered.answers.map((x) => ipv6Groups(x.rdata))]).toEqual([
      RCODE.NOERROR,
      ['fd00:0:0:0:0:0:0:80'],
    ]);
    expect(answered.answers[0]?.ttl).toBeGreaterThan(0); // a live consumer permit: TTL ≤ min(60 s, its remaining time)
    expect(answered.answers[0]?.ttl).toBeLessThanOrEqual(30);

    // the owner removes the consumer: B withdraws the source from the consumer's snapshot → the entry stops
    expect((await admin('DELETE', '/v1/admin/policy', { service_id: id, consumer: con.hex })).body['outcome']).toBe(
      'changed',
    );
    await b.waitFor((l) => l['event'] === 'name-sources-withdrawn' && l['ref'] === ref);
    expect(await udp(bDns, 'web')).toMatchObject({ rcode: RCODE.REFUSED, aa: true, answers: [] });
    const listed = (await (await fetch(`http://127.0.0.1:${bHttp}/v1/owner/names`)).json()) as {
      selectors: { name: string; selection: { state: string; reason?: string } }[];
    };
    expect(listed.selectors).toEqual([
      expect.objectContaining({
        name: 'web',
        selection: expect.objectContaining({ state: 'invalid', reason: 'source-withdrawn' }),
      }),
    ]);

    // allowed again: the permit comes back, the entry does not (sticky) — until the owner selects
    await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp'] });
    await until(
      () => healthz(bHttp),
      (h) => consumerActive(h, id),
      90_000,
    );
    expect((await udp(bDns, 'web')).rcode).toBe(RCODE.REFUSED);
    expect((await owner(bHttp, { op: 'add-source', name: 'web', ref, address: 'fd00::80' })).status).toBe(200);
    expect((await owner(bHttp, { op: 'select', name: 'web', ref })).status).toBe(200);
    expect((await udp(bDns, 'web')).rcode).toBe(RCODE.NOERROR);
    for (const p of [a, b, nsd.proc]) p.child.kill('SIGTERM');
  });
});

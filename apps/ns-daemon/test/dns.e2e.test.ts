// M6-57 through a real ns-daemon process: the loopback DNS listener (NS_DNS_PORT=0 → ephemeral) answers the local
// names the owner binds over `POST /v1/owner/names`, queried with node:dgram / node:net. No NSD runs (its URL is a
// closed port), so no permit exists: every positive TTL must be 0 = min(60 s, permit remaining 0). TTL bounds with a
// live permit are covered on the adapter (libs/service-control test/dns-server.it.test.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type DecodedReply, QTYPE, RCODE, decodeReply, encodeQuery, ipv6Groups } from '@homelab/service-control/dns';
import { loadConfig } from '../src/config.js';

const dir = mkdtempSync(join(tmpdir(), 'ns-daemon-dns-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const REF_1 =
  '11111111-1111-4111-8111-111111111111/22222222-2222-4222-8222-222222222222/33333333-3333-4333-8333-333333333333';
const REF_2 =
  '11111111-1111-4111-8111-111111111111/22222222-2222-4222-8222-222222222222/44444444-4444-4444-8444-444444444444';

/** Start ns-daemon (NSD unreachable) with the DNS listener on an ephemeral port; resolves with both ports. */
const startDaemon = (): Promise<{ child: ChildProcess; http: number; dns: number }> => {
  const child = spawn(process.execPath, ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts'], {
    cwd: join(import.meta.dirname, '..'),
    env: {
      ...process.env,
      NS_NSD_URL: 'http://127.0.0.1:9',
      NS_NSD_KEY: 'a'.repeat(64),
      NS_NETWORK: 'b'.repeat(32),
      NS_KEY_FILE: join(dir, 'k.pem'),
      NS_STATE_FILE: join(dir, 's.db'),
      NS_PORT: '0',
      NS_DNS_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  return new Promise((resolve, reject) => {
    const ports: { http?: number; dns?: number } = {};
    let buf = '';
    child.stdout?.on('data', (c: Buffer) => {
      buf += c.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const record = JSON.parse(buf.slice(0, i)) as {
          message: string;
          annotations: { port?: number; host?: string };
        };
        const line = { event: record.message, ...record.annotations };
        buf = buf.slice(i + 1);
        if (line.event === 'listening') ports.http = line.port;
        if (line.event === 'dns-listening') {
          expect(line.host).toBe('127.0.0.1');
          ports.dns = line.port;
        }
        if (ports.http !== undefined && ports.dns !== undefined) resolve({ child, http: ports.http, dns: ports.dns });
      }
    });
    child.on('exit', (code) => reject(new Error(`ns-daemon exited ${code}: ${err.slice(-2000)}`)));
  });
};

const udp = (port: number, packet: Uint8Array): Promise<DecodedReply> =>
  new Promise((resolve) => {
    const s = createSocket('udp4');
    s.on('message', (m) => {
      s.close();
      resolve(decodeReply(new Uint8Array(m)) as DecodedReply);
    });
    s.send(packet, port, '127.0.0.1');
  });

const tcp = (port: number, packet: Uint8Array): Promise<DecodedReply> =>
  new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    sock.on('error', reject);
    sock.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        sock.end();
        resolve(decodeReply(new Uint8Array(buf.subarray(2, 2 + buf.readUInt16BE(0)))) as DecodedReply);
      }
    });
    sock.write(Buffer.concat([Buffer.from([packet.length >> 8, packet.length & 0xff]), packet]));
  });

const owner = async (http: number, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
  const res = await fetch(`http://127.0.0.1:${http}/v1/owner/names`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

const addr = (r: DecodedReply) => r.answers.map((a) => ipv6Groups(a.rdata));

describe('ns-daemon serves local names over DNS (M6-57)', () => {
  it('M6-57 ns-daemon DNS: owner-bound names answered over UDP and TCP with TTL ≤ min(60 s, permit remaining = 0); NXDOMAIN without SOA; other zones REFUSED; rebind and tombstone visible at the next query; names survive a restart', async () => {
    const d = await startDaemon();
    expect(await owner(d.http, { op: 'nickname', name: 'nas', ref: REF_1, address: 'fd00::1' })).toMatchObject({
      status: 200,
      body: { entry: { name: 'nas', kind: 'manual', state: 'live' } },
    });
    const auto = await owner(d.http, { op: 'allocate', ref: REF_2, address: 'fd00::2' });
    const autoName = (auto.body['entry'] as { name: string }).name;
    expect(autoName).toMatch(/^[a-z]{2}[0-9]{3}$/);
    expect(await owner(d.http, { op: 'nickname', name: autoName, ref: REF_1, address: 'fd00::9' })).toMatchObject({
      status: 409,
      body: { error: 'name-taken' },
    });

    const nas = await udp(d.dns, encodeQuery('nas', QTYPE.AAAA, { edns: true }));
    expect(nas).toMatchObject({ rcode: RCODE.NOERROR, aa: true, ra: false, opt: { payload: 1232 } });
    expect(addr(nas)).toEqual(['fd00:0:0:0:0:0:0:1']);
    // no NSD, so no permit: min(60 s, 0) = 0 — the answer must not be cached by anyone
    const leases = ((await (await fetch(`http://127.0.0.1:${d.http}/healthz`)).json()) as { leases: unknown[] }).leases;
    expect(leases).toEqual([]);
    expect(nas.answers[0]?.ttl).toBe(0);
    const viaTcp = await tcp(d.dns, encodeQuery(`${autoName}.ns.internal`, QTYPE.AAAA));
    expect([viaTcp.rcode, addr(viaTcp), viaTcp.answers[0]?.ttl]).toEqual([RCODE.NOERROR, ['fd00:0:0:0:0:0:0:2'], 0]);

    expect(await udp(d.dns, encodeQuery('ghost.ns.internal', QTYPE.AAAA))).toMatchObject({
      rcode: RCODE.NXDOMAIN,
      aa: true,
      answers: [],
      authority: 0,
    });
    for (const name of ['example.com', 'nas.example.com'])
      expect((await udp(d.dns, encodeQuery(name, QTYPE.AAAA))).rcode).toBe(RCODE.REFUSED);
    expect((await udp(d.dns, Uint8Array.from([0, 1, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0]))).rcode).toBe(RCODE.FORMERR); // QDCOUNT 2

    expect(await owner(d.http, { op: 'rebind', name: 'nas', ref: REF_2, address: 'fd00::3' })).toMatchObject({
      status: 200,
      body: { entry: { version: '2' } },
    });
    expect(addr(await udp(d.dns, encodeQuery('nas', QTYPE.AAAA)))).toEqual(['fd00:0:0:0:0:0:0:3']);
    expect(await owner(d.http, { op: 'tombstone', name: autoName })).toMatchObject({
      status: 200,
      body: { entry: { state: 'tombstone' } },
    });
    expect((await udp(d.dns, encodeQuery(autoName, QTYPE.AAAA))).rcode).toBe(RCODE.NXDOMAIN);
    expect(await owner(d.http, { op: 'rebind', name: 'ghost' })).toMatchObject({ status: 400 });

    const metrics = await (await fetch(`http://127.0.0.1:${d.http}/metrics`)).text();
    expect(metrics).toMatch(/ns_dns_queries_total\{transport="udp",outcome="answer"\} [1-9]/);
    expect(metrics).toMatch(/ns_dns_queries_total\{transport="tcp",outcome="answer"\} 1/);
    expect(metrics).toMatch(/ns_dns_queries_total\{transport="udp",outcome="refused"\} 2/);

    d.child.kill('SIGTERM');
    expect(await new Promise((r) => d.child.on('exit', (code) => r(code)))).toBe(0);
    const again = await startDaemon(); // the table is in the state file
    expect(addr(await udp(again.dns, encodeQuery('nas', QTYPE.AAAA)))).toEqual(['fd00:0:0:0:0:0:0:3']);
    expect((await udp(again.dns, encodeQuery(autoName, QTYPE.AAAA))).rcode).toBe(RCODE.NXDOMAIN);
    again.child.kill('SIGTERM');
    await new Promise((r) => again.child.on('exit', r));
  });

  it('M6-57 ns-daemon DNS: a multi-source name answers only after the owner selects, stops (REFUSED, AA) when the selected source is withdrawn — also after it returns and across a restart — until selected again; unknown fields refused', async () => {
    const d = await startDaemon();
    const s1 = { ref: REF_1, address: 'fd00::11' };
    const s2 = { ref: REF_2, address: 'fd00::22' };
    expect(await owner(d.http, { op: 'create-multi-source', name: 'media', sources: [s1, s2] })).toMatchObject({
      status: 200,
      body: { selector: { name: 'media', selection: { state: 'none' }, answering: null, version: '1' } },
    });
    const stopped = await udp(d.dns, encodeQuery('media', QTYPE.AAAA, { edns: true }));
    expect(stopped).toMatchObject({ rcode: RCODE.REFUSED, aa: true, answers: [], authority: 0 });

    // Effect Schema bodies: unknown fields and wrong shapes are refused, each with its code
    expect(await owner(d.http, { op: 'select', name: 'media', ref: REF_2, force: true })).toMatchObject({
      status: 400,
      body: { error: 'invalid-encoding' },
    });
    expect(await owner(d.http, { op: 'create-multi-source', name: 'x', sources: [{ ref: REF_1 }] })).toMatchObject({
      status: 400,
      body: { error: 'invalid-encoding' },
    });
    expect(await owner(d.http, { op: 'select', name: 'media', ref: 'nsd/net/unknown' })).toMatchObject({
      status: 409,
      body: { error: 'unknown-source', detail: 'media' },
    });
    expect(await owner(d.http, { op: 'rebind', name: 'media', ref: REF_1, address: 'fd00::11' })).toMatchObject({
      status: 409,
      body: { error: 'multi-source-name' },
    });

    expect(await owner(d.http, { op: 'select', name: 'media', ref: REF_2 })).toMatchObject({
      status: 200,
      body: { selector: { answering: s2, version: '2' } },
    });
    const answered = await udp(d.dns, encodeQuery('media.ns.internal', QTYPE.AAAA));
    expect([answered.rcode, addr(answered), answered.answers[0]?.ttl]).toEqual([
      RCODE.NOERROR,
      ['fd00:0:0:0:0:0:0:22'],
      0,
    ]); // no permit here: TTL 0
    const viaTcp = await tcp(d.dns, encodeQuery('media', QTYPE.AAAA));
    expect(addr(viaTcp)).toEqual(['fd00:0:0:0:0:0:0:22']);

    // the selected source goes away: the entry stops at the next query, and the other candidate is NOT chosen
    expect(await owner(d.http, { op: 'source-gone', ref: REF_2 })).toMatchObject({
      status: 200,
      body: {
        selectors: [{ name: 'media', answering: null, selection: { state: 'invalid', reason: 'source-withdrawn' } }],
      },
    });
    expect(await udp(d.dns, encodeQuery('media', QTYPE.AAAA))).toMatchObject({
      rcode: RCODE.REFUSED,
      aa: true,
      answers: [],
    });
    expect(await owner(d.http, { op: 'add-source', name: 'media', ref: REF_2, address: 'fd00::22' })).toMatchObject({
      status: 200,
      body: { selector: { answering: null } },
    });
    expect((await tcp(d.dns, encodeQuery('media', QTYPE.AAAA))).rcode).toBe(RCODE.REFUSED);
    const listed = (await (await fetch(`http://127.0.0.1:${d.http}/v1/owner/names`)).json()) as {
      entries: { name: string; kind: string }[];
      selectors: { name: string; selection: { state: string } }[];
    };
    expect(listed.entries).toContainEqual(expect.objectContaining({ name: 'media', kind: 'selector' }));
    expect(listed.selectors).toEqual([
      expect.objectContaining({ name: 'media', selection: expect.objectContaining({ state: 'invalid' }) }),
    ]);
    const metrics = await (await fetch(`http://127.0.0.1:${d.http}/metrics`)).text();
    expect(metrics).toMatch(/ns_dns_queries_total\{transport="udp",outcome="stopped"\} 2/);

    d.child.kill('SIGTERM');
    expect(await new Promise((r) => d.child.on('exit', (code) => r(code)))).toBe(0);
    const again = await startDaemon(); // the invalidation is persisted: still stopped after a restart
    expect((await udp(again.dns, encodeQuery('media', QTYPE.AAAA))).rcode).toBe(RCODE.REFUSED);
    expect(await owner(again.http, { op: 'select', name: 'media', ref: REF_1 })).toMatchObject({
      status: 200,
      body: { selector: { answering: s1 } },
    });
    expect(addr(await udp(again.dns, encodeQuery('media', QTYPE.AAAA)))).toEqual(['fd00:0:0:0:0:0:0:11']);
    again.child.kill('SIGTERM');
    await new Promise((r) => again.child.on('exit', r));
  });

  it('M6-57 ns-daemon DNS configuration: off unless a port is set; loopback hosts only; the zone is a DNS name', () => {
    const base = { NS_NSD_KEY: 'c'.repeat(64), NS_NETWORK: 'd'.repeat(32) };
    expect(loadConfig(base, [])).toMatchObject({ dnsPort: null, dnsHost: '127.0.0.1', dnsZone: 'ns.internal' });
    expect(loadConfig({ ...base, NS_DNS_PORT: '5353' }, ['--dns-host=::1', '--dns-zone=home.arpa'])).toMatchObject({
      dnsPort: 5353,
      dnsHost: '::1',
      dnsZone: 'home.arpa',
    });
    expect(() => loadConfig({ ...base, NS_DNS_HOST: '0.0.0.0' }, [])).toThrow(/loopback only/);
    expect(() => loadConfig({ ...base, NS_DNS_HOST: '192.168.1.2' }, [])).toThrow(/loopback only/);
    expect(() => loadConfig({ ...base, NS_DNS_PORT: '70000' }, [])).toThrow(/0\.\.65535/);
    expect(() => loadConfig({ ...base, NS_DNS_ZONE: 'Bad_Zone.' }, [])).toThrow(/dns-zone/);
  });
});

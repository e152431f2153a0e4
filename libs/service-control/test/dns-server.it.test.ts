// The local-name DNS listener on real sockets (UDP and TCP on an ephemeral loopback port), answering from LocalNames
// over A's SQLite name table in a temp file. Permits are a fake map (ref → deadline) and the resolver's clock a
// variable the test sets — so TTL and cache bounds are checked exactly, without any timing assertion.
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DecodedReply, decodeReply, encodeQuery, ipv6Groups } from '../src/adapter/dns/client.js';
import { QTYPE, RCODE } from '../src/adapter/dns/message.js';
import type { DnsResponse } from '../src/adapter/dns/respond.js';
import { type DnsServer, startDnsServer } from '../src/adapter/dns/server.js';
import { openSqliteNameStore } from '../src/adapter/sqlite/index.js';
import { LocalNames } from '../src/names/index.js';
import { right, seededRng } from './names-helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'ns-dns-'));
const store = openSqliteNameStore(join(dir, 'state.db'));
const fakePermits = new Map<string, number>();
let now = 1_000;
const names = new LocalNames(store, {
  zone: 'ns.internal',
  rng: seededRng(11),
  permitRemainingMs: (ref, t) => Math.max(0, (fakePermits.get(ref) ?? 0) - t),
});
const handled: { transport: string; outcome: string }[] = [];
let server: DnsServer;

beforeAll(async () => {
  server = await startDnsServer({
    host: '127.0.0.1',
    port: 0,
    resolve: (q) => names.resolve(q, now),
    onQuery: (transport, r: DnsResponse) => void handled.push({ transport, outcome: r.outcome }),
  });
});
afterAll(async () => {
  await server.close();
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One UDP exchange; null when nothing came back within `waitMs` (only used where the server must stay silent). */
const udp = (packet: Uint8Array, waitMs = 2_000): Promise<Uint8Array | null> =>
  new Promise((resolve) => {
    const s = createSocket('udp4');
    const timer = setTimeout(() => {
      s.close();
      resolve(null);
    }, waitMs);
    s.on('message', (m) => {
      clearTimeout(timer);
      s.close();
      resolve(new Uint8Array(m));
    });
    s.send(packet, server.port, '127.0.0.1');
  });

const ask = async (name: string, type: number = QTYPE.AAAA): Promise<DecodedReply> =>
  decodeReply((await udp(encodeQuery(name, type))) as Uint8Array) as DecodedReply;

/** Send framed messages over one TCP connection; resolves with the framed replies received until the server closes or `count` arrive. */
const tcp = (chunks: Uint8Array[], count: number): Promise<{ replies: Uint8Array[]; closedByServer: boolean }> =>
  new Promise((resolve, reject) => {
    const sock = connect(server.port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const replies: Uint8Array[] = [];
    sock.on('error', reject);
    sock.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        replies.push(new Uint8Array(buf.subarray(2, 2 + buf.readUInt16BE(0))));
        buf = buf.subarray(2 + buf.readUInt16BE(0));
      }
      if (replies.length === count) {
        sock.end();
        resolve({ replies, closedByServer: false });
      }
    });
    sock.on('close', () => resolve({ replies, closedByServer: true }));
    for (const c of chunks) sock.write(c);
  });
const framed = (m: Uint8Array) => Buffer.concat([Buffer.from([m.length >> 8, m.length & 0xff]), m]);

describe('the local-name DNS listener on loopback sockets', () => {
  it('M6-57 DNS over UDP: positive answer TTL ≤ min(60 s, permit remaining), re-read on every cache hit', async () => {
    right(names.nickname('nas', { ref: 'svc-nas', address: 'fd00::a:1' }));
    fakePermits.set('svc-nas', now + 600_000);
    const first = await ask('nas.ns.internal');
    expect(first).toMatchObject({ rcode: RCODE.NOERROR, aa: true, ra: false });
    expect(first.answers.map((a) => [a.type, a.ttl, ipv6Groups(a.rdata)])).toEqual([
      [QTYPE.AAAA, 60, 'fd00:0:0:0:0:0:a:1'],
    ]);
    fakePermits.set('svc-nas', now + 12_345); // less permit left than cache: the permit bounds the TTL
    expect((await ask('nas')).answers[0]?.ttl).toBe(12);
    now += 12_345; // the permit ends; the cached answer never outlives it
    expect((await ask('nas')).answers[0]?.ttl).toBe(0);
  });

  it('M6-57 DNS over UDP: NXDOMAIN carries no SOA and no TTL downstream; the local negative cache holds at most 5 s', async () => {
    const t0 = now;
    const nx = await ask('printer');
    expect(nx).toMatchObject({ rcode: RCODE.NXDOMAIN, aa: true, answers: [], authority: 0 });
    right(store.nickname('printer', { ref: 'svc-p', address: 'fd00::b:1' })); // straight into the table: no cache drop
    now = t0 + 4_999;
    expect((await ask('printer')).rcode).toBe(RCODE.NXDOMAIN);
    now = t0 + 5_000;
    expect((await ask('printer')).rcode).toBe(RCODE.NOERROR);
  });

  it('M6-57 DNS over UDP: a rebind is visible at the very next query (both caches cleared)', async () => {
    fakePermits.set('svc-1', now + 600_000);
    fakePermits.set('svc-2', now + 600_000);
    right(names.nickname('media', { ref: 'svc-1', address: 'fd00::1' }));
    expect(ipv6Groups((await ask('media')).answers[0]?.rdata as Uint8Array)).toBe('fd00:0:0:0:0:0:0:1'); // cached 60 s
    expect((await ask('ghost')).rcode).toBe(RCODE.NXDOMAIN); // cached 5 s
    right(names.rebind('media', { ref: 'svc-2', address: 'fd00::2' }));
    expect(ipv6Groups((await ask('media')).answers[0]?.rdata as Uint8Array)).toBe('fd00:0:0:0:0:0:0:2');
  });

  it('M6-57 DNS over UDP: public and other-zone names are REFUSED (not recursive, never forwarded)', async () => {
    for (const name of ['example.com', 'nas.example.com', 'nas.internal', '']) {
      const r = await ask(name);
      expect({ name, rcode: r.rcode, answers: r.answers.length, ra: r.ra }).toEqual({
        name,
        rcode: RCODE.REFUSED,
        answers: 0,
        ra: false,
      });
    }
  });

  it('M6-57 DNS malformed UDP packets get FORMERR or silence and never stop the listener', async () => {
    expect(await udp(Uint8Array.from([1, 2, 3]), 300)).toBeNull(); // shorter than a header: dropped
    const qd0 = decodeReply((await udp(Uint8Array.from([0, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]))) as Uint8Array);
    expect(qd0).toMatchObject({ id: 9, rcode: RCODE.FORMERR });
    const loop = Uint8Array.from([0, 10, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 28, 0, 1]);
    expect(decodeReply((await udp(loop)) as Uint8Array)).toMatchObject({ id: 10, rcode: RCODE.FORMERR });
    expect((await ask('nas')).rcode).toBe(RCODE.NOERROR); // still serving
    expect(handled.filter((h) => h.transport === 'udp').map((h) => h.outcome)).toEqual(
      expect.arrayContaining(['dropped', 'formerr', 'answer', 'nxdomain', 'refused']),
    );
  });

  it('M6-57 DNS over TCP: length-framed queries on one connection (split across writes), FORMERR for a malformed one, closed on an undecodable one', async () => {
    const a = framed(encodeQuery('nas', QTYPE.AAAA, { id: 1 }));
    const b = framed(encodeQuery('example.com', QTYPE.AAAA, { id: 2 }));
    const c = framed(Uint8Array.from([0, 3, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0])); // QDCOUNT 2
    const all = Buffer.concat([a, b, c]);
    const { replies } = await tcp([all.subarray(0, 5), all.subarray(5, 30), all.subarray(30)], 3);
    expect(replies.map((r) => [decodeReply(r)?.id, decodeReply(r)?.rcode])).toEqual([
      [1, RCODE.NOERROR],
      [2, RCODE.REFUSED],
      [3, RCODE.FORMERR],
    ]);
    const dropped = await tcp([framed(Uint8Array.from([1, 2, 3]))], 1);
    expect(dropped).toEqual({ replies: [], closedByServer: true });
  });

  it('M6-57 DNS over UDP: a selected multi-source name answers its selection with TTL ≤ min(60 s, permit remaining) and is REFUSED (AA) once the selection is invalid; no other source is answered', async () => {
    const a = { ref: 'nsd-a/net/films', address: 'fd00::a1' };
    const b = { ref: 'nsd-b/net/films', address: 'fd00::b1' };
    fakePermits.set(a.ref, now + 42_700);
    fakePermits.set(b.ref, now + 500_000);
    right(names.createSelector('films', [a, b]));
    expect(await ask('films')).toMatchObject({ rcode: RCODE.REFUSED, aa: true, answers: [] });
    right(names.select('films', a.ref));
    const r = await ask('films.ns.internal');
    expect([r.rcode, r.aa, r.answers.map((x) => ipv6Groups(x.rdata)), r.answers[0]?.ttl]).toEqual([
      RCODE.NOERROR,
      true,
      ['fd00:0:0:0:0:0:0:a1'],
      42,
    ]);
    right(names.withdrawSource('films', a.ref));
    expect(await ask('films')).toMatchObject({ rcode: RCODE.REFUSED, aa: true, answers: [] });
    expect(handled.filter((h) => h.outcome === 'stopped').length).toBe(2);
  });

  it('the listener binds loopback only', async () => {
    await expect(
      startDnsServer({ host: '0.0.0.0', port: 0, resolve: () => ({ kind: 'refused', name: '' }) }),
    ).rejects.toThrow(/127\.0\.0\.1 or ::1/);
    const v6 = await startDnsServer({ host: '::1', port: 0, resolve: (q) => ({ kind: 'refused', name: q.name }) });
    const reply = await new Promise<Uint8Array>((resolve) => {
      const s = createSocket('udp6');
      s.on('message', (m) => {
        s.close();
        resolve(new Uint8Array(m));
      });
      s.send(encodeQuery('x.example', QTYPE.AAAA), v6.port, '::1');
    });
    await v6.close();
    expect(decodeReply(reply)?.rcode).toBe(RCODE.REFUSED);
  });
});

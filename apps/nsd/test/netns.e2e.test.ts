// M6-62 across network namespaces (issue 20 item 3): three test-bed nodes as namespaces on a link-local bridge
// (`netnsUp`, addresses of our own in 169.254.0.0/16, no default route). nsd stays in the root namespace (reached over
// the bridge; PostgreSQL on the root's loopback); the publisher's ns-daemon and its TCP+UDP echo backend run in node 1,
// the consumer's ns-daemon in node 2 serving the service on a VIP that exists only in node 2, and
// node 3 is a machine NSD never authorised. Real E2E: nonces over TCP and UDP go client (node 2) → VIP:P → consumer
// daemon → N6:P (TLS 1.3, Ed25519 node keys; UDP as AEAD frames keyed from it, decision 0269) → publisher daemon →
// backend and back; a plain datagram from node 2 itself (not through its daemon) is refused; node 3's own key is refused before
// any flow; revocation cuts the live connection (the client's next read fails, the backend connection is closed);
// expiry without refresh (nsd stopped) cuts the next live connection; nsd back → traffic again; the consumer daemon
// frozen past its deadline refuses the first I/O after it resumes.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { n6Credentials } from '@homelab/service-control/dataplane';
import { netnsDown, netnsLayout, netnsUp } from '@homelab/testbed';
import { useDatabase } from '@homelab/testbed/vitest';
import { afterAll, describe, expect, it } from 'vitest';
import { ownerAdmin, processWorkspace, publisherAndConsumer, start, until } from './processes.js';
import { metricsOf as metricsAt, metricValue } from './traffic.js';

const db = useDatabase('nsd_netns');
const ws = processWorkspace('nsd-netns');
const { net: NET, token: TOKEN, pub, con, members } = publisherAndConsumer(ws);
const prefix = `m${process.pid % 100000}`;
const layout = netnsLayout(prefix, 3, `169.254.${120 + (process.pid % 100)}`);
const [N1, N2, N3] = layout.nodes as [(typeof layout.nodes)[0], (typeof layout.nodes)[0], (typeof layout.nodes)[0]];
const VIP = '169.254.251.1'; // only in node 2
const BACKEND_PORT = 7777;

const helpers: ChildProcess[] = [];
afterAll(() => {
  for (const h of helpers) if (h.exitCode === null && h.signalCode === null) h.kill('SIGKILL');
  netnsDown(prefix);
});

/** A node process in a namespace (`ip netns exec` execs it: the pid is node's); its stdout as lines. */
const inNode = (ns: string, code: string, env: Record<string, string> = {}) => {
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  helpers.push(child);
  child.stdin.on('error', () => undefined); // a write after the helper exited (its connection refused) is EPIPE
  const lines: string[] = [];
  let buf = '';
  const waiters = new Set<() => void>();
  child.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
    for (const w of waiters) w();
  });
  const closed = new Promise<void>((r) => child.on('close', () => (r(), [...waiters].forEach((w) => w()))));
  const line = (pred: (l: string) => boolean, ms = 20_000) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const hit = lines.find(pred);
        if (hit !== undefined) return (waiters.delete(check), clearTimeout(t), resolve(hit));
        if (child.exitCode !== null || child.signalCode !== null)
          return (waiters.delete(check), clearTimeout(t), reject(new Error(`exited; lines ${lines.join('|')}`)));
      };
      const t = setTimeout(() => (waiters.delete(check), reject(new Error(`no line; ${lines.join('|')}`))), ms);
      waiters.add(check);
      check();
    });
  return { child, lines, line, closed };
};

/**
 * The backend in node 1: TCP and UDP echo on its loopback; it reports each TCP connection opened and closed and each
 * datagram it received.
 */
const echoCode = `
const net = require('node:net'), dgram = require('node:dgram');
net.createServer((s) => { console.log('tcp-open'); s.on('error', () => {}); s.on('close', () => console.log('tcp-closed')); s.pipe(s); })
  .listen(${BACKEND_PORT}, '127.0.0.1', () => {
    const u = dgram.createSocket('udp4');
    u.on('message', (m, r) => { console.log('udp:' + m.toString()); u.send(m, r.port, r.address); });
    u.bind(${BACKEND_PORT}, '127.0.0.1', () => console.log('ready'));
  });`;

/** A TCP client in node 2: connects to VIP:P, writes each stdin line, prints data:/error:/closed. */
const tcpClientCode = (port: number) => `
const s = require('node:net').connect(${port}, '${VIP}', () => console.log('connected'));
s.on('data', (d) => console.log('data:' + d.toString()));
s.on('error', (e) => console.log('error:' + (e.code || e.message)));
s.on('close', () => { console.log('closed'); process.exit(0); });
process.stdin.on('data', (d) => s.write(d.toString().trim()));`;

/** One attempt in node 2: a TCP nonce's echo ('echoed') or how it ended. */
const tcpAttempt = async (port: number): Promise<string> => {
  const c = inNode(N2.name, tcpClientCode(port));
  try {
    await c.line((l) => l === 'connected' || l.startsWith('error:'), 10_000);
    const nonce = randomBytes(8).toString('hex');
    c.child.stdin.write(`${nonce}\n`);
    const got = await c.line((l) => l.startsWith('data:') || l === 'closed', 10_000);
    return got === `data:${nonce}` ? 'echoed' : (c.lines.find((l) => l.startsWith('error:')) ?? got);
  } catch (e) {
    return c.lines.find((l) => l.startsWith('error:')) ?? String(e);
  } finally {
    c.child.kill();
  }
};

/** A UDP nonce from node 2 to VIP:P: its echo, or 'timeout'. */
const udpAttempt = async (port: number): Promise<string> => {
  const nonce = randomBytes(8).toString('hex');
  const c = inNode(
    N2.name,
    `const u = require('node:dgram').createSocket('udp4');
     u.on('message', (m) => { console.log('reply:' + m.toString()); process.exit(0); });
     u.send('${nonce}', ${port}, '${VIP}');
     setTimeout(() => { console.log('timeout'); process.exit(0); }, 3000);`,
  );
  const got = await c.line((l) => l.startsWith('reply:') || l === 'timeout', 10_000);
  return got === `reply:${nonce}` ? 'echoed' : got;
};

/**
 * A plain UDP datagram sent from node 2 itself — the consumer's own address — straight to the publisher's N6:P, not
 * through the consumer daemon (which alone holds its N6 keys): its reply, or 'timeout'.
 */
const forgedUdpAttempt = async (port: number, text: string): Promise<string> => {
  const c = inNode(
    N2.name,
    `const u = require('node:dgram').createSocket('udp4');
     u.on('message', (m) => { console.log('reply:' + m.toString()); process.exit(0); });
     u.send('${text}', ${port}, '${N1.address}');
     setTimeout(() => { console.log('timeout'); process.exit(0); }, 1000);`,
  );
  return c.line((l) => l.startsWith('reply:') || l === 'timeout', 10_000);
};

/** Node 3: a machine with its own Ed25519 key NSD never authorised, dialling the publisher's N6:P with TLS. */
const intruderAttempt = async (port: number) => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const hex = Buffer.from(privateKey.export({ format: 'jwk' }).x as string, 'base64url').toString('hex');
  const creds = n6Credentials(privateKey, hex);
  const c = inNode(
    N3.name,
    `const s = require('node:tls').connect({ host: '${N1.address}', port: ${port}, key: process.env.K, cert: process.env.C, rejectUnauthorized: false });
     let got = '';
     s.on('secureConnect', () => { console.log('protocol:' + s.getProtocol()); s.write('intruder-nonce'); });
     s.on('data', (d) => (got += d.toString()));
     s.on('error', () => {});
     s.on('close', () => { console.log('echoed:' + got); process.exit(0); });`,
    { K: creds.key, C: creds.cert },
  );
  await c.line((l) => l.startsWith('echoed:'));
  return c.lines;
};

const metricsOf = (host: string, port: number) => metricsAt(port, host);
const value = metricValue;
/** Every `ns_dataplane_n6_sessions_total` series with a count > 0, as `leg|version|suite` → count. */
const n6Sessions = (metrics: string): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const m of metrics.matchAll(
    /^ns_dataplane_n6_sessions_total\{leg="([^"]*)",version="([^"]*)",suite="([^"]*)"\} (\d+)$/gm,
  ))
    if (Number(m[4]) > 0) out[`${m[1]}|${m[2]}|${m[3]}`] = Number(m[4]);
  return out;
};
const healthz = async (host: string, port: number) =>
  (await (await fetch(`http://${host}:${port}/healthz`)).json()) as {
    epoch: string | null;
    leases: { service: string; role: string; active: boolean; epoch: string }[];
  };
const active = (h: Awaited<ReturnType<typeof healthz>>, role: string, service: string) =>
  h.leases.some((l) => l.role === role && l.service === service && l.active);

describe('M6-62 across network namespaces (real E2E)', () => {
  it('M6-62 L01 TCP and UDP nonces from node 2 through VIP:P and N6:P to the backend in node 1; node 3 (not authorised) opens no flow; revocation cuts the live connection and closes the backend connection; expiry without refresh cuts; nsd back → traffic again; L05 a consumer frozen past its deadline refuses the first I/O after resume; nsd restart → new epoch: the connection open across it is cut (epoch-changed), both daemons re-bound, TCP and UDP again under new-epoch leases', async () => {
    netnsUp(layout);
    // the VIP: a /32 local to node 2 only (this kernel has no `dummy` driver; a /32 on the namespace's loopback is
    // the same: an address that exists in node 2 and nowhere else)
    execFileSync('ip', ['-n', N2.name, 'addr', 'add', `${VIP}/32`, 'dev', 'lo']);

    const backend = inNode(N1.name, echoCode);
    await backend.line((l) => l === 'ready');
    writeFileSync(
      join(ws.dir, 'publisher.json'),
      JSON.stringify([
        { key: 'echo', protocols: ['tcp', 'udp'], backend_host: '127.0.0.1', backend_port: BACKEND_PORT },
      ]),
    );

    // nsd in the root namespace, listening on the bridge
    const nsdEnv = {
      NSD_HOST: layout.bridgeAddress,
      NSD_DB_HOST: db.host,
      NSD_DB_PORT: String(db.port),
      NSD_DB_USER: db.user,
      NSD_DB_NAME: db.database,
      NSD_KEY_FILE: join(ws.dir, 'nsd.pem'),
      NSD_MEMBERS: members.join(','),
      NSD_ADMIN_TOKEN: TOKEN,
    };
    const nsdProc = start('nsd', { ...nsdEnv, NSD_PORT: '0' });
    ws.procs.push(nsdProc);
    const l = await nsdProc.waitFor((x) => x['event'] === 'listening');
    const nsdUrl = `http://${layout.bridgeAddress}:${l['port'] as number}`;
    const admin = ownerAdmin(nsdUrl, TOKEN);

    const daemon = async (
      name: 'publisher' | 'consumer',
      who: { keyFile: string },
      node: { name: string; address: string },
      env: Record<string, string>,
    ) => {
      const p = start(
        'ns-daemon',
        {
          NS_NSD_URL: nsdUrl,
          NS_NSD_KEY: l['nsd_public_key'] as string,
          NS_NETWORK: NET,
          NS_KEY_FILE: who.keyFile,
          NS_STATE_FILE: join(ws.dir, `${name}.db`),
          NS_DECLARATIONS: join(ws.dir, `${name}.json`),
          NS_HOST: node.address,
          NS_PORT: '0',
          NS_DATA_PLANE: 'sockets',
          NS_DATA_PLANE_HOST: node.address,
          ...env,
        },
        node.name,
      );
      ws.procs.push(p);
      return { p, port: (await p.waitFor((x) => x['event'] === 'listening'))['port'] as number };
    };
    const a = await daemon('publisher', pub, N1, { NS_DATA_PLANE_PEERS: `${con.hex}=${N2.address}` });
    const b = await daemon('consumer', con, N2, {
      NS_DATA_PLANE_PEERS: `${pub.hex}=${N1.address}`,
      NS_DATA_PLANE_CONSUMER_HOST: VIP,
    });

    const services = await until(
      () => admin('GET', `/v1/admin/services?network=${NET}`),
      (r) => (r.body['services'] as { P: number | null }[] | undefined)?.[0]?.P != null,
    );
    const { service_id: id, P } = (services.body['services'] as { service_id: string; P: number }[])[0] as {
      service_id: string;
      P: number;
    };
    await until(
      () => healthz(N1.address, a.port),
      (h) => active(h, 'publisher', id),
    );

    await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp', 'udp'] });
    await until(
      () => healthz(N2.address, b.port),
      (h) => active(h, 'consumer', id),
    );
    // the publisher admits the consumer once it applied the snapshot with the new source Grant
    await until(
      () => tcpAttempt(P),
      (r) => r === 'echoed',
    );
    await until(
      () => udpAttempt(P),
      (r) => r === 'echoed',
    );
    expect(
      value(await metricsOf(N1.address, a.port), 'ns_dataplane_connections_total{protocol="udp"}'),
    ).toBeGreaterThanOrEqual(1);
    expect(backend.lines.some((x) => x.startsWith('udp:'))).toBe(true);

    // UDP over N6 is authenticated (decision 0269): a datagram from the consumer node's own address that is not a
    // frame under its daemon's N6 keys is refused before any flow; the backend never receives it
    const forged = `forged-${randomBytes(4).toString('hex')}`;
    expect(await forgedUdpAttempt(P, forged)).toBe('timeout');
    await until(
      async () => value(await metricsOf(N1.address, a.port), 'ns_dataplane_refused_total{reason="n6-udp-malformed"}'),
      (n) => n === 1,
    );
    expect(backend.lines).not.toContain(`udp:${forged}`);

    // what N6 really negotiated (decision 0410): TLS 1.3 with AES-128-GCM on the TCP flow and the UDP association,
    // at both daemons, and no other suite or version
    for (const [host, port] of [
      [N1.address, a.port],
      [N2.address, b.port],
    ] as const) {
      const sessions = n6Sessions(await metricsOf(host, port));
      expect(Object.keys(sessions).sort(), `N6 sessions at ${host}`).toEqual([
        'tcp|TLSv1.3|TLS_AES_128_GCM_SHA256',
        'udp|TLSv1.3|TLS_AES_128_GCM_SHA256',
      ]);
    }

    // node 3: TLS 1.3 completes with its own key, then it is closed before any flow (no source Grant for its key)
    const refusedBefore = value(
      await metricsOf(N1.address, a.port),
      'ns_dataplane_refused_total{reason="no-source-grant"}',
    );
    const openedBefore = backend.lines.filter((x) => x === 'tcp-open').length;
    expect(await intruderAttempt(P)).toEqual(['protocol:TLSv1.3', 'echoed:']);
    expect(value(await metricsOf(N1.address, a.port), 'ns_dataplane_refused_total{reason="no-source-grant"}')).toBe(
      refusedBefore + 1,
    );
    expect(backend.lines.filter((x) => x === 'tcp-open').length).toBe(openedBefore);

    // a long-lived connection from node 2: nonces echo; the owner revokes the consumer mid-stream
    const live = inNode(N2.name, tcpClientCode(P));
    await live.line((x) => x === 'connected');
    for (let i = 0; i < 3; i++) {
      const nonce = randomBytes(8).toString('hex');
      live.child.stdin.write(`${nonce}\n`);
      await live.line((x) => x === `data:${nonce}`);
    }
    const closedBefore = backend.lines.filter((x) => x === 'tcp-closed').length;
    await admin('DELETE', '/v1/admin/policy', { service_id: id, consumer: con.hex });
    await live.line((x) => x === 'closed', 30_000);
    expect(live.lines).toContain('error:ECONNRESET');
    await until(
      async () => backend.lines.filter((x) => x === 'tcp-closed').length,
      (n) => n > closedBefore,
    );
    await until(
      () => tcpAttempt(P),
      (r) => r !== 'echoed' && r.startsWith('error:'),
    );

    // allowed again; then expiry without refresh: nsd stops answering (SIGSTOP), the permits run out (≤ 30 s) and the
    // live connection is cut with no revocation at all; when nsd answers again, traffic flows again
    await admin('PUT', '/v1/admin/policy', { service_id: id, consumer: con.hex, protocols: ['tcp', 'udp'] });
    await until(
      () => tcpAttempt(P),
      (r) => r === 'echoed',
      90_000,
    );
    const before = inNode(N2.name, tcpClientCode(P));
    await before.line((x) => x === 'connected');
    before.child.stdin.write('before-expiry\n');
    await before.line((x) => x === 'data:before-expiry');
    nsdProc.child.kill('SIGSTOP');
    try {
      await before.line((x) => x === 'closed', 60_000);
      // cut by whichever permit ran out first; either way the client sees an abort, never a clean end (decision 0264:
      // the publisher resets the N6 leg, the consumer then resets its client)
      expect(before.lines).toContain('error:ECONNRESET');
      const expiredCuts = async () =>
        value(await metricsOf(N1.address, a.port), 'ns_dataplane_flows_cut_total{reason="expired"}') +
        value(await metricsOf(N2.address, b.port), 'ns_dataplane_flows_cut_total{reason="expired"}');
      expect(await expiredCuts()).toBeGreaterThanOrEqual(1);
    } finally {
      nsdProc.child.kill('SIGCONT');
    }
    await until(
      () => tcpAttempt(P),
      (r) => r === 'echoed',
      90_000,
    );

    // §10 / L05 suspend (real E2E): the consumer daemon is frozen (SIGSTOP, the process-level stand-in for
    // cgroup.freeze) past its permit's deadline while a client connection is open and a nonce waits in its socket;
    // after SIGCONT the first forwarding action is refused (the nonce never comes back, the client is reset), and only
    // a new lease carries traffic again
    const frozen = inNode(N2.name, tcpClientCode(P));
    await frozen.line((x) => x === 'connected');
    frozen.child.stdin.write('before-freeze\n');
    await frozen.line((x) => x === 'data:before-freeze');
    const expiredBefore = value(await metricsOf(N2.address, b.port), 'ns_dataplane_flows_cut_total{reason="expired"}');
    b.p.child.kill('SIGSTOP');
    try {
      await new Promise((r) => setTimeout(r, 32_000)); // > 30 s: no permit outlives its receipt's remaining_ms
      frozen.child.stdin.write('after-deadline\n');
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      b.p.child.kill('SIGCONT');
    }
    await frozen.line((x) => x === 'closed', 30_000);
    expect(frozen.lines).not.toContain('data:after-deadline');
    expect(frozen.lines).toContain('error:ECONNRESET');
    expect(
      value(await metricsOf(N2.address, b.port), 'ns_dataplane_flows_cut_total{reason="expired"}'),
    ).toBeGreaterThan(expiredBefore);
    await until(
      () => tcpAttempt(P),
      (r) => r === 'echoed',
      90_000,
    );

    // nsd restart across namespaces (M6-62 "nsd restart → new epoch, re-ready"): nsd stops cleanly and a new process
    // takes over on the same database, address and key; both daemons in their namespaces re-bind to the new epoch,
    // and traffic flows again (TCP and UDP) under leases of the new epoch only
    const epochOf = async () => BigInt(((await (await fetch(`${nsdUrl}/healthz`)).json()) as { epoch: string }).epoch);
    const epoch1 = await epochOf();
    // a connection open across the restart: its permits belong to the old epoch, so it is cut when the daemons
    // observe the new one (old-epoch permits are closed first, M6-36), never carried over
    const epochCuts = async () =>
      value(await metricsOf(N1.address, a.port), 'ns_dataplane_flows_cut_total{reason="epoch-changed"}') +
      value(await metricsOf(N2.address, b.port), 'ns_dataplane_flows_cut_total{reason="epoch-changed"}');
    const epochCutsBefore = await epochCuts();
    const across = inNode(N2.name, tcpClientCode(P));
    await across.line((x) => x === 'connected');
    across.child.stdin.write('before-restart\n');
    await across.line((x) => x === 'data:before-restart');
    nsdProc.child.kill('SIGTERM');
    expect((await nsdProc.exited).code).toBe(0);
    const nsd2 = start('nsd', { ...nsdEnv, NSD_PORT: String(l['port']) });
    ws.procs.push(nsd2);
    await nsd2.waitFor((x) => x['event'] === 'listening');
    const epoch2 = await epochOf();
    expect(epoch2).toBe(epoch1 + 1n);
    const inNewEpoch = (h: Awaited<ReturnType<typeof healthz>>, role: string) =>
      h.epoch === String(epoch2) &&
      h.leases.some((x) => x.role === role && x.service === id && x.active && x.epoch === String(epoch2));
    await until(
      () => healthz(N1.address, a.port),
      (h) => inNewEpoch(h, 'publisher'),
      90_000,
    );
    await until(
      () => healthz(N2.address, b.port),
      (h) => inNewEpoch(h, 'consumer'),
      90_000,
    );
    await across.line((x) => x === 'closed', 30_000);
    expect(across.lines).toContain('error:ECONNRESET');
    expect(await epochCuts()).toBeGreaterThan(epochCutsBefore);
    await until(
      () => tcpAttempt(P),
      (r) => r === 'echoed',
      90_000,
    );
    await until(
      () => udpAttempt(P),
      (r) => r === 'echoed',
      90_000,
    );

    for (const p of [a.p, b.p, nsd2]) {
      p.child.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
    }
  });
});

// The DNS listener's sockets (thin: every byte decision is `respond.ts`): UDP, and TCP on the same port with the
// RFC 1035 §4.2.2 two-octet length framing. Loopback only — 127.0.0.1 or ::1 — because the local names are this
// node's and the listener answers no one else (decision 0175). A malformed packet costs one FORMERR or nothing; a
// TCP connection that sends something we drop, or idles, is closed.
import { type RemoteInfo, createSocket } from 'node:dgram';
import { type AddressInfo, type Server, type Socket, createServer } from 'node:net';
import { Effect, type Scope } from 'effect';
import type { NameAnswer, NameQuery } from '../../names/resolver.js';
import { type DnsResponse, respond } from './respond.js';

export const DNS_LOOPBACK_HOSTS = ['127.0.0.1', '::1'] as const;

export interface DnsServerOptions {
  /** 127.0.0.1 or ::1 (anything else is refused) */
  readonly host: string;
  /** 0 = an ephemeral port (UDP picks it, TCP takes the same number) */
  readonly port: number;
  /** also serve TCP on the same port (default true) */
  readonly tcp?: boolean;
  readonly resolve: (query: NameQuery) => NameAnswer;
  /** called once per packet handled (metrics, logs) */
  readonly onQuery?: (transport: 'udp' | 'tcp', response: DnsResponse) => void;
  /** socket errors after listening (the server keeps going) */
  readonly onError?: (error: Error) => void;
  /** a TCP connection without a complete message for this long is closed (default 10 s) */
  readonly tcpIdleMs?: number;
}

export interface DnsServer {
  readonly host: string;
  readonly port: number;
  readonly tcp: boolean;
  readonly close: () => Promise<void>;
}

const MAX_TCP_CONNECTIONS = 64;

const listenUdp = (host: string, port: number, o: DnsServerOptions) =>
  new Promise<ReturnType<typeof createSocket>>((resolve, reject) => {
    const socket = createSocket({ type: host.includes(':') ? 'udp6' : 'udp4', ipv6Only: host.includes(':') });
    const onMessage = (msg: Buffer, from: RemoteInfo) => {
      const r = respond(new Uint8Array(msg.buffer, msg.byteOffset, msg.byteLength), o.resolve);
      o.onQuery?.('udp', r);
      if (r.reply !== null) socket.send(r.reply, from.port, from.address);
    };
    socket.once('error', reject);
    socket.bind({ address: host, port, exclusive: true }, () => {
      socket.off('error', reject);
      socket.on('error', (e) => o.onError?.(e));
      socket.on('message', onMessage);
      resolve(socket);
    });
  });

const listenTcp = (host: string, port: number, o: DnsServerOptions) =>
  new Promise<{ server: Server; sockets: Set<Socket> }>((resolve, reject) => {
    const sockets = new Set<Socket>();
    const server = createServer((sock) => {
      sockets.add(sock);
      sock.on('close', () => sockets.delete(sock));
      sock.on('error', () => sock.destroy());
      sock.setTimeout(o.tcpIdleMs ?? 10_000, () => sock.destroy());
      let buf = Buffer.alloc(0);
      sock.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        while (buf.length >= 2) {
          const len = buf.readUInt16BE(0);
          if (buf.length < 2 + len) return;
          const msg = buf.subarray(2, 2 + len);
          buf = buf.subarray(2 + len);
          const r = respond(new Uint8Array(msg.buffer, msg.byteOffset, msg.byteLength), o.resolve);
          o.onQuery?.('tcp', r);
          if (r.reply === null) return void sock.destroy();
          const framed = Buffer.alloc(2 + r.reply.length);
          framed.writeUInt16BE(r.reply.length, 0);
          framed.set(r.reply, 2);
          sock.write(framed);
        }
      });
    });
    server.maxConnections = MAX_TCP_CONNECTIONS;
    server.once('error', reject);
    server.listen({ host, port, ipv6Only: host.includes(':'), exclusive: true }, () => {
      server.off('error', reject);
      server.on('error', (e) => o.onError?.(e));
      resolve({ server, sockets });
    });
  });

/** Start listening; resolves once both sockets are bound. */
export const startDnsServer = async (o: DnsServerOptions): Promise<DnsServer> => {
  if (!(DNS_LOOPBACK_HOSTS as readonly string[]).includes(o.host))
    throw new Error(`the DNS listener binds 127.0.0.1 or ::1 only, not ${o.host}`);
  const tcp = o.tcp ?? true;
  // an ephemeral UDP port may be taken for TCP by someone else: try a few ports before giving up
  for (let attempt = 0; ; attempt++) {
    const udp = await listenUdp(o.host, o.port, o);
    const port = (udp.address() as AddressInfo).port;
    const closeUdp = () => new Promise<void>((r) => udp.close(() => r()));
    if (!tcp) return { host: o.host, port, tcp, close: closeUdp };
    try {
      const t = await listenTcp(o.host, port, o);
      return {
        host: o.host,
        port,
        tcp,
        close: async () => {
          for (const s of t.sockets) s.destroy();
          await Promise.all([closeUdp(), new Promise<void>((r) => t.server.close(() => r()))]);
        },
      };
    } catch (e) {
      await closeUdp();
      if (o.port !== 0 || attempt >= 4) throw e;
    }
  }
};

/** The listener as a scoped resource: bound on acquire, both sockets closed when the scope closes. */
export const dnsServer = (o: DnsServerOptions): Effect.Effect<DnsServer, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => startDnsServer(o), catch: (e) => (e instanceof Error ? e : new Error(String(e))) }),
    (s) => Effect.promise(() => s.close()),
  );

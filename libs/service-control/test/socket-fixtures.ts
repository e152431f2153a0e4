// Real sockets for the data-plane component tests (loopback): a TCP+UDP echo backend that records what it received
// the connections it accepted and those that closed, a TCP client, and a poll-until helper.
import { type Socket as UdpSocket, createSocket } from 'node:dgram';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { randomBytes } from 'node:crypto';

export const HOST = '127.0.0.1';

export interface Backend {
  readonly tcp: Server;
  readonly udp: UdpSocket;
  readonly port: number;
  readonly udpPort: number;
  readonly received: string[];
  readonly conns: Socket[];
  readonly closed: Socket[];
}

export const backend = async (): Promise<Backend> => {
  const received: string[] = [];
  const conns: Socket[] = [];
  const closed: Socket[] = [];
  const tcp = createServer((s) => {
    conns.push(s);
    s.on('error', () => undefined);
    s.on('close', () => closed.push(s));
    s.on('data', (d) => (received.push(d.toString()), s.write(d)));
  });
  await new Promise<void>((ok) => tcp.listen(0, HOST, ok));
  const udp = createSocket('udp4');
  udp.on('message', (m, r) => (received.push(m.toString()), udp.send(m, r.port, r.address)));
  await new Promise<void>((ok) => udp.bind(0, HOST, ok));
  return {
    tcp,
    udp,
    port: (tcp.address() as { port: number }).port,
    udpPort: udp.address().port,
    received,
    conns,
    closed,
  };
};

export const eventually = async (cond: () => boolean, what: string): Promise<void> => {
  for (let i = 0; i < 500; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`never: ${what}`);
};

export const nonce = (): string => randomBytes(8).toString('hex');

export const tcpClient = async (port: number) => {
  const s = connect({ host: HOST, port });
  const got: string[] = [];
  let closed = false;
  let error: string | null = null;
  s.on('data', (d) => got.push(d.toString()));
  s.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
  s.on('close', () => (closed = true));
  await new Promise<void>((ok, fail) => (s.once('connect', ok), s.once('error', fail)));
  return {
    s,
    got,
    isClosed: () => closed,
    error: () => error,
    echo: async (text: string) => {
      s.write(text);
      await eventually(() => got.join('').includes(text), `echo of ${text}`);
    },
  };
};

// One end of the multi-process data-plane bench (dataplane-netns.bench.ts), run as its own process in its own network
// namespace: `plain` — the peer relay (node:net / node:dgram, no checks); `publisher` — a SocketForwarder N6 endpoint
// (TLS 1.3 with its Ed25519 node key, the consumer's proven key as the flow's peer, the permit's backend upstream);
// `consumer` — a SocketForwarder endpoint dialling the publisher over N6 and pinning its key. The permits are the real
// PermitEngine's, renewed by a timer in place of nsd (this bench measures the data plane, not the control plane).
// Configuration comes from the environment (END_*); the process prints `ready <port>` once bound and runs until killed.
import { SocketForwarder } from '../src/adapter/dataplane/index.js';
import { bootClock, consumerPermit, n6Node, plainRelay, publisherPermit } from './dataplane-parts.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined || v === '') throw new Error(`${name} is not set`);
  return v;
};

const role = env('END_ROLE');
const listen = env('END_LISTEN');
const toHost = env('END_TO_HOST');
const tcpTo = Number(env('END_TCP_TO'));
const udpTo = Number(env('END_UDP_TO'));
/**
 * The socket high-water mark: a forwarder's test-only option (Node's 16 KiB instead of decision 0411's 256 KiB, the
 * bench's "before 0411" pair), or the plain relay given the forwarder's 256 KiB (unset: Node's default).
 */
const hwm = process.env['END_HIGH_WATER_MARK'];
const highWaterMark = hwm === undefined || hwm === '' ? undefined : Number(hwm);
const options = highWaterMark === undefined ? {} : { highWaterMark };

const ready = (port: number): void => void process.stdout.write(`ready ${port}\n`);

if (role === 'plain') {
  ready((await plainRelay(tcpTo, udpTo, listen, toHost, highWaterMark)).port);
} else {
  const me = n6Node(undefined, env('END_KEY_PEM'));
  const peer = new Uint8Array(Buffer.from(env('END_PEER_ID'), 'hex'));
  // ns-daemon's clock (decision 0490), or `turn` for the bench's "before 0490" pair
  const clock = bootClock(process.env['END_CLOCK'] === 'turn' ? 'turn' : 'checked');
  if (role === 'publisher') {
    const { engine, refresh } = publisherPermit(clock, peer, { host: toHost, port: tcpTo });
    setInterval(() => refresh(), 10_000);
    const fw = new SocketForwarder(engine, options);
    const port = await fw.listen({
      endpoint: 'bench',
      host: listen,
      port: 0,
      protocols: ['tcp', 'udp'],
      peerOf: (_a, _p, _proto, authenticated) => authenticated,
      upstream: (f) => (f.protocol === 'tcp' ? f.backend : { host: toHost, port: udpTo }),
      n6Server: me.creds,
    });
    ready(port);
  } else if (role === 'consumer') {
    const { engine, refresh } = consumerPermit(clock, me.identity, peer);
    setInterval(() => refresh(), 10_000);
    const fw = new SocketForwarder(engine, options);
    const port = await fw.listen({
      endpoint: 'bench-vip',
      host: listen,
      port: 0,
      protocols: ['tcp', 'udp'],
      peerOf: () => peer,
      upstream: () => ({ host: toHost, port: tcpTo }),
      n6Client: { credentials: me.creds, expect: () => peer },
    });
    ready(port);
  } else throw new Error(`END_ROLE=${role}: expected plain, publisher or consumer`);
}

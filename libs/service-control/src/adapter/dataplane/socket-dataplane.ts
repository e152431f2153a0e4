// The ns-daemon's data plane on kernel sockets (issue 20, decision 0262): one SocketForwarder on the daemon's permit
// engine serves both sides of a service.
// - Publisher: the PortArbiter's SocketListenerInstaller binds the endpoint on this node's data-plane address
//   (`host`:P, the N6:P stand-in); a flow's upstream is the permit's backend.
// - Consumer: each consumed service is served on `consumerHost`:P (the VIP:P stand-in), and a flow's upstream is the
//   publisher's data-plane address:P, dialled FROM this node's own data-plane address.
// Peer identity over N6 (`n6` set, decision 0263/0264/0269): TCP between daemons is TLS 1.3 with each node's Ed25519
// certificate; a publisher endpoint's flow peer is the key the handshake proved (the permit's source Grants decide
// whether it may open a flow) and the consumer pins its permit's publisher key. UDP between daemons is AEAD frames
// keyed by such a TLS connection (ALPN `n6-udp`): its flow peer is that connection's proven key, never the datagram's
// source address. Only without `n6` (`--data-plane-n6=address`) is the peer address-based — [D] a connection from
// address X is the node whose configured address is X (decision 0262), which anyone able to use that address can
// impersonate.
import { isIPv4 } from 'node:net';
import { type Bytes, fromHex, toHex } from '../../domain/bytes.js';
import type { DaemonDataPlane } from '../../application/daemon-lease.js';
import { deriveN6 } from '../../api/standins.js';
import type { PermitEngine } from '../../permit/engine.js';
import type { Backend, EndpointId, FlowProtocol, TeardownPlan } from '../../permit/types.js';
import type { N6Credentials } from './n6-transport.js';
import { SocketForwarder } from './socket-forwarder.js';
import { SocketListenerInstaller } from './socket-installer.js';

export interface SocketDataPlaneConfig {
  /** This node's data-plane address: publisher endpoints bind here, flows to publishers are dialled from here. */
  readonly host: string;
  /** Where consumed services are served locally (the VIP stand-in); default `host`. */
  readonly consumerHost?: string;
  /** The other nodes' data-plane addresses: identity (64 hex) → address (where to dial; without `n6`, [D] the peer identity). */
  readonly peers: ReadonlyMap<string, string>;
  /** This node's N6 credentials: TCP and UDP between daemons are keyed by TLS 1.3, peers proven by their Ed25519 keys. */
  readonly n6?: N6Credentials;
}

/** `::ffff:10.0.0.1` → `10.0.0.1` (a dual-stack socket reports IPv4 peers mapped). */
const plainAddress = (a: string): string => (a.startsWith('::ffff:') && isIPv4(a.slice(7)) ? a.slice(7) : a);

/**
 * A publisher permit's backend (`ipv4:<hex>`, `ipv6:<hex>`, `dns:<name>`, as the lease driver records it) as a host
 * to dial; null when it is none of these.
 */
export const dialableBackend = (b: Backend | null): Backend | null => {
  if (b === null) return null;
  const i = b.host.indexOf(':');
  const kind = b.host.slice(0, i);
  const v = b.host.slice(i + 1);
  if (kind === 'ipv4' && /^[0-9a-f]{8}$/.test(v)) return { host: [...fromHex(v)].join('.'), port: b.port };
  if (kind === 'ipv6' && /^[0-9a-f]{32}$/.test(v))
    return { host: (v.match(/.{4}/g) as string[]).join(':'), port: b.port };
  if (kind === 'dns' && v.length > 0) return { host: v, port: b.port };
  return null;
};

/** The engine's endpoint name of a publisher's P (the lease driver names the owners the same way). */
export const publisherEndpoint = (publisher: Bytes, port: bigint | number): EndpointId =>
  `[${toHex(deriveN6(publisher))}]:${port}`;

export class SocketDataPlane implements DaemonDataPlane {
  readonly forwarder: SocketForwarder;
  /** The publisher side: give it to the PortArbiter. */
  readonly installer: SocketListenerInstaller;
  private readonly byAddress = new Map<string, Bytes>();
  private readonly consumed = new Map<string, { readonly host: string; readonly port: number }>();

  constructor(
    engine: PermitEngine,
    private readonly c: SocketDataPlaneConfig,
  ) {
    this.forwarder = new SocketForwarder(engine);
    for (const [id, addr] of c.peers) this.byAddress.set(plainAddress(addr), fromHex(id));
    this.installer = new SocketListenerInstaller({
      forwarder: this.forwarder,
      hostOf: () => c.host,
      endpointOf: publisherEndpoint,
      // over N6 a peer (TCP, or the TLS connection keying a UDP association) is the key its handshake proved, never
      // its address
      peerOf: (remote, _port, _protocol, authenticated) =>
        c.n6 !== undefined ? authenticated : (this.byAddress.get(plainAddress(remote)) ?? null),
      upstream: (flow) => dialableBackend(flow.backend),
      ...(c.n6 === undefined ? {} : { n6Server: c.n6 }),
    });
  }

  apply(plans: readonly TeardownPlan[]): void {
    this.forwarder.apply(plans);
  }

  async consume(
    service: string,
    endpoint: EndpointId,
    port: number,
    publisher: Bytes,
    protocols: readonly FlowProtocol[],
  ): Promise<void> {
    await this.unconsume(service);
    const host = this.c.consumerHost ?? this.c.host;
    const to = this.c.peers.get(toHex(publisher));
    await this.forwarder.listen({
      endpoint,
      host,
      port,
      protocols,
      // a local client of the consumed service: the flow's peer is the service's publisher (the permit checks it)
      peerOf: () => publisher,
      // an unknown publisher address: the flow has nowhere to go and ends (no dial is guessed)
      upstream: () => (to === undefined ? null : { host: to, port }),
      dialFrom: this.c.host,
      // over N6 the publisher must prove the key this consumer's permit names (TCP, and the TLS connection keying UDP)
      ...(this.c.n6 === undefined ? {} : { n6Client: { credentials: this.c.n6, expect: () => publisher } }),
    });
    this.consumed.set(service, { host, port });
  }

  async unconsume(service: string): Promise<void> {
    const l = this.consumed.get(service);
    if (l === undefined) return;
    this.consumed.delete(service);
    await this.forwarder.unlisten(l.host, l.port);
  }

  async close(): Promise<void> {
    this.consumed.clear();
    await this.forwarder.close();
  }
}

/** `--data-plane-peers`: `identity=address,…` (identity 64 lowercase hex); a malformed entry names itself. */
export const parsePeers = (text: string): Map<string, string> | { readonly error: string } => {
  const out = new Map<string, string>();
  for (const entry of text.split(',').filter((e) => e.trim() !== '')) {
    const i = entry.indexOf('=');
    const id = entry.slice(0, i).trim();
    const addr = entry.slice(i + 1).trim();
    if (i < 0 || !/^[0-9a-f]{64}$/.test(id) || addr === '')
      return { error: `"${entry}" is not identity=address (identity: 64 lowercase hex)` };
    out.set(id, addr);
  }
  return out;
};

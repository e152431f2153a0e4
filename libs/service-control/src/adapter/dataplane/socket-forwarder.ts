// The real data plane on kernel sockets (issue 20): a service endpoint is a bound TCP server and a bound UDP socket on
// host:P; every accepted connection / first datagram of a 5-tuple opens a flow in the PermitEngine, and EVERY read
// from and write to the client socket and the upstream socket (the backend on a publisher, the next hop toward the
// publisher on a consumer) is checked by the engine first (spec §6.6: `tcp-read-poll`, `tcp-write-poll`,
// `inbound-delivery`, `udp-send`, `dial-start`, `dial-complete`, `dequeue` for data queued while the upstream dials).
// A refused check kills the flow; revocation/expiry plans are applied in the §6.7 order (gate → cancel → drop queues
// → abort TCP → delete UDP associations), and a flow's retirement receipt goes to the engine only after its sockets
// have really emitted `close` and its queue is empty. Decision 0260.
// UDP between daemons (an `n6Server` / `n6Client` endpoint) is N6 too (decision 0269): a consumer flow first opens an
// N6 TLS connection with ALPN `n6-udp`, both ends derive the association's keys from its exporter, and every datagram
// on N6:P is an AEAD frame (n6-udp.ts). The publisher maps the frame's key id to the identity that TLS connection
// proved — a datagram that is not a valid, fresh frame of a live association is refused before any flow or backend
// socket exists. The association dies with its TLS connection, and every cut of the flow closes that connection.
import { type Socket as UdpSocket, createSocket } from 'node:dgram';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { isIPv6 } from 'node:net';
import { type TLSSocket } from 'node:tls';
import { type Bytes, bytesEqual } from '../../domain/bytes.js';
import { applyTeardown, type PermitDataPlane } from '../../permit/dataplane.js';
import type { Flow, PermitEngine } from '../../permit/engine.js';
import type {
  Backend,
  EndpointId,
  FlowProtocol,
  GenerationStamp,
  IoPoint,
  RetirementOutcome,
  TeardownPlan,
  TeardownStepName,
  Verdict,
} from '../../permit/types.js';
import { type N6Credentials, n6Accept, n6Dial, negotiated, peerIdentity } from './n6-transport.js';
import { literalFirstLookup } from './udp-lookup.js';
import {
  N6_UDP_ALPN,
  N6_UDP_EXPORTER_CONTEXT,
  N6_UDP_EXPORTER_LABEL,
  N6_UDP_KEY_MATERIAL,
  N6UdpReceiver,
  N6UdpSealer,
  n6UdpKeys,
} from './n6-udp.js';

/** One service endpoint to serve. */
export interface EndpointSpec {
  /** The engine's name of the endpoint (its owner is set in the engine by the lease driver). */
  readonly endpoint: EndpointId;
  readonly host: string;
  readonly port: number;
  readonly protocols: readonly FlowProtocol[];
  /**
   * The peer identity of a connection; null → not a node we know: the connection is refused before any flow exists.
   * `authenticated` is the node identity proven by the N6 handshake (TCP on an `n6Server` endpoint), else null.
   */
  readonly peerOf: (
    remoteAddress: string,
    remotePort: number,
    protocol: FlowProtocol,
    authenticated: Bytes | null,
  ) => Bytes | null;
  /**
   * N6 server side (a publisher endpoint, decision 0263): every TCP connection is TLS 1.3 with this node's
   * credentials, the client must present an Ed25519 certificate, and its key is the `authenticated` identity.
   * UDP (decision 0269): every datagram must be an AEAD frame of an association keyed by such a TLS connection
   * (ALPN `n6-udp`; the TCP server on P is bound for it even when only UDP is served); its proven key is the
   * `authenticated` identity of the UDP flow.
   */
  readonly n6Server?: N6Credentials;
  /**
   * N6 client side (a consumer endpoint): the upstream is dialled with TLS 1.3, and the server's certificate key must
   * be `expect(flow)` (the permit's publisher identity); any other key closes the flow before a byte is sent. A UDP
   * flow dials the same TLS connection with ALPN `n6-udp` first and sends only AEAD frames under its keys.
   */
  readonly n6Client?: { readonly credentials: N6Credentials; readonly expect: (flow: Flow) => Bytes | null };
  /** Where the flow's bytes go: a publisher flow's own backend (`flow.backend`), a consumer flow's next hop. */
  readonly upstream: (flow: Flow) => Backend | null;
  /**
   * The local address the upstream is dialled from (a consumer dials the publisher from its own data-plane address,
   * which is how the publisher tells the consumer's identity, decision 0262); unset = the kernel's choice.
   */
  readonly dialFrom?: string;
}

/** What happened to data and connections, for diagnostics, metrics and tests. */
export interface ForwarderCounters {
  /** Flows opened (the engine allowed the accept / first datagram), by protocol. */
  opened: Map<FlowProtocol, number>;
  refused: number;
  refusedBy: Map<string, number>;
  /** Chunks/datagrams not forwarded because a check refused them (or the gate was closed). */
  denied: number;
  /** Items dropped from a flow's queue by the teardown (queued is not delivered). */
  droppedQueued: number;
  forwardedBytes: number;
  /**
   * N6 TLS handshakes finished, by `leg|version|suite` (leg `tcp`: a TCP flow's connection, `udp`: an `n6-udp`
   * association's), at either end (decision 0410: what was really negotiated, not what was configured).
   */
  n6Sessions: Map<string, number>;
}

interface FlowSockets {
  readonly flow: Flow;
  readonly protocol: FlowProtocol;
  /** TCP: the accepted client stream (a TLS stream on an N6 endpoint). UDP: null (the endpoint's socket is shared). */
  readonly client: Socket | null;
  /** The TCP socket under `client` when `client` is a TLS stream (reset on a cut), else the same as `client`. */
  readonly clientRaw: Socket | null;
  upstream: Socket | UdpSocket | null;
  /** The TCP socket under a TLS upstream, else the same as `upstream`. */
  upstreamRaw: Socket | null;
  upstreamReady: boolean;
  /** Data read from the client before the upstream was connected, each stamped with its flow generation. */
  queue: { readonly stamp: GenerationStamp; readonly data: Buffer }[];
  gated: boolean;
  open: number;
  udpKey: string | null;
  /** N6 UDP: the TLS connection keying the flow's association (its close is the flow's abort), else null. */
  control: Socket | null;
  /** The TCP socket under `control`. */
  controlRaw: Socket | null;
  /**
   * N6 UDP: seals a datagram for the N6 leg (null: the association's counter is spent) — the upstream on a consumer,
   * the client on a publisher; plain UDP: null.
   */
  seal: ((payload: Buffer) => Buffer | null) | null;
  /** Which side of the flow is an N6 UDP leg (where `seal` applies; never a clear datagram there); 'none': plain. */
  sealSide: 'none' | 'upstream' | 'client';
  /** N6 UDP on a publisher: forgets the flow's association (its key id opens nothing any more). */
  forget: (() => void) | null;
  readonly retired: Promise<RetirementOutcome>;
  settle: (o: RetirementOutcome) => void;
}

/** A publisher's UDP association, keyed by one N6 TLS connection (decision 0269). */
interface UdpAssociation {
  readonly keyId: string;
  /** The node identity the TLS handshake proved. */
  readonly peer: Bytes;
  readonly sealer: N6UdpSealer;
  readonly stream: TLSSocket;
  readonly raw: Socket;
  /** The flow its first datagram opened (null until then). */
  flow: FlowSockets | null;
  /** Where the last authenticated datagram came from: replies go there. */
  address: string;
  port: number;
}

interface Listening {
  readonly spec: EndpointSpec;
  readonly tcp: Server | null;
  readonly udp: UdpSocket | null;
  readonly udpFlows: Map<string, FlowSockets>;
  /** N6 UDP (a publisher endpoint with `n6Server` serving UDP): the live associations by key id, else null. */
  readonly n6udp: N6UdpReceiver<UdpAssociation> | null;
  readonly associations: Set<UdpAssociation>;
}

/** A flow's socket: the client or upstream stream, or the TCP socket under it. */
export type FlowStreamSide = 'client' | 'clientRaw' | 'upstream' | 'upstreamRaw';

/** The high-water marks (bytes) Node reports for one socket. */
export interface StreamBuffers {
  readonly readable: number;
  readonly writable: number;
}

/** Options of a forwarder; every field is test-only. */
export interface ForwarderOptions {
  /**
   * Test-only (decision 0273): the first counter of every N6 UDP association's sealers, on both ends, so a test can
   * reach the end of the 2^64 counter space (`n6-udp-counter-spent`) without 2^64 datagrams. Default 0.
   */
  readonly n6UdpCounterStart?: bigint;
  /**
   * The high-water mark of every TCP flow socket and N6 TLS stream (bytes a socket holds before a write reports
   * backpressure and the other side is paused). Default {@link FLOW_HIGH_WATER_MARK} (decision 0411); the bench's
   * "before" rows set Node's default (16 KiB) to measure the difference in the same run.
   */
  readonly highWaterMark?: number;
}

/**
 * 256 KiB (decision 0411): with Node's 16 KiB every 64 KiB chunk written to a flow socket reported backpressure, so
 * the reading side was paused and resumed once per chunk — and a TLS write's completion always comes a turn later.
 * Nothing is delivered past a cut either way: the flow's gate refuses new writes, and what a socket still holds is
 * dropped with it by the abort (decision 0266).
 */
export const FLOW_HIGH_WATER_MARK = 256 * 1024;

export class SocketForwarder implements PermitDataPlane {
  readonly counters: ForwarderCounters = {
    opened: new Map(),
    refused: 0,
    refusedBy: new Map(),
    denied: 0,
    droppedQueued: 0,
    forwardedBytes: 0,
    n6Sessions: new Map(),
  };
  /** Every teardown step applied, in order, with the flows it acted on. */
  readonly teardownLog: { readonly step: TeardownStepName; readonly flowIds: readonly number[] }[] = [];
  private readonly flows = new Map<number, FlowSockets>();
  private readonly listeners = new Map<string, Listening>();
  /** Sockets a flow is waiting on for `drain` (backpressure). */
  private readonly draining = new WeakSet<Socket>();

  /** The socket/stream options of every TCP flow socket (decision 0411). */
  private readonly stream: { readonly highWaterMark: number };

  constructor(
    readonly engine: PermitEngine,
    private readonly options: ForwarderOptions = {},
  ) {
    this.stream = { highWaterMark: options.highWaterMark ?? FLOW_HIGH_WATER_MARK };
  }

  // ───────────────────────── listeners ─────────────────────────

  /**
   * Bind the endpoint's sockets (TCP server and/or UDP socket on host:port; port 0 = the kernel's choice, the same
   * P for both protocols). Resolves with the bound port; rejects when a bind fails (nothing stays bound).
   */
  async listen(requested: EndpointSpec): Promise<number> {
    let spec = requested;
    if (this.listeners.has(listenKey(spec.host, spec.port))) throw new Error(`already listening on ${spec.port}`);
    let tcp: Server | null = null;
    let udp: UdpSocket | null = null;
    const udpFlows = new Map<string, FlowSockets>();
    const n6udp =
      spec.n6Server !== undefined && spec.protocols.includes('udp') ? new N6UdpReceiver<UdpAssociation>() : null;
    const associations = new Set<UdpAssociation>();
    try {
      // N6 UDP is keyed over TLS on TCP P: the TCP server is bound for it even when only UDP is served (P is the
      // service's on both protocols, I1)
      if (spec.protocols.includes('tcp') || n6udp !== null) {
        const server = createServer({ pauseOnConnect: true, allowHalfOpen: true, ...this.stream }, (s) =>
          this.accept(spec, s, n6udp, associations),
        );
        tcp = server;
        await new Promise<void>((ok, fail) => {
          server.once('error', fail);
          server.listen({ host: spec.host, port: spec.port, exclusive: true }, () => (server.off('error', fail), ok()));
        });
        const a = server.address();
        if (a !== null && typeof a !== 'string') spec = { ...spec, port: a.port };
      }
      if (spec.protocols.includes('udp')) {
        // replies go to `rinfo` addresses: an IP literal is sent at once, not a tick later (decision 0490)
        const sock = createSocket({ type: isIPv6(spec.host) ? 'udp6' : 'udp4', lookup: literalFirstLookup });
        udp = sock;
        await new Promise<void>((ok, fail) => {
          sock.once('error', fail);
          sock.bind({ address: spec.host, port: spec.port, exclusive: true }, () => (sock.off('error', fail), ok()));
        });
        spec = { ...spec, port: sock.address().port };
        const bound = spec;
        sock.on('message', (msg, rinfo) =>
          this.onDatagram(bound, sock, udpFlows, n6udp, msg, rinfo.address, rinfo.port),
        );
      }
    } catch (e) {
      tcp?.close();
      udp?.close();
      throw e;
    }
    this.listeners.set(listenKey(spec.host, spec.port), { spec, tcp, udp, udpFlows, n6udp, associations });
    return spec.port;
  }

  /** The port the kernel reports for this endpoint's bound sockets, or null when not (fully) bound. */
  boundPort(host: string, port: number): number | null {
    const l = this.listeners.get(listenKey(host, port));
    if (l === undefined) return null;
    const ports = new Set<number>();
    if (l.tcp !== null) {
      const a = l.tcp.listening ? l.tcp.address() : null;
      if (a === null || typeof a === 'string') return null;
      ports.add(a.port);
    }
    if (l.udp !== null) {
      try {
        ports.add(l.udp.address().port);
      } catch {
        return null; // not bound (closed)
      }
    }
    return ports.size === 1 ? ([...ports][0] as number) : null;
  }

  /** The protocols actually bound on the endpoint (observed from the sockets). */
  boundProtocols(host: string, port: number): FlowProtocol[] {
    const l = this.listeners.get(listenKey(host, port));
    if (l === undefined) return [];
    const out: FlowProtocol[] = [];
    if (l.tcp?.listening === true && l.spec.protocols.includes('tcp')) out.push('tcp');
    if (l.udp !== null && this.boundPort(host, port) !== null) out.push('udp');
    return out;
  }

  /**
   * Stop serving an endpoint: the flows on it are torn down in the §6.7 order first (gate first), then the sockets
   * are closed. Resolves when the listening sockets are closed.
   */
  async unlisten(host: string, port: number): Promise<void> {
    const key = listenKey(host, port);
    const l = this.listeners.get(key);
    if (l === undefined) return;
    this.listeners.delete(key);
    const ids = [...this.flows.values()].filter((f) => f.flow.endpointId === l.spec.endpoint).map((f) => f.flow.id);
    for (const id of ids) {
      const f = this.flows.get(id);
      if (f !== undefined) this.engine.endFlow(f.flow);
    }
    if (ids.length > 0) this.applyLocal(ids);
    // every association's TLS connection goes with the endpoint (those of flows were aborted by their cut; those no
    // datagram used yet have none): the TCP server's close waits for its connections
    for (const a of [...l.associations]) this.dropAssociation(l.n6udp, l.associations, a);
    await Promise.all([
      l.tcp === null ? undefined : new Promise<void>((ok) => l.tcp?.close(() => ok())),
      l.udp === null ? undefined : new Promise<void>((ok) => l.udp?.close(() => ok())),
    ]);
  }

  async close(): Promise<void> {
    for (const l of [...this.listeners.values()]) await this.unlisten(l.spec.host, l.spec.port);
  }

  // ───────────────────────── flows ─────────────────────────

  /** The flows the forwarder still holds sockets for (not yet retired). */
  liveFlowIds(): number[] {
    return [...this.flows.keys()];
  }

  /**
   * The buffer sizes Node reports for a live TCP flow's real sockets (readable and writable high-water marks): the
   * client stream, the upstream stream and, under an N6 TLS stream, the TCP socket beneath it (`…Raw`, the same
   * socket as the stream on a plain side). Diagnostics: what decision 0411 sets is observed, not assumed (decision
   * 0462). Null: no such TCP flow.
   */
  flowStreamBuffers(flowId: number): Record<FlowStreamSide, StreamBuffers | null> | null {
    const f = this.flows.get(flowId);
    if (f === undefined || f.protocol !== 'tcp') return null;
    const of = (s: Socket | UdpSocket | null): StreamBuffers | null =>
      s === null || !('writableHighWaterMark' in s)
        ? null
        : { readable: s.readableHighWaterMark, writable: s.writableHighWaterMark };
    return {
      client: of(f.client),
      clientRaw: of(f.clientRaw),
      upstream: of(f.upstream),
      upstreamRaw: of(f.upstreamRaw),
    };
  }

  /** Resolves with the engine's answer to the flow's retirement receipt, once its sockets are really closed. */
  retirement(flowId: number): Promise<RetirementOutcome> {
    return this.flows.get(flowId)?.retired ?? Promise.resolve('unknown-flow');
  }

  /** Apply the engine's plans in order (revocation, snapshot grants, epoch change, expiry by `tick`). */
  apply(plans: TeardownPlan | readonly TeardownPlan[]): void {
    for (const p of Array.isArray(plans) ? (plans as readonly TeardownPlan[]) : [plans as TeardownPlan])
      applyTeardown(p, this);
  }

  /** The expiry driver: wake idle flows whose permit ran out (the gate itself never waits for it). */
  tick(): void {
    this.apply(this.engine.tick());
  }

  /** A finished N6 handshake: what it negotiated is counted (decision 0410). */
  private session(leg: FlowProtocol, stream: TLSSocket): void {
    const n = negotiated(stream);
    const k = `${leg}|${n.version}|${n.suite}`;
    this.counters.n6Sessions.set(k, (this.counters.n6Sessions.get(k) ?? 0) + 1);
  }

  /**
   * A consumer's N6 dial whose TCP connection was made but whose TLS handshake never finished (the publisher offered
   * no suite or version we accept, or proved nothing) is refused as `n6-handshake`, like the publisher's side of it;
   * a dial the flow's own cut ended is not counted.
   */
  private watchHandshake(f: FlowSockets, raw: Socket, stream: TLSSocket): void {
    let connected = false;
    let secured = false;
    raw.once('connect', () => (connected = true));
    stream.once('secureConnect', () => (secured = true));
    stream.once('close', () => {
      if (connected && !secured && !f.gated) this.refuse('n6-handshake');
    });
  }

  private refuse(verdict: string): void {
    this.counters.refused++;
    this.counters.refusedBy.set(verdict, (this.counters.refusedBy.get(verdict) ?? 0) + 1);
  }

  private newFlow(flow: Flow, client: Socket | null, clientRaw: Socket | null, udpKey: string | null): FlowSockets {
    this.counters.opened.set(flow.protocol, (this.counters.opened.get(flow.protocol) ?? 0) + 1);
    let settle!: (o: RetirementOutcome) => void;
    const retired = new Promise<RetirementOutcome>((r) => (settle = r));
    const f: FlowSockets = {
      flow,
      protocol: flow.protocol,
      client,
      clientRaw,
      upstream: null,
      upstreamRaw: null,
      upstreamReady: false,
      queue: [],
      gated: false,
      open: client === null ? 0 : 1,
      udpKey,
      control: null,
      controlRaw: null,
      seal: null,
      sealSide: 'none',
      forget: null,
      retired,
      settle,
    };
    this.flows.set(flow.id, f);
    return f;
  }

  /** One check; a refusal kills the flow and applies whatever the engine planned, then this flow's own teardown. */
  private pass(f: FlowSockets, point: IoPoint): boolean {
    if (f.gated) return false;
    const v: Verdict = this.engine.check(f.flow, point);
    if (v === 'allow') return true;
    this.counters.denied++;
    this.apply(this.engine.takeTeardowns());
    if (!f.gated) this.applyLocal([f.flow.id]); // killed alone (old generation, ownership, …): its own cut
    return false;
  }

  /** The §6.7 steps for flows the engine killed without a plan (or that ended on their own). */
  private applyLocal(ids: readonly number[]): void {
    this.closeGate(ids);
    this.cancelTasks(ids);
    this.dropQueues(ids);
    this.abortTcp(ids.filter((id) => this.flows.get(id)?.protocol === 'tcp'));
    this.deleteAssociations(ids);
  }

  /**
   * An accepted TCP connection: plain, or (an N6 endpoint) after its TLS handshake, with the proven identity; on N6
   * a connection with ALPN `n6-udp` keys a UDP association instead of carrying a TCP flow.
   */
  private accept(
    spec: EndpointSpec,
    raw: Socket,
    n6udp: N6UdpReceiver<UdpAssociation> | null,
    associations: Set<UdpAssociation>,
  ): void {
    raw.on('error', () => undefined);
    if (spec.n6Server === undefined) return this.acceptTcp(spec, raw, raw, null);
    raw.resume();
    n6Accept(
      raw,
      spec.n6Server,
      (stream, peer) => {
        this.session(stream.alpnProtocol === N6_UDP_ALPN ? 'udp' : 'tcp', stream);
        if (peer === null) {
          // no Ed25519 certificate: not a node; refused before any flow exists
          this.refuse('unknown-peer');
          stream.destroy();
          return;
        }
        if (stream.alpnProtocol === N6_UDP_ALPN)
          return this.acceptAssociation(spec, stream, raw, peer, n6udp, associations);
        if (!spec.protocols.includes('tcp')) {
          // the TCP server is there only to key UDP associations
          this.refuse('protocol-not-served');
          abortStream(stream, raw);
          return;
        }
        stream.pause();
        this.acceptTcp(spec, stream, raw, peer);
      },
      () => this.refuse('n6-handshake'),
      this.stream,
    );
  }

  /**
   * A publisher's side of an `n6-udp` TLS connection: derive the association's keys from the exporter and hold them
   * under their key id until the connection closes. No flow exists yet: the first datagram under these keys opens
   * one, with the proven key as its peer (the permit decides). The connection carries nothing else.
   */
  private acceptAssociation(
    spec: EndpointSpec,
    stream: TLSSocket,
    raw: Socket,
    proven: Bytes,
    n6udp: N6UdpReceiver<UdpAssociation> | null,
    associations: Set<UdpAssociation>,
  ): void {
    if (n6udp === null) {
      this.refuse('protocol-not-served');
      abortStream(stream, raw);
      return;
    }
    const peer = spec.peerOf(raw.remoteAddress ?? '', raw.remotePort ?? 0, 'udp', proven);
    if (peer === null) {
      this.refuse('unknown-peer');
      abortStream(stream, raw);
      return;
    }
    const keys = n6UdpKeys(
      stream.exportKeyingMaterial(N6_UDP_KEY_MATERIAL, N6_UDP_EXPORTER_LABEL, N6_UDP_EXPORTER_CONTEXT),
      'publisher',
    );
    const a: UdpAssociation = {
      keyId: keys.keyId,
      peer,
      sealer: new N6UdpSealer(keys, this.options.n6UdpCounterStart),
      stream,
      raw,
      flow: null,
      address: '',
      port: 0,
    };
    n6udp.add(keys, a);
    associations.add(a);
    // the consumer sends its first datagram only after this byte: the keys are registered by then (its own
    // handshake completes before ours, and a datagram could otherwise overtake our `secure`)
    stream.write(N6_UDP_READY);
    stream.on('data', () => undefined); // nothing is carried here; reading keeps `end`/`close` coming
    stream.once('end', () => abortStream(stream, raw));
    // the connection is gone (the consumer cut, or our own teardown closed it): the keys open nothing any more, and
    // the flow (if a datagram opened one) ends — its receipt counts this close
    stream.once('close', () => {
      n6udp.delete(a.keyId);
      associations.delete(a);
      if (a.flow !== null) this.socketClosed(a.flow);
    });
    stream.resume();
  }

  /** Forget an association and close its TLS connection (its flow, if any, is cut by its own teardown). */
  private dropAssociation(
    n6udp: N6UdpReceiver<UdpAssociation> | null,
    associations: Set<UdpAssociation>,
    a: UdpAssociation,
  ): void {
    n6udp?.delete(a.keyId);
    associations.delete(a);
    abortStream(a.stream, a.raw);
  }

  private acceptTcp(spec: EndpointSpec, client: Socket, raw: Socket, authenticated: Bytes | null): void {
    client.on('error', () => undefined);
    const remoteAddress = raw.remoteAddress ?? '';
    const remotePort = raw.remotePort ?? 0;
    const peer = spec.peerOf(remoteAddress, remotePort, 'tcp', authenticated);
    if (peer === null) {
      this.refuse('unknown-peer');
      abortStream(client, raw);
      return;
    }
    const out = this.engine.openFlow({
      endpoint: spec.endpoint,
      tuple: {
        protocol: 'tcp',
        localAddress: raw.localAddress ?? spec.host,
        localPort: raw.localPort ?? spec.port,
        remoteAddress,
        remotePort,
      },
      peerIdentity: peer,
    });
    if (out.verdict !== 'allow') {
      this.refuse(out.verdict);
      abortStream(client, raw);
      return;
    }
    const f = this.newFlow((out as { readonly flow: Flow }).flow, client, raw, null);
    client.on('close', () => this.socketClosed(f));
    if (!this.pass(f, 'dial-start')) return;
    const to = spec.upstream(f.flow);
    if (to === null) {
      this.endOnOwn(f);
      return;
    }
    const upRaw = connect({
      ...this.stream,
      host: to.host,
      port: to.port,
      allowHalfOpen: true,
      ...(spec.dialFrom === undefined ? {} : { localAddress: spec.dialFrom }),
    });
    upRaw.on('error', () => undefined);
    const n6 = spec.n6Client;
    const up: Socket = n6 === undefined ? upRaw : n6Dial(upRaw, n6.credentials, undefined, this.stream);
    if (n6 !== undefined) this.watchHandshake(f, upRaw, up as TLSSocket);
    f.upstream = up;
    f.upstreamRaw = upRaw;
    f.open++;
    up.on('error', () => undefined);
    up.on('close', () => this.socketClosed(f));
    up.on(n6 === undefined ? 'connect' : 'secureConnect', () => {
      if (n6 !== undefined) {
        this.session('tcp', up as TLSSocket);
        // the publisher must prove the identity the permit names; anything else is cut before a byte is sent
        const expected = n6.expect(f.flow);
        const got = peerIdentity(up as TLSSocket);
        if (expected === null || got === null || !bytesEqual(expected, got)) {
          this.refuse('wrong-publisher-key');
          this.endOnOwn(f);
          return;
        }
      }
      if (!this.pass(f, 'dial-complete')) return;
      f.upstreamReady = true;
      for (const item of f.queue.splice(0)) {
        if (this.engine.checkDequeued(item.stamp) !== 'allow') {
          this.counters.droppedQueued++;
          continue;
        }
        if (!this.writeTcp(f, up, item.data)) return;
      }
    });
    up.on('data', (chunk: Buffer) => {
      if (!this.pass(f, 'tcp-read-poll')) return;
      this.writeTcp(f, client, chunk);
    });
    client.on('data', (chunk: Buffer) => {
      if (!this.pass(f, 'tcp-read-poll')) return;
      if (!f.upstreamReady) f.queue.push({ stamp: this.engine.stamp(f.flow), data: chunk });
      else this.writeTcp(f, up, chunk);
    });
    // a half-close is forwarded; the flow ends when both sides are closed
    client.on('end', () => (f.gated ? undefined : up.end()));
    up.on('end', () => (f.gated ? undefined : client.end()));
    client.resume();
  }

  private writeTcp(f: FlowSockets, to: Socket, chunk: Buffer): boolean {
    if (!this.pass(f, 'tcp-write-poll')) return false;
    this.counters.forwardedBytes += chunk.length;
    if (!to.write(chunk) && !this.draining.has(to)) {
      // backpressure: stop reading the other side until drained (one wake-up per stall, however many chunks still
      // arrive meanwhile — a TLS stream delivers what it already decrypted after `pause`); the wake-up is checked too
      const from = to === f.client ? f.upstream : f.client;
      (from as Socket | null)?.pause();
      this.draining.add(to);
      to.once('drain', () => {
        this.draining.delete(to);
        if (this.pass(f, 'wake')) (from as Socket | null)?.resume();
      });
    }
    return true;
  }

  private onDatagram(
    spec: EndpointSpec,
    sock: UdpSocket,
    udpFlows: Map<string, FlowSockets>,
    n6udp: N6UdpReceiver<UdpAssociation> | null,
    frame: Buffer,
    address: string,
    port: number,
  ): void {
    // N6 UDP: only a valid, fresh frame of a live association gets past here; the flow is the association's (its key
    // id), its peer the key that association's TLS connection proved, and replies go where its last frame came from
    let msg = frame;
    let assoc: UdpAssociation | null = null;
    if (n6udp !== null) {
      const o = n6udp.open(frame);
      if (!o.ok) return this.refuse(o.reason);
      assoc = o.association;
      assoc.address = address;
      assoc.port = port;
      msg = o.payload;
    }
    const key = assoc === null ? `${address}|${port}` : `n6|${assoc.keyId}`;
    let f = udpFlows.get(key);
    if (f === undefined) {
      const peer = assoc === null ? spec.peerOf(address, port, 'udp', null) : assoc.peer;
      if (peer === null) return this.refuse('unknown-peer');
      const out = this.engine.openFlow({
        endpoint: spec.endpoint,
        tuple: {
          protocol: 'udp',
          localAddress: spec.host,
          localPort: spec.port,
          remoteAddress: address,
          remotePort: port,
        },
        peerIdentity: peer,
      });
      if (out.verdict !== 'allow') return this.refuse(out.verdict);
      const nf = this.newFlow((out as { readonly flow: Flow }).flow, null, null, key);
      f = nf;
      udpFlows.set(key, nf);
      const a = assoc;
      if (a !== null) {
        // the association's TLS connection is now one of the flow's sockets: the flow's cut closes it, its close
        // cuts the flow, and the receipt waits for it
        a.flow = nf;
        nf.control = a.stream;
        nf.controlRaw = a.raw;
        nf.open++;
        nf.seal = (payload) => a.sealer.seal(payload);
        nf.sealSide = 'client';
        nf.forget = () => {
          n6udp?.delete(a.keyId);
          for (const l of this.listeners.values()) l.associations.delete(a);
        };
      }
      const replyTo = a ?? { address, port };
      if (!this.pass(nf, 'dial-start')) return;
      const to = spec.upstream(nf.flow);
      if (to === null) return this.endOnOwn(nf);
      const deliver = (reply: Buffer): void => {
        if (!this.pass(nf, 'inbound-delivery') || !this.pass(nf, 'udp-send')) return;
        const out = this.sealFor(nf, 'client', reply);
        if (out === null) return;
        this.counters.forwardedBytes += reply.length;
        sock.send(out, replyTo.port, replyTo.address);
      };
      if (spec.n6Client !== undefined) this.dialN6Udp(spec, spec.n6Client, nf, to, deliver);
      else this.dialUdp(spec, nf, to, deliver, () => udpFlows.delete(key));
    }
    if (!this.pass(f, 'inbound-delivery')) return;
    if (!f.upstreamReady) {
      f.queue.push({ stamp: this.engine.stamp(f.flow), data: msg });
      return;
    }
    this.sendUp(f, msg);
  }

  /** One datagram to a UDP flow's upstream: checked, sealed on an N6 leg. */
  private sendUp(f: FlowSockets, payload: Buffer): boolean {
    if (!this.pass(f, 'udp-send')) return false;
    const out = this.sealFor(f, 'upstream', payload);
    if (out === null) return false;
    this.counters.forwardedBytes += payload.length;
    (f.upstream as UdpSocket).send(out);
    return true;
  }

  /** The datagram as the flow's N6 leg carries it (plain UDP: itself); null when the association's counter is spent (the flow ends). */
  private sealFor(f: FlowSockets, side: 'upstream' | 'client', payload: Buffer): Buffer | null {
    if (f.sealSide !== side) return payload;
    const out = f.seal === null ? null : f.seal(payload);
    if (out === null) {
      this.refuse('n6-udp-counter-spent');
      this.endOnOwn(f);
    }
    return out;
  }

  /** After the upstream is ready: what was queued meanwhile goes out, each item checked against its own stamp. */
  private flushUdp(f: FlowSockets): void {
    f.upstreamReady = true;
    for (const item of f.queue.splice(0)) {
      if (this.engine.checkDequeued(item.stamp) !== 'allow') {
        this.counters.droppedQueued++;
        continue;
      }
      if (!this.sendUp(f, item.data)) return;
    }
  }

  /** A plain UDP upstream (a publisher's backend, or a consumer's next hop without N6). */
  private dialUdp(
    spec: EndpointSpec,
    nf: FlowSockets,
    to: Backend,
    deliver: (reply: Buffer) => void,
    unmap: () => void,
  ): void {
    const up = createSocket({ type: isIPv6(to.host) ? 'udp6' : 'udp4' });
    nf.upstream = up;
    nf.open++;
    up.on('error', () => undefined);
    up.on('close', () => {
      unmap();
      this.socketClosed(nf);
    });
    up.on('message', deliver);
    const dial = (): void =>
      up.connect(to.port, to.host, () => {
        if (this.pass(nf, 'dial-complete')) this.flushUdp(nf);
      });
    if (spec.dialFrom === undefined) dial();
    else up.bind({ address: spec.dialFrom, port: 0 }, dial);
  }

  /**
   * A consumer's UDP flow over N6 (decision 0269): TLS to the publisher's P with ALPN `n6-udp`, the publisher's key
   * pinned as for TCP, the association's keys from the exporter; then a UDP socket to the publisher's P that sends
   * only frames sealed under them and delivers only replies that open under them (fresh, this association's key id).
   * Datagrams from the client wait in the flow's queue until then (`dequeue` checks each).
   */
  private dialN6Udp(
    spec: EndpointSpec,
    n6: NonNullable<EndpointSpec['n6Client']>,
    nf: FlowSockets,
    to: Backend,
    deliver: (reply: Buffer) => void,
  ): void {
    const raw = connect({
      host: to.host,
      port: to.port,
      ...(spec.dialFrom === undefined ? {} : { localAddress: spec.dialFrom }),
    });
    raw.on('error', () => undefined);
    const stream = n6Dial(raw, n6.credentials, N6_UDP_ALPN);
    this.watchHandshake(nf, raw, stream);
    nf.control = stream;
    nf.controlRaw = raw;
    nf.sealSide = 'upstream';
    nf.open++;
    stream.on('error', () => undefined);
    stream.once('end', () => abortStream(stream, raw)); // the publisher ended the association: the flow ends with it
    stream.once('close', () => this.socketClosed(nf));
    let pinned = false;
    stream.once('secureConnect', () => {
      this.session('udp', stream);
      if (nf.gated) return;
      const expected = n6.expect(nf.flow);
      const got = peerIdentity(stream);
      if (expected === null || got === null || !bytesEqual(expected, got)) {
        this.refuse('wrong-publisher-key');
        this.endOnOwn(nf);
        return;
      }
      if (stream.alpnProtocol !== N6_UDP_ALPN) {
        // a publisher that did not take `n6-udp` would treat this connection as a TCP flow
        this.refuse('n6-udp-not-offered');
        this.endOnOwn(nf);
        return;
      }
      pinned = true;
    });
    // the publisher's one byte: its end of the association holds the keys (nothing else is ever carried here)
    stream.once('data', (ready: Buffer) => {
      stream.on('data', () => undefined);
      if (nf.gated || !pinned) return;
      if (ready.length !== 1 || ready[0] !== N6_UDP_READY[0]) {
        this.refuse('n6-udp-protocol');
        this.endOnOwn(nf);
        return;
      }
      const keys = n6UdpKeys(
        stream.exportKeyingMaterial(N6_UDP_KEY_MATERIAL, N6_UDP_EXPORTER_LABEL, N6_UDP_EXPORTER_CONTEXT),
        'consumer',
      );
      const sealer = new N6UdpSealer(keys, this.options.n6UdpCounterStart);
      const receiver = new N6UdpReceiver<true>();
      receiver.add(keys, true);
      nf.seal = (payload) => sealer.seal(payload);
      const up = createSocket({ type: isIPv6(to.host) ? 'udp6' : 'udp4' });
      nf.upstream = up;
      nf.open++;
      up.on('error', () => undefined);
      up.on('close', () => this.socketClosed(nf));
      up.on('message', (frame: Buffer) => {
        const o = receiver.open(frame);
        if (!o.ok) return this.refuse(o.reason);
        deliver(o.payload);
      });
      const dial = (): void =>
        up.connect(to.port, to.host, () => {
          if (this.pass(nf, 'dial-complete')) this.flushUdp(nf);
        });
      if (spec.dialFrom === undefined) dial();
      else up.bind({ address: spec.dialFrom, port: 0 }, dial);
    });
  }

  /** A flow with nowhere to go ends on its own (no upstream): dead, then torn down like any other. */
  private endOnOwn(f: FlowSockets): void {
    this.engine.endFlow(f.flow);
    this.applyLocal([f.flow.id]);
  }

  /**
   * One of the flow's sockets is really closed. A live TCP flow whose peer went away ends on its own (its other
   * socket is closed through the same cut). When no socket is left open and the queue is empty, the retirement
   * receipt goes to the engine — never before.
   */
  private socketClosed(f: FlowSockets): void {
    f.open--;
    if (!f.gated) {
      this.engine.endFlow(f.flow);
      this.applyLocal([f.flow.id]);
    }
    this.retireIfClosed(f);
  }

  private retireIfClosed(f: FlowSockets): void {
    if (f.open > 0 || f.queue.length > 0 || !this.flows.has(f.flow.id)) return;
    const outcome = this.engine.recordRetirement({ kind: 'terminated', flowId: f.flow.id, evidence: 'eof' });
    if (outcome === 'retired') this.flows.delete(f.flow.id);
    f.settle(outcome);
  }

  // ───────────────────────── PermitDataPlane (spec §6.7 order) ─────────────────────────

  closeGate(flowIds: readonly number[]): void {
    for (const id of flowIds) {
      const f = this.flows.get(id);
      if (f !== undefined) f.gated = true;
    }
    this.teardownLog.push({ step: 'gate', flowIds });
  }

  cancelTasks(flowIds: readonly number[]): void {
    for (const id of flowIds) {
      const f = this.flows.get(id);
      if (f === undefined) continue;
      f.client?.pause();
      if (f.protocol === 'tcp') (f.upstream as Socket | null)?.pause();
    }
    this.teardownLog.push({ step: 'cancel', flowIds });
  }

  dropQueues(flowIds: readonly number[]): void {
    for (const id of flowIds) {
      const f = this.flows.get(id);
      if (f === undefined) continue;
      this.counters.droppedQueued += f.queue.length;
      f.queue = [];
    }
    this.teardownLog.push({ step: 'drop-queues', flowIds });
  }

  abortTcp(flowIds: readonly number[]): void {
    for (const id of flowIds) {
      const f = this.flows.get(id);
      if (f === undefined || f.protocol !== 'tcp') continue;
      // RST on both sides: the client's next write fails, the backend connection is closed
      abortStream(f.client, f.clientRaw);
      abortStream(f.upstream as Socket | null, f.upstreamRaw);
    }
    this.teardownLog.push({ step: 'abort-tcp', flowIds });
  }

  deleteAssociations(flowIds: readonly number[]): void {
    for (const id of flowIds) {
      const f = this.flows.get(id);
      if (f === undefined || f.protocol !== 'udp') continue;
      for (const l of this.listeners.values()) if (f.udpKey !== null) l.udpFlows.delete(f.udpKey);
      // N6: the keys go first (a frame under them opens nothing from now on), then their TLS connection
      f.forget?.();
      abortStream(f.control, f.controlRaw);
      const up = f.upstream as UdpSocket | null;
      f.upstream = null;
      if (up !== null)
        up.close(); // its 'close' event (and the TLS connection's) retires the flow
      else this.retireIfClosed(f);
    }
    this.teardownLog.push({ step: 'delete-associations', flowIds });
  }
}

const listenKey = (host: string, port: number): string => `${host}|${port}`;

/** The publisher's one byte on an `n6-udp` connection: the association's keys are registered. */
const N6_UDP_READY = Buffer.from([1]);

/**
 * RST a connection (a flow's client or upstream, or an accepted one refused before any flow). A plain socket is reset at once. Under a TLS stream (either side of N6) the TCP socket is reset
 * on the next turn of the event loop, then the stream is destroyed: resetting it synchronously from inside a TLS
 * callback (a `secureConnect`/`secure` handler — the consumer's key pin, a refused dial-complete) crashed Node 20.20.2
 * with a segfault, while the deferred reset survived 3000 aborts at every point of the connection (decision 0266).
 * Until then the stream is paused and corked — the flow's gate is already closed, nothing new is written — and the
 * flow's `close`, hence its retirement receipt, waits for the real close. A cut made by the CONSUMER so reaches the
 * publisher as ECONNRESET (it resets the backend in turn), never as an EOF it would forward as a finished request.
 */
const abortStream = (stream: Socket | null, raw: Socket | null): void => {
  if (stream === null || stream === raw) {
    if (raw !== null && !raw.destroyed) raw.resetAndDestroy();
    return;
  }
  if (stream.destroyed) return;
  stream.pause();
  stream.cork();
  setImmediate(() => {
    if (raw !== null && !raw.destroyed) raw.resetAndDestroy();
    if (!stream.destroyed) stream.destroy();
  });
};

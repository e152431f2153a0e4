// The real data plane on kernel sockets (issue 20): a service endpoint is a bound TCP server and a bound UDP socket on
// host:P; every accepted connection / first datagram of a 5-tuple opens a flow in the PermitEngine, and EVERY read
// from and write to the client socket and the upstream socket (the backend on a publisher, the next hop toward the
// publisher on a consumer) is checked by the engine first (spec §6.6: `tcp-read-poll`, `tcp-write-poll`,
// `inbound-delivery`, `udp-send`, `dial-start`, `dial-complete`, `dequeue` for data queued while the upstream dials).
// A refused check kills the flow; revocation/expiry plans are applied in the §6.7 order (gate → cancel → drop queues
// → abort TCP → delete UDP associations), and a flow's retirement receipt goes to the engine only after its sockets
// have really emitted `close` and its queue is empty. Decision 0260.
import { type Socket as UdpSocket, createSocket } from 'node:dgram';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { isIPv6 } from 'node:net';
import type { TLSSocket } from 'node:tls';
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
import { type N6Credentials, n6Accept, n6Dial, peerIdentity } from './n6-transport.js';

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
   */
  readonly n6Server?: N6Credentials;
  /**
   * N6 client side (a consumer endpoint): the upstream is dialled with TLS 1.3, and the server's certificate key must
   * be `expect(flow)` (the permit's publisher identity); any other key closes the flow before a byte is sent.
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
  readonly retired: Promise<RetirementOutcome>;
  settle: (o: RetirementOutcome) => void;
}

interface Listening {
  readonly spec: EndpointSpec;
  readonly tcp: Server | null;
  readonly udp: UdpSocket | null;
  readonly udpFlows: Map<string, FlowSockets>;
}

export class SocketForwarder implements PermitDataPlane {
  readonly counters: ForwarderCounters = {
    opened: new Map(),
    refused: 0,
    refusedBy: new Map(),
    denied: 0,
    droppedQueued: 0,
    forwardedBytes: 0,
  };
  /** Every teardown step applied, in order, with the flows it acted on. */
  readonly teardownLog: { readonly step: TeardownStepName; readonly flowIds: readonly number[] }[] = [];
  private readonly flows = new Map<number, FlowSockets>();
  private readonly listeners = new Map<string, Listening>();
  /** Sockets a flow is waiting on for `drain` (backpressure). */
  private readonly draining = new WeakSet<Socket>();

  constructor(readonly engine: PermitEngine) {}

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
    try {
      if (spec.protocols.includes('tcp')) {
        const server = createServer({ pauseOnConnect: true, allowHalfOpen: true }, (s) => this.accept(spec, s));
        tcp = server;
        await new Promise<void>((ok, fail) => {
          server.once('error', fail);
          server.listen({ host: spec.host, port: spec.port, exclusive: true }, () => (server.off('error', fail), ok()));
        });
        const a = server.address();
        if (a !== null && typeof a !== 'string') spec = { ...spec, port: a.port };
      }
      if (spec.protocols.includes('udp')) {
        const sock = createSocket({ type: isIPv6(spec.host) ? 'udp6' : 'udp4' });
        udp = sock;
        await new Promise<void>((ok, fail) => {
          sock.once('error', fail);
          sock.bind({ address: spec.host, port: spec.port, exclusive: true }, () => (sock.off('error', fail), ok()));
        });
        spec = { ...spec, port: sock.address().port };
        const bound = spec;
        sock.on('message', (msg, rinfo) => this.onDatagram(bound, sock, udpFlows, msg, rinfo.address, rinfo.port));
      }
    } catch (e) {
      tcp?.close();
      udp?.close();
      throw e;
    }
    this.listeners.set(listenKey(spec.host, spec.port), { spec, tcp, udp, udpFlows });
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
    if (l.tcp?.listening === true) out.push('tcp');
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

  /** An accepted TCP connection: plain, or (an N6 endpoint) after its TLS handshake, with the proven identity. */
  private accept(spec: EndpointSpec, raw: Socket): void {
    raw.on('error', () => undefined);
    if (spec.n6Server === undefined) return this.acceptTcp(spec, raw, raw, null);
    raw.resume();
    n6Accept(
      raw,
      spec.n6Server,
      (stream, peer) => {
        if (peer === null) {
          // no Ed25519 certificate: not a node; refused before any flow exists
          this.refuse('unknown-peer');
          stream.destroy();
          return;
        }
        stream.pause();
        this.acceptTcp(spec, stream, raw, peer);
      },
      () => this.refuse('n6-handshake'),
    );
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
      host: to.host,
      port: to.port,
      allowHalfOpen: true,
      ...(spec.dialFrom === undefined ? {} : { localAddress: spec.dialFrom }),
    });
    upRaw.on('error', () => undefined);
    const n6 = spec.n6Client;
    const up: Socket = n6 === undefined ? upRaw : n6Dial(upRaw, n6.credentials);
    f.upstream = up;
    f.upstreamRaw = upRaw;
    f.open++;
    up.on('error', () => undefined);
    up.on('close', () => this.socketClosed(f));
    up.on(n6 === undefined ? 'connect' : 'secureConnect', () => {
      if (n6 !== undefined) {
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
    msg: Buffer,
    address: string,
    port: number,
  ): void {
    const key = `${address}|${port}`;
    let f = udpFlows.get(key);
    if (f === undefined) {
      const peer = spec.peerOf(address, port, 'udp', null);
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
      if (!this.pass(nf, 'dial-start')) return;
      const to = spec.upstream(nf.flow);
      if (to === null) return this.endOnOwn(nf);
      const up = createSocket({ type: isIPv6(to.host) ? 'udp6' : 'udp4' });
      nf.upstream = up;
      nf.open++;
      up.on('error', () => undefined);
      up.on('close', () => {
        udpFlows.delete(key);
        this.socketClosed(nf);
      });
      up.on('message', (reply) => {
        if (!this.pass(nf, 'inbound-delivery') || !this.pass(nf, 'udp-send')) return;
        this.counters.forwardedBytes += reply.length;
        sock.send(reply, port, address);
      });
      const dial = (): void =>
        up.connect(to.port, to.host, () => {
          if (!this.pass(nf, 'dial-complete')) return;
          nf.upstreamReady = true;
          for (const item of nf.queue.splice(0)) {
            if (this.engine.checkDequeued(item.stamp) !== 'allow') {
              this.counters.droppedQueued++;
              continue;
            }
            if (!this.pass(nf, 'udp-send')) return;
            this.counters.forwardedBytes += item.data.length;
            up.send(item.data);
          }
        });
      if (spec.dialFrom === undefined) dial();
      else up.bind({ address: spec.dialFrom, port: 0 }, dial);
    }
    if (!this.pass(f, 'inbound-delivery')) return;
    if (!f.upstreamReady) {
      f.queue.push({ stamp: this.engine.stamp(f.flow), data: msg });
      return;
    }
    if (!this.pass(f, 'udp-send')) return;
    this.counters.forwardedBytes += msg.length;
    (f.upstream as UdpSocket).send(msg);
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
      const up = f.upstream as UdpSocket | null;
      f.upstream = null;
      if (up !== null)
        up.close(); // its 'close' event retires the flow
      else this.retireIfClosed(f);
    }
    this.teardownLog.push({ step: 'delete-associations', flowIds });
  }
}

const listenKey = (host: string, port: number): string => `${host}|${port}`;

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

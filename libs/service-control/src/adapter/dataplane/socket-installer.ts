// The real ListenerInstaller (issue 20): `install` binds the endpoint's TCP and UDP sockets through the
// SocketForwarder (P is exclusive across protocols, I1: both are bound), `observe` answers from the kernel's view of
// the bound sockets — never from the install intent — and `remove` tears the endpoint's flows down (gate first) before
// closing its sockets. Decision 0260.
import type { Bytes } from '../../domain/bytes.js';
import { endpointKey } from '../../domain/port-endpoint.js';
import type { ServiceRef } from '../../domain/ids.js';
import type { ListenerInstaller } from '../../application/port-arbiter.js';
import type { Backend, EndpointId, FlowProtocol } from '../../permit/types.js';
import type { Flow } from '../../permit/engine.js';
import type { EndpointSpec, SocketForwarder } from './socket-forwarder.js';
import type { N6Credentials } from './n6-transport.js';

export interface SocketInstallerConfig {
  readonly forwarder: SocketForwarder;
  /** The address this node's publisher endpoints bind (its N6 address). */
  readonly hostOf: (publisher: Bytes) => string;
  /** The engine's endpoint name for (publisher, P) — the same the lease driver gives the engine its owner under. */
  readonly endpointOf: (publisher: Bytes, port: bigint) => EndpointId;
  readonly peerOf: EndpointSpec['peerOf'];
  /** N6 (decision 0263): the endpoint's TCP connections are TLS 1.3 with these credentials, peers proven by key. */
  readonly n6Server?: N6Credentials;
  /** Defaults to the flow's own backend (a publisher flow). */
  readonly upstream?: (flow: Flow) => Backend | null;
  readonly protocols?: readonly FlowProtocol[];
}

export class SocketListenerInstaller implements ListenerInstaller {
  private readonly owners = new Map<string, ServiceRef>();
  constructor(private readonly c: SocketInstallerConfig) {}

  install = async (publisher: Bytes, port: bigint, owner: ServiceRef): Promise<void> => {
    const key = endpointKey(publisher, port);
    const host = this.c.hostOf(publisher);
    if (this.c.forwarder.boundPort(host, Number(port)) !== null) await this.c.forwarder.unlisten(host, Number(port));
    this.owners.delete(key);
    await this.c.forwarder.listen({
      endpoint: this.c.endpointOf(publisher, port),
      host,
      port: Number(port),
      protocols: this.c.protocols ?? ['tcp', 'udp'],
      peerOf: this.c.peerOf,
      upstream: this.c.upstream ?? ((f) => f.backend),
      ...(this.c.n6Server === undefined ? {} : { n6Server: this.c.n6Server }),
    });
    this.owners.set(key, owner);
  };

  remove = async (publisher: Bytes, port: bigint): Promise<void> => {
    this.owners.delete(endpointKey(publisher, port));
    await this.c.forwarder.unlisten(this.c.hostOf(publisher), Number(port));
  };

  /** A conflicting local listener shows up as a failed bind (EADDRINUSE) at install: never guessed beforehand. */
  localConflict = (): boolean => false;

  observe = (publisher: Bytes, port: bigint): ServiceRef | null => {
    const owner = this.owners.get(endpointKey(publisher, port));
    if (owner === undefined) return null;
    return this.c.forwarder.boundPort(this.c.hostOf(publisher), Number(port)) === Number(port) ? owner : null;
  };

  /** The protocols the kernel has bound on the endpoint (the `installed_protocols` proof is observed, not copied). */
  observedProtocols = (publisher: Bytes, port: bigint): FlowProtocol[] =>
    this.c.forwarder.boundProtocols(this.c.hostOf(publisher), Number(port));
}

// Fixtures for the permit-engine tests: a fake boot-time clock (tests only), a settable ordinary policy, keys,
// endpoints, tuples and a helper that runs one logical request → verified receipt.
import {
  type ApplyOutcome,
  type Backend,
  type BootClock,
  BootClockError,
  type EndpointOwner,
  type FiveTuple,
  type FlowProtocol,
  type OrdinaryDecision,
  type OrdinaryPolicy,
  type PendingRequest,
  PermitEngine,
  type PermitKey,
  type RequestEcho,
  SimulatedForwarder,
  type SourceGrant,
  type TeardownPlan,
} from '../src/permit/index.js';
import { type ServiceRef, serviceRefText } from '../src/domain/ids.js';
import { id16, id32 } from './helpers.js';

/** A fake boot-time clock: time moves only when the test says so; it can be made to fail or to go backwards. */
export class FakeBootClock implements BootClock {
  t = 1_000_000;
  broken = false;
  constructor(readonly resolutionMs = 10) {}
  nowMs(): number {
    if (this.broken) throw new BootClockError('fake clock failure');
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

export class SettablePolicy implements OrdinaryPolicy {
  decision: OrdinaryDecision = 'allow';
  decide(): OrdinaryDecision {
    return this.decision;
  }
}

export const PUBLISHER = id32(1);
export const CONSUMER = id32(2);
export const CONSUMER_2 = id32(3);
export const NSD = id16(90);
export const NETWORK = id16(91);
export const ref = (n: number): ServiceRef => ({ nsdId: NSD, networkId: NETWORK, serviceId: id16(n) });
export const pubKey = (n: number): PermitKey => ({
  scope: { identity: PUBLISHER, nsdId: NSD, networkId: NETWORK },
  serviceRef: ref(n),
  role: 'publisher',
});
export const consKey = (n: number, identity = CONSUMER): PermitKey => ({
  scope: { identity, nsdId: NSD, networkId: NETWORK },
  serviceRef: ref(n),
  role: 'consumer',
});
export const pubEndpoint = (n: number): string => `[fd7a::1]:${40000 + n}`;
export const vipEndpoint = (n: number): string => `[fd00:vip::${n}]:${40000 + n}`;
export const owner = (key: PermitKey): EndpointOwner => ({ key, publisherIdentity: PUBLISHER });

let tupleCounter = 0;
export const tuple = (protocol: FlowProtocol = 'tcp', remotePort = 50000 + tupleCounter++): FiveTuple => ({
  protocol,
  localAddress: 'fd7a::1',
  localPort: 40001,
  remoteAddress: 'fd7a::2',
  remotePort,
});

export interface Rig {
  readonly clock: FakeBootClock;
  readonly policy: SettablePolicy;
  readonly engine: PermitEngine;
  readonly fw: SimulatedForwarder;
  /** The publisher scope's complete Grant set as the last snapshot carried it. */
  grants: SourceGrant[];
}

export const rig = (): Rig => {
  const clock = new FakeBootClock();
  const policy = new SettablePolicy();
  const engine = new PermitEngine(clock, policy);
  return { clock, policy, engine, fw: new SimulatedForwarder(engine), grants: [] };
};

let seqCounter = 1n;
export interface RequestOptions {
  readonly epoch?: bigint;
  readonly session?: bigint;
  readonly seq?: bigint;
  readonly backend?: Backend | null;
}

export const echoFor = (key: PermitKey, o: RequestOptions = {}): RequestEcho => {
  const seq = o.seq ?? seqCounter++;
  return {
    requestId: id16(Number(seq % 1_000_000n) + 1000),
    authorityEpoch: o.epoch ?? 1n,
    runtimeGeneration: 1n,
    runtimeId: id16(7),
    sessionSeq: o.session ?? 1n,
    serviceRef: key.serviceRef,
    listenerRevision: 1n,
    intentDigest: id32(77),
    seq,
    snapshotRevision: key.role === 'consumer' ? 3n : null,
    snapshotDigest: key.role === 'consumer' ? id32(33) : null,
  };
};

export const begin = (r: Rig, key: PermitKey, o: RequestOptions = {}): PendingRequest => {
  const p = r.engine.beginRequest(key, {
    kind: key.role === 'publisher' ? 'lease.refresh' : 'lease.acquire',
    echo: echoFor(key, o),
    backend: key.role === 'publisher' ? (o.backend === undefined ? BACKEND_1 : o.backend) : null,
  });
  if (p === 'clock-failed') throw new Error('clock failed');
  return p;
};

export const receipt = (r: Rig, p: PendingRequest, remainingMs = 30_000): ApplyOutcome =>
  r.engine.applyReceipt(p, { echo: p.echo, grantId: id16(555), remainingMs });

/** One logical request answered at once with `remainingMs`. */
export const grant = (r: Rig, key: PermitKey, remainingMs = 30_000, o: RequestOptions = {}): ApplyOutcome =>
  receipt(r, begin(r, key, o), remainingMs);

export const BACKEND_1: Backend = { host: '10.0.0.1', port: 8080 };
export const BACKEND_2: Backend = { host: '10.0.0.2', port: 8080 };

/** A publisher service n with endpoint ownership, the given sources granted and a fresh permit. */
export const publishService = (
  r: Rig,
  n: number,
  sources: readonly Uint8Array[] = [CONSUMER],
  version = 1n,
): PermitKey => {
  const key = pubKey(n);
  r.engine.setEndpointOwners(pubEndpoint(n), [owner(key)]);
  setSources(r, n, sources, version);
  const out = grant(r, key);
  if (out.outcome !== 'accepted') throw new Error(`grant refused: ${out.reason}`);
  return key;
};

/** Replace service n's source Grants in the scope's complete Grant set and apply the resulting snapshot. */
export const setSources = (
  r: Rig,
  n: number,
  sources: readonly Uint8Array[],
  version = 1n,
  protocols: readonly FlowProtocol[] = ['tcp', 'udp'],
): TeardownPlan[] => {
  const key = pubKey(n);
  r.grants = [
    ...r.grants.filter((g) => serviceRefText(g.serviceRef) !== serviceRefText(key.serviceRef)),
    ...sources.map((s) => ({
      serviceRef: key.serviceRef,
      publisherIdentity: PUBLISHER,
      consumerIdentity: s,
      grantVersion: version,
      protocols,
    })),
  ];
  return r.engine.applySnapshotGrants(key.scope, r.grants);
};

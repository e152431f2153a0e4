// Plain data of the flow-permit library (spec §6): permit keys, endpoints, flows, check points, verdicts, teardown
// plans and retirement receipts. Verdicts are interned strings so that a check allocates nothing.
import type { Bytes } from '../domain/bytes.js';
import { toHex } from '../domain/bytes.js';
import { type Scope, type ServiceRef, scopeKey, serviceRefText } from '../domain/ids.js';

export type PermitRole = 'publisher' | 'consumer';
export type FlowProtocol = 'tcp' | 'udp';

/**
 * `PermitKey = (scope, service_ref, role)` (spec §6.4). `scope.identity` is this node's own full identity in that
 * membership (the publisher identity for a publisher permit, the consumer identity for a consumer permit).
 */
export interface PermitKey {
  readonly scope: Scope;
  readonly serviceRef: ServiceRef;
  readonly role: PermitRole;
}

export const permitKeyText = (k: PermitKey): string => `${k.role}|${scopeKey(k.scope)}|${serviceRefText(k.serviceRef)}`;

/**
 * The durable owner of one managed endpoint (spec §6.2): consumer N6:P / VIP:P, or the publisher's N6:P. The
 * consumer binds the same ServiceRef, the full publisher identity and the explicitly chosen NSD/Network (carried by
 * `key.scope`); the publisher binds its full local identity + P to exactly one service.
 */
export interface EndpointOwner {
  readonly key: PermitKey;
  readonly publisherIdentity: Bytes;
}

/** An endpoint address as the forwarder names it, e.g. `[fd7a::1]:40001` (P is exclusive across protocols, I1). */
export type EndpointId = string;

export interface Backend {
  readonly host: string;
  readonly port: number;
}

export interface FiveTuple {
  readonly protocol: FlowProtocol;
  readonly localAddress: string;
  readonly localPort: number;
  readonly remoteAddress: string;
  readonly remotePort: number;
}

export const fiveTupleKey = (t: FiveTuple): string =>
  `${t.protocol}|${t.localAddress}|${t.localPort}|${t.remoteAddress}|${t.remotePort}`;

/**
 * The check points of spec §6.6. Layer 1 (connection/socket operations): dial start/complete, every TCP read/write
 * poll, before every UDP send, after waking from a wait queue or "socket writable". Layer 2 (packet delivery):
 * authenticated inbound delivery, pre-encryption outbound, the service-stack/host-app boundary. Plus the dequeue of a
 * queued item, fragment and ICMP association and the final (Transport) send of a Path marker.
 */
export const IO_POINTS = [
  'dial-start',
  'dial-complete',
  'tcp-read-poll',
  'tcp-write-poll',
  'udp-send',
  'wake',
  'inbound-delivery',
  'outbound-pre-encryption',
  'host-boundary',
  'dequeue',
  'fragment',
  'icmp',
  'final-send',
] as const;
export type IoPoint = (typeof IO_POINTS)[number];

/** Why a check or an open was refused. Every refusal is final for the packet; none falls back to L3/Exit/another service. */
export type DenyReason =
  | 'clock-failed'
  | 'ownership'
  | 'ambiguous-endpoint'
  | 'no-permit'
  | 'expired'
  | 'revoked'
  | 'epoch-changed'
  | 'old-generation'
  | 'flow-dead'
  | 'no-source-grant'
  | 'source-grant-changed'
  | 'protocol-not-allowed'
  | 'wrong-publisher'
  | 'ordinary-policy'
  | 'intent-change-pending'
  | 'five-tuple-in-use'
  | 'stale-queue-item'
  | 'stale-fragment'
  | 'stale-marker';

export type Verdict = 'allow' | DenyReason;

/**
 * The ordinary policy of the service's Network (Node L3/ACL), chosen by the ServiceRef of the flow's permit (spec §6.3).
 * - `allow`: an explicit allow (required in an Enforce-mode Network)
 * - `pass`: Enforce mode, the packet is not bound by any rule — NOT a permission ("未绑定报文的 Pass 不是许可")
 * - `deny`: refused by the ordinary policy
 * - `not-enforced`: Observe, Disabled or unconfigured Node L3 — keeps its original semantics and never overrides the
 *   service check (the service check still runs)
 */
export type OrdinaryDecision = 'allow' | 'pass' | 'deny' | 'not-enforced';

/** What the ordinary policy sees of a flow. */
export interface FlowView {
  readonly id: number;
  readonly key: PermitKey;
  readonly protocol: FlowProtocol;
  readonly peerIdentity: Bytes;
  readonly tuple: FiveTuple;
}

export interface OrdinaryPolicy {
  decide(flow: FlowView, point: IoPoint): OrdinaryDecision;
}

/** The five steps of the serial revocation cut (spec §6.7), in their only allowed order. */
export const TEARDOWN_STEPS = ['gate', 'cancel', 'drop-queues', 'abort-tcp', 'delete-associations'] as const;
export type TeardownStepName = (typeof TEARDOWN_STEPS)[number];

export interface TeardownStep {
  readonly step: TeardownStepName;
  /** The flows this step acts on (`abort-tcp` lists the TCP flows only). */
  readonly flowIds: readonly number[];
}

export type TeardownReason =
  'revoked' | 'expired' | 'source-revoked' | 'source-changed' | 'epoch-changed' | 'clock-failed' | 'ownership-changed';

/**
 * What a data plane must do, in order, for one revoked/expired service or source. The engine has already done step 1
 * (the gate: the generation is void and every check refuses) before returning the plan.
 */
export interface TeardownPlan {
  readonly key: PermitKey;
  /** Present when only one source (consumer identity) of a publisher permit is affected. */
  readonly source: Bytes | null;
  readonly reason: TeardownReason;
  readonly flowIds: readonly number[];
  readonly steps: readonly TeardownStep[];
  /** Reclaim target: 1 s from the local revocation/expiry (spec §5.17). */
  readonly reclaimByMs: number;
}

/**
 * The data plane's evidence for one flow after abort. Only `terminated` (the private stack sink closed and the source
 * read and discarded until BrokenPipe/EOF: the driver ended and its output queue is isolated) retires the flow; a
 * forced cancellation, or no receipt at all, does not (spec §6.7).
 */
export type RetirementReceipt =
  | { readonly kind: 'terminated'; readonly flowId: number; readonly evidence: 'eof' | 'broken-pipe' }
  | { readonly kind: 'forced-cancel'; readonly flowId: number };

export type RetirementOutcome =
  'retired' | 'flow-live' | 'forced-cancel-is-not-retirement' | 'unknown-flow' | 'flow-mismatch';

/** A queued item, an ICMP association or anything else stamped with its flow and permit generation at creation. */
export interface GenerationStamp {
  readonly flowId: number;
  readonly generation: number;
}

/** Fragment association key: authenticated source, direction and permit generation (spec §6.6). */
export interface FragmentKey extends GenerationStamp {
  readonly source: string;
  readonly direction: 'inbound' | 'outbound';
}

/** A non-reusable local Path marker bound to (flow, permit generation), checked again at the actual send. */
export interface PathMarker extends GenerationStamp {
  readonly markerId: number;
}

export const identityText = (b: Bytes): string => toHex(b);

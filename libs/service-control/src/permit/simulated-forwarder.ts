// A STAND-IN for the real data plane (which needs nsplane, WireGuard and a TUN: out of scope, spec §1.3, §8.4):
// simulated TCP/UDP flows, per-flow queues, fragment reassembly, ICMP associations and Path markers, all driven
// through the PermitEngine exactly where a real forwarder would call it. It moves no packets; it records what it
// delivered, dropped and tore down, so tests (and the end-to-end control-plane test) can assert on the evidence.
import type { Bytes } from '../domain/bytes.js';
import { applyTeardown, type PermitDataPlane } from './dataplane.js';
import type { Flow, OpenOutcome, OpenRequest, PermitEngine } from './engine.js';
import type {
  FragmentKey,
  GenerationStamp,
  IoPoint,
  PathMarker,
  RetirementOutcome,
  TeardownPlan,
  TeardownStepName,
  Verdict,
} from './types.js';

export type SimulatedDirection = 'inbound' | 'outbound';

export interface SimulatedItem {
  readonly stamp: GenerationStamp;
  readonly payload: string;
  readonly direction: SimulatedDirection;
}

export interface SimulatedDelivery {
  readonly flowId: number;
  readonly payload: string;
  readonly direction: SimulatedDirection;
  /** Publisher flows: the backend the payload went to. */
  readonly backend: string | null;
}

export interface SimulatedTeardownEvent {
  readonly step: TeardownStepName;
  readonly flowIds: readonly number[];
}

export class SimulatedForwarder implements PermitDataPlane {
  readonly delivered: SimulatedDelivery[] = [];
  readonly dropped: Array<{ readonly payload: string; readonly verdict: Verdict }> = [];
  readonly teardownLog: SimulatedTeardownEvent[] = [];
  private readonly flows = new Map<number, Flow>();
  private readonly queues = new Map<number, SimulatedItem[]>();
  private readonly reassembly = new Map<string, string[]>();
  private readonly udpMappings = new Set<number>();
  private readonly tasks = new Set<number>();
  private readonly awaitingDriverEnd = new Set<number>();
  private readonly stuckDrivers = new Set<number>();
  constructor(readonly engine: PermitEngine) {}

  /** Accept a TCP connection / first UDP datagram at a service endpoint: open, then check dial start and complete. */
  accept(req: OpenRequest): OpenOutcome {
    const out = this.engine.openFlow(req);
    if (out.verdict !== 'allow') return out;
    const flow = (out as { readonly flow: Flow }).flow;
    for (const point of ['dial-start', 'dial-complete'] as const) {
      const v = this.engine.check(flow, point);
      if (v !== 'allow') return { verdict: v };
    }
    this.flows.set(flow.id, flow);
    this.queues.set(flow.id, []);
    this.tasks.add(flow.id);
    if (flow.protocol === 'udp') this.udpMappings.add(flow.id);
    return out;
  }

  /** Write/send on a flow: checked at the write poll / before the UDP send, then queued (stamped). */
  send(flow: Flow, payload: string, direction: SimulatedDirection = 'outbound'): Verdict {
    const point: IoPoint = flow.protocol === 'tcp' ? 'tcp-write-poll' : 'udp-send';
    const v = this.engine.check(flow, point);
    if (v !== 'allow') {
      this.dropped.push({ payload, verdict: v });
      return v;
    }
    this.enqueue({ stamp: this.engine.stamp(flow), payload, direction });
    return v;
  }

  /** Put an item in a flow's queue as it sits there (used to age items across a revocation or a sleep). */
  enqueue(item: SimulatedItem): void {
    const q = this.queues.get(item.stamp.flowId) ?? [];
    q.push(item);
    this.queues.set(item.stamp.flowId, q);
  }

  queued(flowId: number): number {
    return this.queues.get(flowId)?.length ?? 0;
  }

  /**
   * Drain every queue: each item is re-checked on dequeue by its own stamp, then (outbound) passes the pre-encryption
   * check, takes a Path marker and is checked again at the final send.
   */
  pump(): number {
    let n = 0;
    for (const [flowId, q] of this.queues) {
      while (q.length > 0) {
        const item = q.shift() as SimulatedItem;
        const v = this.engine.checkDequeued(item.stamp);
        if (v !== 'allow') {
          this.dropped.push({ payload: item.payload, verdict: v });
          continue;
        }
        const flow = this.engine.flow(flowId) as Flow;
        if (item.direction === 'outbound') {
          const marker = this.engine.issueMarker(flow);
          if (marker === null) {
            this.dropped.push({ payload: item.payload, verdict: this.engine.check(flow, 'outbound-pre-encryption') });
            continue;
          }
          const fv = this.finalSend(marker);
          if (fv !== 'allow') {
            this.dropped.push({ payload: item.payload, verdict: fv });
            continue;
          }
        } else {
          const hv = this.engine.check(flow, 'host-boundary');
          if (hv !== 'allow') {
            this.dropped.push({ payload: item.payload, verdict: hv });
            continue;
          }
        }
        this.delivered.push({ flowId, payload: item.payload, direction: item.direction, backend: backendText(flow) });
        n++;
      }
    }
    return n;
  }

  /** Authenticated inbound delivery of one packet (checked, then queued toward the host side). */
  receive(flow: Flow, payload: string): Verdict {
    const v = this.engine.check(flow, 'inbound-delivery');
    if (v !== 'allow') {
      this.dropped.push({ payload, verdict: v });
      return v;
    }
    this.enqueue({ stamp: this.engine.stamp(flow), payload, direction: 'inbound' });
    return v;
  }

  /** The Transport's actual non-blocking send of a marked packet: checked again, nothing queued in between. */
  finalSend(marker: PathMarker): Verdict {
    return this.engine.checkMarker(marker);
  }

  /** One fragment: joins its reassembly (keyed by source, direction, generation) only if the key is live. */
  fragment(key: FragmentKey, part: string, last: boolean): Verdict {
    const v = this.engine.checkFragment(key);
    const k = fragmentText(key);
    if (v !== 'allow') {
      this.dropped.push({ payload: part, verdict: v });
      return v;
    }
    const parts = this.reassembly.get(k) ?? [];
    parts.push(part);
    this.reassembly.set(k, parts);
    if (last) {
      this.reassembly.delete(k);
      this.enqueue({
        stamp: { flowId: key.flowId, generation: key.generation },
        payload: parts.join(''),
        direction: key.direction,
      });
    }
    return v;
  }

  reassemblyEntries(): number {
    return this.reassembly.size;
  }

  icmp(assoc: GenerationStamp, payload: string): Verdict {
    const v = this.engine.checkIcmp(assoc);
    if (v !== 'allow') this.dropped.push({ payload, verdict: v });
    return v;
  }

  hasUdpMapping(flowId: number): boolean {
    return this.udpMappings.has(flowId);
  }

  hasTask(flowId: number): boolean {
    return this.tasks.has(flowId);
  }

  /** Make a flow's driver never end (a delayed/stuck stack driver): its teardown ends in a forced cancel. */
  markDriverStuck(flowId: number): void {
    this.stuckDrivers.add(flowId);
  }

  /** Apply a plan in order and log each step. */
  apply(plans: TeardownPlan | readonly TeardownPlan[]): void {
    for (const p of Array.isArray(plans) ? (plans as readonly TeardownPlan[]) : [plans as TeardownPlan])
      applyTeardown(p, this);
  }

  /**
   * Let the aborted drivers finish: a normal driver reads and discards its source until EOF and yields a
   * `terminated` receipt; a stuck one is force-cancelled (not retirement). Each receipt goes to the engine.
   */
  finishDrivers(): Map<number, RetirementOutcome> {
    const out = new Map<number, RetirementOutcome>();
    for (const id of [...this.awaitingDriverEnd]) {
      const outcome = this.stuckDrivers.has(id)
        ? this.engine.recordRetirement({ kind: 'forced-cancel', flowId: id })
        : this.engine.recordRetirement({ kind: 'terminated', flowId: id, evidence: 'eof' });
      out.set(id, outcome);
      if (outcome === 'retired') {
        this.awaitingDriverEnd.delete(id);
        this.flows.delete(id);
        this.queues.delete(id);
      }
    }
    return out;
  }

  // PermitDataPlane
  closeGate(flowIds: readonly number[]): void {
    this.teardownLog.push({ step: 'gate', flowIds });
  }
  cancelTasks(flowIds: readonly number[]): void {
    for (const id of flowIds) {
      this.tasks.delete(id);
      this.awaitingDriverEnd.add(id);
    }
    this.teardownLog.push({ step: 'cancel', flowIds });
  }
  dropQueues(flowIds: readonly number[]): void {
    for (const id of flowIds) {
      for (const item of this.queues.get(id) ?? []) this.dropped.push({ payload: item.payload, verdict: 'flow-dead' });
      this.queues.set(id, []);
    }
    this.teardownLog.push({ step: 'drop-queues', flowIds });
  }
  abortTcp(flowIds: readonly number[]): void {
    this.teardownLog.push({ step: 'abort-tcp', flowIds });
  }
  deleteAssociations(flowIds: readonly number[]): void {
    const ids = new Set(flowIds);
    for (const id of flowIds) this.udpMappings.delete(id);
    for (const k of [...this.reassembly.keys()]) if (ids.has(Number(k.split('|')[0]))) this.reassembly.delete(k);
    this.teardownLog.push({ step: 'delete-associations', flowIds });
  }
}

const backendText = (flow: Flow): string | null =>
  flow.backend === null ? null : `${flow.backend.host}:${flow.backend.port}`;
const fragmentText = (k: FragmentKey): string => `${k.flowId}|${k.source}|${k.direction}|${k.generation}`;

/** Convenience for simulated peers in tests and the e2e: a 32-byte identity filled with one byte. */
export const simulatedIdentity = (fill: number): Bytes => new Uint8Array(32).fill(fill);

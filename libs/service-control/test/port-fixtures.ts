// Test fixtures for the P tests: ServiceRefs, proposals and a seeded RNG.
import type { Schedule } from '../src/application/port-recovery.js';
import type { ServiceRef } from '../src/domain/ids.js';
import type { ProposalRef } from '../src/domain/port-endpoint.js';
import { id16, id32 } from './helpers.js';

export const PUB = id32(1);
export const PUB2 = id32(2);

/** A ServiceRef from NSD `nsd` / Network `net` / service `svc` (small integers). */
export const sref = (svc: number, nsd = 1, net = 1): ServiceRef => ({
  nsdId: id16(1000 + nsd),
  networkId: id16(2000 + net),
  serviceId: id16(svc),
});

let pid = 1;
export const proposal = (ref: ServiceRef, port: bigint, seq = 1n, over: Partial<ProposalRef> = {}): ProposalRef => ({
  serviceRef: ref,
  listenerRevision: 1n,
  intentDigest: new Uint8Array(32).fill(seq > 255n ? 255 : Number(seq)),
  allocationRound: 1n,
  proposalSeq: seq,
  proposalId: id16(500_000 + pid++),
  port,
  ...over,
});

/** mulberry32: a small deterministic uniform RNG in [0, 1). */
export const seededRng = (seed: number): (() => number) => {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
};

/** A controlled scheduler for B's port timers (tests fire them; no waiting, no timing assertions). */
export const controlledSchedule = () => {
  const timers = new Set<{ ms: number; fn: () => void }>();
  const schedule: Schedule = (ms, fn) => {
    const t = { ms, fn };
    timers.add(t);
    return () => void timers.delete(t);
  };
  /** Fire every pending timer once (those scheduled while firing wait for the next call); returns their delays. */
  const fire = () => {
    const due = [...timers];
    timers.clear();
    for (const t of due) t.fn();
    return due.map((t) => t.ms);
  };
  return { schedule, fire, pending: () => [...timers].map((t) => t.ms) };
};

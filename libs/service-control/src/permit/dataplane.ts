// The seam between the pure permit engine and a data plane (spec §1.3, §6.6, §6.7). The real forwarder (nsplane's
// public PacketFilter/NetStack/Transport interfaces, out of scope here) would:
// - on accept / dial: `engine.openFlow(...)`, then `engine.check(flow, 'dial-start' | 'dial-complete')`;
// - on every TCP read/write poll, before every UDP send, after every wake-up: `engine.check(flow, point)`;
// - at authenticated inbound delivery, pre-encryption outbound and the stack/host boundary: `engine.check(...)`;
// - stamp every queued item with `engine.stamp(flow)` and call `engine.checkDequeued(stamp)` on dequeue;
// - key fragment reassembly by `engine.fragmentKey(flow, direction)` and check each fragment with `checkFragment`;
// - check ICMP associations with `engine.checkIcmp(stamp)`;
// - take a Path marker with `engine.issueMarker(flow)` (after the ordinary-policy and service checks, since
//   `inject_outbound_on` skips the outbound filter chain) and call `engine.checkMarker(marker)` at the actual
//   non-blocking UDP send; no WireGuard session ⇒ drop (service data is never parked in handshake queues);
// - apply every TeardownPlan the engine returns (revoke, snapshot grants, epoch change, tick/resume,
//   takeTeardowns) through `applyTeardown`, and report each flow's retirement evidence with `recordRetirement`.
import type { TeardownPlan } from './types.js';

/** The teardown operations a data plane provides, called in the order of spec §6.7 by `applyTeardown`. */
export interface PermitDataPlane {
  /** 1. Close the forwarder's own gate for these flows (the engine's gate is already closed). */
  closeGate(flowIds: readonly number[]): void;
  /** 2. Cancel dials and both directions of tasks. */
  cancelTasks(flowIds: readonly number[]): void;
  /** 3. Drop every queued item of these flows (queued in ns ≠ delivered). */
  dropQueues(flowIds: readonly number[]): void;
  /** 4. Abort the TCP connections (RST may be sent; RST success is not completion). */
  abortTcp(flowIds: readonly number[]): void;
  /** 5. Delete UDP/NAT mappings, fragment reassembly state and Path markers. */
  deleteAssociations(flowIds: readonly number[]): void;
}

/** Run a plan's steps strictly in order. */
export const applyTeardown = (plan: TeardownPlan, dataPlane: PermitDataPlane): void => {
  for (const { step, flowIds } of plan.steps) {
    switch (step) {
      case 'gate':
        dataPlane.closeGate(flowIds);
        break;
      case 'cancel':
        dataPlane.cancelTasks(flowIds);
        break;
      case 'drop-queues':
        dataPlane.dropQueues(flowIds);
        break;
      case 'abort-tcp':
        dataPlane.abortTcp(flowIds);
        break;
      case 'delete-associations':
        dataPlane.deleteAssociations(flowIds);
        break;
    }
  }
};

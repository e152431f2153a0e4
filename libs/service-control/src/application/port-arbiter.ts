// A's P arbitration (spec §5.10, §5.12, §5.13, §5.15): every received proposal is registered durably, then decided at
// the single cut point; MayInstall is committed synchronously BEFORE the injected installer is called; cancels write
// the TerminatedPure fence before answering; a corrupt or incomplete table answers `state-inconsistent` (B then holds
// the proposal as RecoveryRequired). The answers are `port.result` bodies, sent by the caller after this returns.
import { Either } from 'effect';
import type { PortResultBodyWire } from '../api/port.js';
import { serviceRefFromWire, serviceRefToWire } from '../api/convert.js';
import type { ProposalRefWire } from '../api/common.js';
import type { Bytes } from '../domain/bytes.js';
import { ServiceControlError } from '../domain/errors.js';
import { type ServiceRef, serviceRefEqual } from '../domain/ids.js';
import {
  type Endpoint,
  type EndpointAnswer,
  type EndpointTable,
  type ProposalRef,
  type Step,
  arbitrate,
  cancelProposal,
  closeAllGates,
  endpointKey,
  installedEndpoint,
  markGate,
  markInstallFailed,
  markInstalled,
  queryProposal,
  recoveryPlan,
  registerProposal,
} from '../domain/port-endpoint.js';

/** A's storage port for the endpoint table: one serial, synchronously durable transaction per call. */
export interface EndpointStore {
  /** Run one pure step under the table's write lock and commit it; a thrown error rolls back. */
  readonly transact: <A>(label: string, step: (t: EndpointTable) => Step<A>) => A;
  readonly read: () => EndpointTable;
  readonly close: () => void;
}

/** What the data plane is asked to do (the real one is out of scope; see `SimulatedListenerInstaller`). */
export interface ListenerInstaller {
  /** Install N6:P and the forwarding with the data gate CLOSED. Throws on failure. */
  readonly install: (publisher: Bytes, port: bigint, owner: ServiceRef) => Promise<void>;
  /** Remove a listener (tombstone, revocation): gate closed first, then teardown. */
  readonly remove: (publisher: Bytes, port: bigint) => Promise<void>;
  /** Whether a local ordinary config or system listener holds the port (blocks MayInstall). */
  readonly localConflict: (publisher: Bytes, port: bigint) => boolean;
  /**
   * The ServiceRef the listener on N6:P is actually installed for right now, or null when none is installed there —
   * observed from the data plane, not from the endpoint table (which a restart or a failed reinstall leaves behind).
   */
  readonly observe: (publisher: Bytes, port: bigint) => ServiceRef | null;
}

/** A stand-in data plane that records calls in memory; failures can be injected. Never a real listener. */
export class SimulatedListenerInstaller implements ListenerInstaller {
  readonly calls: { readonly op: 'install' | 'remove'; readonly port: bigint }[] = [];
  /** `publisher-hex:P` → the ServiceRef installed there (in memory: nothing survives the process). */
  readonly installed = new Map<string, ServiceRef>();
  failNext = false;
  constructor(private readonly systemPorts: ReadonlySet<bigint> = new Set()) {}
  install = async (publisher: Bytes, port: bigint, owner: ServiceRef): Promise<void> => {
    this.calls.push({ op: 'install', port });
    if (this.failNext) {
      this.failNext = false;
      throw new Error('simulated install failure');
    }
    this.installed.set(endpointKey(publisher, port), owner);
  };
  remove = async (publisher: Bytes, port: bigint): Promise<void> => {
    this.calls.push({ op: 'remove', port });
    this.installed.delete(endpointKey(publisher, port));
  };
  localConflict = (_publisher: Bytes, port: bigint): boolean => this.systemPorts.has(port);
  observe = (publisher: Bytes, port: bigint): ServiceRef | null =>
    this.installed.get(endpointKey(publisher, port)) ?? null;
}

export const proposalFromWire = (w: ProposalRefWire): ProposalRef => ({
  serviceRef: serviceRefFromWire(w.service_ref),
  listenerRevision: w.listener_revision,
  intentDigest: w.intent_digest,
  allocationRound: w.allocation_round,
  proposalSeq: w.proposal_seq,
  proposalId: w.proposal_id,
  port: BigInt(w.P),
});

export const proposalToWire = (p: ProposalRef): ProposalRefWire => ({
  service_ref: serviceRefToWire(p.serviceRef),
  listener_revision: p.listenerRevision,
  intent_digest: p.intentDigest,
  allocation_round: p.allocationRound,
  proposal_seq: p.proposalSeq,
  proposal_id: p.proposalId,
  P: Number(p.port),
});

/** The `port.result` body of an answer. */
export const portResultBody = (a: EndpointAnswer): PortResultBodyWire => ({
  ...proposalToWire(a.ref),
  result: a.result,
  termination_floor: a.terminationFloor,
});

const orThrow = <A>(e: Either.Either<A, ServiceControlError>): A => {
  if (Either.isLeft(e)) throw e.left;
  return e.right;
};

/** What `recover()` did: the owned endpoints it reinstalled (gate closed; `installed: false` = the install failed, the
 * ownership is kept) and the answers of the proposals it re-arbitrated (to be sent to their NSDs). */
export interface EndpointRecoveryResult {
  readonly reinstalled: readonly {
    readonly publisher: Bytes;
    readonly port: bigint;
    readonly owner: ServiceRef;
    readonly installed: boolean;
  }[];
  readonly answers: readonly EndpointAnswer[];
}

export interface ArbiterHooks {
  /** Called after the MayInstall commit and before the install call (the M6-38 fault hook). */
  readonly beforeInstall?: (port: bigint) => void;
}

export class PortArbiter {
  constructor(
    private readonly store: EndpointStore,
    private readonly installer: ListenerInstaller,
    private readonly hooks: ArbiterHooks = {},
  ) {}

  /**
   * A proposal from a snapshot: register (commit) → arbitrate (commit, the cut point) → install only after the
   * MayInstall commit → record the install (commit). Returns every decided answer (also other memberships' proposals
   * refused at the same cut point — the caller routes each to its own NSD by its ServiceRef).
   */
  async onProposal(publisher: Bytes, ref: ProposalRef): Promise<readonly EndpointAnswer[]> {
    const reg = this.store.transact('proposed', (t) => orThrow(registerProposal(t, publisher, ref)));
    if (reg.kind === 'fenced') return [reg.answer];
    // already decided (its answer was lost, or the daemon restarted): the same answer again, nothing new decided
    if (reg.kind === 'duplicate' && reg.entry.status === 'confirmed') return [this.onQuery(publisher, ref)];
    return this.decide(publisher, ref.port);
  }

  private async decide(publisher: Bytes, port: bigint): Promise<readonly EndpointAnswer[]> {
    const conflict = this.installer.localConflict(publisher, port);
    const cut = this.store.transact('may-install', (t) => arbitrate(t, publisher, port, conflict));
    if (cut.mayInstall === null) return cut.answers;
    this.hooks.beforeInstall?.(port);
    try {
      await this.installer.install(publisher, port, cut.mayInstall.serviceRef);
    } catch {
      // the gate stays closed, the ownership is kept: apply-failed, never a pure proposal
      this.store.transact('install-failed', (t) => ({
        table: orThrow(markInstallFailed(t, publisher, port)),
        out: undefined,
      }));
      return cut.answers.map((a) =>
        a.result === 'claimed' || a.result === 'installed' ? { ...a, result: 'apply-failed' as const } : a,
      );
    }
    this.store.transact('installed', (t) => ({ table: orThrow(markInstalled(t, publisher, port)), out: undefined }));
    return cut.answers.map((a) => (a.result === 'claimed' ? { ...a, result: 'installed' as const } : a));
  }

  /** `port.cancel`: the fence (or the tombstone) commits before the answer; a tombstoned listener is removed. */
  async onCancel(publisher: Bytes, ref: ProposalRef): Promise<EndpointAnswer> {
    const ans = this.store.transact('cancel', (t) => orThrow(cancelProposal(t, publisher, ref)));
    if (ans.result === 'claimed' || ans.result === 'installed') await this.installer.remove(publisher, ref.port);
    return ans;
  }

  /** `port.query`: the current state, nothing changed (`absent` is never a release proof). */
  onQuery(publisher: Bytes, ref: ProposalRef): EndpointAnswer {
    return orThrow(queryProposal(this.store.read(), publisher, ref));
  }

  /**
   * The endpoint this proposal is installed on, or null: what a publisher's ready/refresh may prove (decision 0197).
   * Both must hold: the committed table has the endpoint InstalledClosed/Active under exactly this proposal, and the
   * data plane observes a listener installed there for its ServiceRef (after a restart nothing is, until `recover()`
   * reinstalled it; a failed reinstall leaves the table's phase but no listener). A corrupt table throws.
   */
  installed(publisher: Bytes, ref: ProposalRef): Endpoint | null {
    const ep = installedEndpoint(this.store.read(), publisher, ref);
    const actual = ep === null ? null : this.installer.observe(publisher, ref.port);
    return actual !== null && serviceRefEqual(actual, ref.serviceRef) ? ep : null;
  }

  /**
   * The data gate of an installed proposal opened (the publisher's permit was granted: InstalledClosed → Active) or
   * closed again (expiry, revocation, teardown: Active → InstalledClosed), committed on the endpoint table (spec §5.6).
   * Only the endpoint installed for exactly this proposal moves; answers the phase committed, or null when this
   * proposal is not installed there (tombstoned, replaced, never installed): nothing is written then.
   */
  setGate(publisher: Bytes, ref: ProposalRef, open: boolean): 'active' | 'installed-closed' | null {
    return this.store.transact('gate', (t) => {
      const ep = installedEndpoint(t, publisher, ref);
      if (ep === null) return { table: t, out: null };
      const want = open ? 'active' : 'installed-closed';
      if (ep.phase === want) return { table: t, out: want };
      return { table: orThrow(markGate(t, publisher, ref.port, open)), out: want };
    });
  }

  /**
   * §5.15 first step, before anything else: no endpoint stays Active from disk. Commits the closed table and answers
   * what the committed table holds: how many endpoints were Active before and how many are Active now (0).
   */
  closeGates(): { readonly closedFromDisk: number; readonly active: number } {
    const active = (t: EndpointTable): number => [...t.endpoints.values()].filter((e) => e.phase === 'active').length;
    const closedFromDisk = this.store.transact('close-gates', (t) => ({ table: closeAllGates(t), out: active(t) }));
    return { closedFromDisk, active: active(this.store.read()) };
  }

  /**
   * Recovery order (spec §5.15): load ownership and floors; keep every gate closed (no Active from disk); reinstall
   * owned endpoints with the gate closed; re-arbitrate proposals registered before a crash. Nothing is released.
   */
  async recover(): Promise<EndpointRecoveryResult> {
    this.closeGates();
    const plan = recoveryPlan(this.store.read());
    const reinstalled: { publisher: Bytes; port: bigint; owner: ServiceRef; installed: boolean }[] = [];
    for (const e of plan.reinstall) {
      if (e.owner === null) continue;
      try {
        await this.installer.install(e.publisher, e.port, e.owner);
        this.store.transact('installed', (t) => ({
          table: orThrow(markInstalled(t, e.publisher, e.port)),
          out: undefined,
        }));
        reinstalled.push({ publisher: e.publisher, port: e.port, owner: e.owner, installed: true });
      } catch (err) {
        if (err instanceof ServiceControlError) throw err;
        this.store.transact('install-failed', (t) => ({
          table: orThrow(markInstallFailed(t, e.publisher, e.port)),
          out: undefined,
        }));
        reinstalled.push({ publisher: e.publisher, port: e.port, owner: e.owner, installed: false });
      }
    }
    const answers: EndpointAnswer[] = [];
    for (const x of plan.rearbitrate) answers.push(...(await this.decide(x.publisher, x.port)));
    return { reinstalled, answers };
  }
}

// B (NSD): the P allocation inside the report transaction (spec §5.11, §5.14, §3.3); the snapshots' listener intents
// are `authority-view.ts`. An accepted report's changed rows reach the allocation record and the publisher's port
// table in the SAME fenced transaction that stores them: a new service gets its first candidate, a substantive
// declaration change opens a new round (or keeps the confirmed P), a withdrawal tombstones the P. The proposal is
// therefore committed before any snapshot carrying it is produced (issued). Decision 0150. A substantive change while
// the old proposal is unresolved is recorded as pending and opens its round when the old proposal is resolved;
// decision 0190.
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import { DeclarationCodec } from '../api/report.js';
import { type Bytes, toHex } from '../domain/bytes.js';
import { type ServiceControlError } from '../domain/errors.js';
import {
  type Allocation,
  type PortTable,
  type DeclarationFacts,
  type Rng,
  isSubstantiveChange,
  issueCandidate,
  newAllocation,
  onDeclarationChange,
  onWithdrawn,
} from '../domain/port-allocation.js';
import { demandOf, intentDigestAt } from './authority-port.js';
import type { OfferRows } from './authority-store.js';
import type { StoredService } from './service-row.js';

export interface OfferDeps {
  readonly nsdId: Bytes;
  readonly rng?: Rng;
  readonly newProposalId?: () => Bytes;
}

const factsOf = (s: StoredService): DeclarationFacts | null => {
  const d = DeclarationCodec.decode(s.declaration);
  if (Either.isLeft(d)) return null;
  return {
    mode: d.right.port_mode,
    requestedPort: d.right.requested_port === null ? null : BigInt(d.right.requested_port),
    backendPort: BigInt(d.right.backend_port),
    backendHost: new TextEncoder().encode(JSON.stringify(d.right.backend_host)),
    protocols: [...d.right.protocols].sort(),
  };
};

/** What the P allocation of a report's written rows saves: the allocation rows (in `written` order) and the table after. */
export interface OfferPlan {
  readonly allocations: readonly Allocation[];
  readonly ports: { readonly before: PortTable; readonly after: PortTable };
}

/**
 * The report's written rows against the allocation records and the publisher's port table read ahead with the report
 * (decision 0371), as the rows to save (decision 0372: the caller writes them in one statement with the report).
 * `before` holds the rows as they were before the report. Refusals of a step (pool exhausted, fixed P taken) are
 * persisted as the allocation state; they never fail the report. A corrupt allocation row throws `state-inconsistent`.
 */
export const planOffer = (
  d: OfferDeps,
  publisher: Bytes,
  before: ReadonlyMap<string, StoredService>,
  written: readonly StoredService[],
  read: OfferRows,
): Either.Either<OfferPlan, ServiceControlError> => {
  const rng = d.rng ?? Math.random;
  const newId = d.newProposalId ?? (() => new Uint8Array(randomBytes(16)));
  const live = (s: StoredService) => s.state !== 'withdrawn';
  const start = read.ports;
  const founds = written.map((s) => read.allocation(s.serviceId));
  const saved: Allocation[] = [];
  let ports = start;
  for (const [i, s] of written.entries()) {
    const ref = { nsdId: d.nsdId, networkId: s.networkId, serviceId: s.serviceId };
    const found = founds[i] ?? null;
    if (!live(s)) {
      if (found !== null) ports = onWithdrawn(found, ports);
      // a change that waited for the old proposal has nothing to open any more, and no next candidate is due (a
      // restarted B would otherwise resume a withdrawn service's refusal at every start, decision 0193)
      if (found !== null && (found.pending !== null || found.awaitingNext))
        saved.push({ ...found, pending: null, awaitingNext: false });
      continue;
    }
    const demand = demandOf(s);
    if (Either.isLeft(demand)) return Either.left(demand.left);
    const [sources, version] = [read.sources(s.serviceId), read.version(s.serviceId)];
    // the proposal binds the listener digest of the intent at P (the same function as the snapshot and the ready check)
    const digest = intentDigestAt(d, s, sources, version);
    const old = before.get(toHex(s.serviceId));
    let next: Allocation | null = null;
    if (found === null || found.state === 'idle') {
      const step = issueCandidate(found ?? newAllocation(ref, publisher), ports, demand.right, rng, newId(), digest);
      if (Either.isLeft(step)) return Either.left(step.left);
      ports = step.right.table;
      next = step.right.allocation;
    } else if (old !== undefined && old.state === 'active') {
      const [bf, af] = [factsOf(old), factsOf(s)];
      if (bf === null || af === null) continue;
      // a display name or description change opens no round (`onDeclarationChange` answers 'unchanged'): no proposal id
      // is drawn for it (a randomBytes call per such replace)
      if (!isSubstantiveChange(bf, af)) continue;
      const ch = onDeclarationChange(found, ports, bf, af, rng, newId(), digest);
      if (Either.isLeft(ch)) return Either.left(ch.left);
      if (ch.right.kind === 'round') {
        ports = ch.right.step.table;
        next = ch.right.step.allocation;
      }
      // the old proposal is unresolved: the new demand waits for it (decision 0190) — the round opens in the
      // transaction that resolves it; a proposal whose P no longer fits is cancelled (the snapshot drops it and the
      // recovery driver sends port.cancel after this commit); the intent changed, so the listener revision moved on
      if (ch.right.kind === 'pending') next = ch.right.allocation;
    }
    if (next !== null) saved.push(next);
  }
  return Either.right({ allocations: saved, ports: { before: start, after: ports } });
};

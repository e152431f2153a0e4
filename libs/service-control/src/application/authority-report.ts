// B (NSD): report.head, report.replace and snapshot.ack (spec §5.3, decision 0680), each committed before its reply,
// taking the request toolkit of authority-request.ts like the other handler modules; and the report.replace rows —
// the publisher's stored services against its new declarations: which rows the replace writes and with which
// listener revision (`reportRows`, pure).
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import { type Declaration, validateDeclaration } from '../domain/declaration.js';
import { currentSession } from '../domain/fence.js';
import { acceptReport, reportHead } from '../domain/report.js';
import { type AckRecord, checkRetained, recordAck } from '../domain/snapshot.js';
import { applyReport, type ServiceRow, ulid } from '../domain/services.js';
import type { MessageOf } from '../api/message.js';
import { DeclarationCodec } from '../api/report.js';
import { declarationFromWire, declarationToWire, replaceRequest } from '../api/convert.js';
import { planOffer } from './authority-offer.js';
import type { AuthorityRequests } from './authority-request.js';
import type { AuthorityTx } from './authority-store.js';
import type { StoredService } from './service-row.js';

/**
 * The rows a replace writes: created, changed and withdrawn services of `publisher` (unchanged ones left out), and
 * the publisher's rows before it by service id. A corrupt stored declaration is `state-inconsistent`.
 */
export const reportRows = (
  publisher: Bytes,
  networkId: Bytes,
  all: readonly StoredService[],
  decls: readonly Declaration[],
  now: number,
): Either.Either<
  { readonly prev: ReadonlyMap<string, StoredService>; readonly stored: readonly StoredService[] },
  ServiceControlError
> => {
  const mine = all.filter((s) => bytesEqual(s.publisher, publisher));
  const rows: ServiceRow[] = [];
  for (const s of mine) {
    const d = DeclarationCodec.decode(s.declaration);
    if (Either.isLeft(d))
      return Either.left(scError('state-inconsistent', 'stored declaration is corrupt for this scope'));
    rows.push({
      serviceId: s.serviceId,
      declarationKey: s.declarationKey,
      declaration: declarationFromWire(d.right),
      state: s.state,
      port: s.port,
    });
  }
  const app = applyReport(rows, decls, () => ulid(now, new Uint8Array(randomBytes(10))));
  const prev = new Map(mine.map((s) => [toHex(s.serviceId), s]));
  const stored: StoredService[] = [];
  for (const row2 of [...app.created, ...app.updated, ...app.withdrawn]) {
    const old = prev.get(toHex(row2.serviceId));
    const bytes = DeclarationCodec.encodeOrThrow(declarationToWire(row2.declaration));
    const changed =
      old === undefined || old.state !== row2.state || !Buffer.from(old.declaration).equals(Buffer.from(bytes));
    if (!changed) continue;
    stored.push({
      serviceId: row2.serviceId,
      publisher: publisher,
      networkId: networkId,
      declarationKey: row2.declarationKey,
      declaration: bytes,
      state: row2.state,
      port: row2.port,
      listenerRevision: old === undefined ? 1n : old.listenerRevision + 1n,
    });
  }
  return Either.right({ prev, stored });
};

export async function serveReportHead(rq: AuthorityRequests, m: MessageOf<'report.head'>) {
  // the publisher's own services only (decision 0373): the bindings are of its services, not the Network's
  const reads = (tx: AuthorityTx) =>
    Promise.all([tx.lockReport(m.subject_identity, m.network_id), tx.ownServices(m.subject_identity, m.network_id)]);
  const r = await rq.fenced(
    m.subject_identity,
    m.network_id,
    { session: false },
    reads,
    async (_tx, { runtime: rt }, [row, all]) => {
      const f = rq.fences(m, rt, null);
      if (Either.isLeft(f)) return Either.left(f.left);
      const scopeOk = rq.scopeMatches(m, m.body.scope);
      if (Either.isLeft(scopeOk)) return Either.left(scopeOk.left);
      if (Either.isLeft(row)) return Either.left(row.left);
      const head = reportHead(row.right);
      const services = head.acceptedRevision === 0n ? [] : all;
      return Either.right({ head, bindings: rq.bindings(services, m.subject_identity) });
    },
  );
  return Either.map(r, ({ head, bindings }) =>
    rq.env(m, 'report.accepted', m.runtime_generation, m.runtime_id, {
      scope: m.body.scope,
      accepted_revision: head.acceptedRevision,
      report_digest: head.reportDigest,
      bindings,
    }),
  );
}

export async function serveReportReplace(rq: AuthorityRequests, m: MessageOf<'report.replace'>) {
  const body = m.body;
  let outbox = null as Promise<bigint> | null;
  // ONE statement reads the fence rows, the report row, the publisher's own services of the Network and every P row
  // their allocation needs (decision 0371); ONE statement writes, sent with the COMMIT (decision 0372): two round trips,
  // two statements of ours in all (0670's one-statement path was withdrawn, decision 0690)
  const r = await rq.d.store.transact(
    rq.d.epoch,
    async (tx) => {
      outbox = null; // `fn` may run more than once (a failed commit group's member runs again alone): its own
      const {
        member,
        runtime: rt,
        report: row,
        services: all,
        offer,
      } = await tx.replaceRows(m.subject_identity, m.network_id);
      if (!member) return Either.left(scError('unauthorized', 'identity is not a member of the Network'));
      const f = rq.fences(m, rt, null);
      if (Either.isLeft(f)) return Either.left(f.left);
      for (const sc of [body.scope, body.content.scope]) {
        const ok = rq.scopeMatches(m, sc);
        if (Either.isLeft(ok)) return Either.left(ok.left);
      }
      const decls = [];
      for (const w of body.content.declarations) {
        const v = validateDeclaration(declarationFromWire(w));
        if (Either.isLeft(v)) return Either.left(v.left);
        decls.push(v.right);
      }
      if (Either.isLeft(row)) return Either.left(row.left);
      const outcome = acceptReport(row.right, replaceRequest(body), true);
      if (Either.isLeft(outcome)) return Either.left(outcome.left);
      let services = all;
      if (outcome.right.outcome === 'replace') {
        const rows = reportRows(m.subject_identity, m.network_id, all, decls, rq.d.now());
        if (Either.isLeft(rows)) return Either.left(rows.left);
        const { prev, stored } = rows.right;
        // the P allocation of the written rows, in this same transaction (committed before any snapshot carries it)
        const plan = planOffer({ nsdId: rq.d.nsdId }, m.subject_identity, prev, stored, offer);
        if (Either.isLeft(plan)) return Either.left(plan.left);
        // every write in ONE statement, sent with the COMMIT (decision 0372); its outbox id is read after the commit
        outbox = tx.saveReplace({
          publisher: m.subject_identity,
          networkId: m.network_id,
          services: stored,
          allocations: plan.right.allocations,
          ports: plan.right.ports,
          report: outcome.right.row,
          outboxReason: 'report.replace',
        });
        // the rows as committed, without reading them again
        const written = new Map(stored.map((s) => [toHex(s.serviceId), s]));
        services = [...all.filter((s) => !written.has(toHex(s.serviceId))), ...stored];
      }
      return Either.right({
        row: outcome.right.row,
        replaced: outcome.right.outcome === 'replace',
        bindings: rq.bindings(services, m.subject_identity),
      });
    },
    // every row it locks is of its identity or its Network: it may commit in a group (decision 0330)
    { scope: { identity: m.subject_identity, networkId: m.network_id } },
  );
  if (Either.isRight(r)) {
    rq.committed('report.replace');
    // Produce after the commit, off the reply path: the outbox row makes it survive a crash in between.
    if (outbox !== null) rq.queueProduction(m.network_id, await outbox);
  }
  return Either.map(r, ({ row, bindings }) =>
    rq.env(m, 'report.accepted', m.runtime_generation, m.runtime_id, {
      scope: body.scope,
      accepted_revision: row.revision,
      report_digest: row.digest,
      bindings,
    }),
  );
}

export async function serveSnapshotAck(rq: AuthorityRequests, m: MessageOf<'snapshot.ack'>) {
  const body = m.body;
  const reply = () =>
    rq.env(
      m,
      'snapshot.ack.result',
      m.runtime_generation,
      m.runtime_id,
      {
        scope: body.scope,
        snapshot_revision: body.snapshot_revision,
        snapshot_digest: body.snapshot_digest,
      },
      m.session_seq,
    );
  // one round trip when the store can decide a valid ACK itself (decision 0198); it answers 'slow' for anything
  // else, having written nothing, and the general path below decides (the pure envelope checks first: a request
  // that fails them goes the general way at once)
  const sc = body.scope;
  const ownScope =
    bytesEqual(sc.subject_identity, m.subject_identity) &&
    bytesEqual(sc.nsd_id, m.nsd_id) &&
    bytesEqual(sc.network_id, m.network_id);
  const rec: AckRecord = {
    sessionSeq: m.session_seq,
    revision: body.snapshot_revision,
    digest: body.snapshot_digest,
    accepted: body.accepted,
    enforcementApplied: body.enforcement_applied,
    dnsApplied: body.dns_applied,
  };
  if (
    rq.d.store.ackFast !== undefined &&
    m.runtime_generation !== null &&
    m.runtime_id !== null &&
    m.authority_epoch === rq.d.epoch &&
    ownScope
  ) {
    const fast = await rq.d.store.ackFast(rq.d.epoch, {
      identity: m.subject_identity,
      networkId: m.network_id,
      generation: m.runtime_generation,
      runtimeId: m.runtime_id,
      ...rec,
    });
    if (Either.isRight(fast) && fast.right !== 'slow') {
      rq.committed('snapshot.ack');
      return Either.right(reply());
    }
  }
  // the ACK records and the produced digest that this ACK can collide with, and the retained floor, are read with
  // the fence
  const reads = (tx: AuthorityTx) =>
    Promise.all([
      tx.acks(m.subject_identity, m.network_id, m.session_seq, body.snapshot_revision),
      tx.producedDigests(m.subject_identity, m.network_id, body.snapshot_revision),
      tx.revisionFloor(m.subject_identity, m.network_id, m.session_seq),
    ]);
  const r = await rq.fenced(
    m.subject_identity,
    m.network_id,
    { session: true },
    reads,
    async (tx, { runtime: rt, session: s }, [acks, produced, floor]) => {
      const f = rq.fences(m, rt, currentSession(s, rt, rq.d.epoch));
      if (Either.isLeft(f)) return Either.left(f.left);
      if (!ownScope) return Either.left(scError('unauthorized', 'ACK scope is not the signer’s scope'));
      // below the retained floor: refused from the floor, whatever history/ACK rows are left (decision 0191)
      const retained = checkRetained(floor, rec.revision);
      if (Either.isLeft(retained)) return Either.left(retained.left);
      const next = recordAck(acks, produced, rec);
      if (Either.isLeft(next)) return Either.left(next.left);
      if (next.right !== acks) await tx.saveAck(m.subject_identity, m.network_id, rec);
      return Either.void;
    },
  );
  if (Either.isRight(r)) rq.committed('snapshot.ack');
  return Either.map(r, reply);
}

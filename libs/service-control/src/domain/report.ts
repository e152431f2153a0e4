// Report revisions (spec §5.4, seed §2.1/§2.2): A persists content, digest and revision before sending; same content
// keeps its revision; recovery by report.head; B's acceptance rules. Content and digest are opaque here (computed
// by the api layer with domain `ns.service.report.v1`).
import { Either } from 'effect';
import { type Bytes, bytesEqual } from './bytes.js';
import { nextCounter } from './counter.js';
import { type ServiceControlError, scError } from './errors.js';

export interface ReportVersion {
  readonly revision: bigint;
  readonly digest: Bytes;
  /** The canonical CBOR of `{scope, strict_mode, declarations}`. */
  readonly content: Bytes;
}

/**
 * A's persisted report row for one scope.
 * - `absent`: no row (fresh, or lost): recover through report.head first.
 * - `corrupt`: unreadable or inconsistent row: `state-inconsistent`, writes for the scope stop.
 * - `present`: the last report persisted before sending, and the revision B is known to have accepted (0 = none).
 */
export type AReportRecord =
  | { readonly state: 'absent' }
  | { readonly state: 'corrupt' }
  | { readonly state: 'present'; readonly report: ReportVersion; readonly acceptedRevision: bigint };

/** The result of reading A's full declaration source. A failed or partial read is never an empty report. */
export type DeclarationRead =
  | { readonly ok: true; readonly content: Bytes; readonly digest: Bytes }
  | { readonly ok: false; readonly reason: string };

export type ReportPlan =
  /** Persist `persist` atomically (when not null), THEN send `send` (when not null). */
  | { readonly action: 'send'; readonly persist: AReportRecord | null; readonly send: ReportVersion | null }
  /** Nothing is sent: the declarations could not be read completely. */
  | { readonly action: 'skip'; readonly reason: string }
  /** The local row is absent: recover with report.head first. */
  | { readonly action: 'head' };

/** A wants to fan out its current declarations (M6-17). */
export const prepareReport = (
  rec: AReportRecord,
  read: DeclarationRead,
): Either.Either<ReportPlan, ServiceControlError> => {
  if (rec.state === 'corrupt') return Either.left(scError('state-inconsistent', 'local report row is corrupt'));
  if (!read.ok) return Either.right({ action: 'skip', reason: read.reason });
  if (rec.state === 'absent') return Either.right({ action: 'head' });
  if (bytesEqual(rec.report.digest, read.digest)) {
    // Same content keeps its revision; resend only if B has not acknowledged it yet.
    const send = rec.acceptedRevision === rec.report.revision ? null : rec.report;
    return Either.right({ action: 'send', persist: null, send });
  }
  return Either.map(nextCounter(rec.report.revision, 'report_revision'), (revision) => {
    const report = { revision, digest: read.digest, content: read.content };
    return { action: 'send' as const, persist: { ...rec, report }, send: report };
  });
};

export interface ReportHead {
  readonly acceptedRevision: bigint;
  readonly reportDigest: Bytes | null;
}

/**
 * Recovery through report.head (M6-20, M6-21):
 * - local present: server ahead of our durable row, server below what it already accepted, or the same revision with
 *   another digest → `state-inconsistent`; server equal → nothing to resend; local newer → send the local one;
 * - local absent: read the declarations first (a failed read sends nothing); same digest as the server → adopt the
 *   server revision; B has none → revision 1; different → persist server_revision+1, then send.
 */
export const recoverWithHead = (
  rec: AReportRecord,
  head: ReportHead,
  read: DeclarationRead,
): Either.Either<ReportPlan, ServiceControlError> => {
  if (rec.state === 'corrupt') return Either.left(scError('state-inconsistent', 'local report row is corrupt'));
  if ((head.acceptedRevision === 0n) !== (head.reportDigest === null))
    return Either.left(scError('invalid-encoding', 'report.head: revision 0 iff digest null'));
  if (rec.state === 'present') {
    const local = rec.report;
    if (head.acceptedRevision < rec.acceptedRevision)
      return Either.left(scError('state-inconsistent', 'server report floor went backwards'));
    if (head.acceptedRevision > local.revision)
      return Either.left(scError('state-inconsistent', 'server is ahead of the durable local report'));
    if (head.acceptedRevision === local.revision) {
      if (!bytesEqual(head.reportDigest as Bytes, local.digest))
        return Either.left(scError('state-inconsistent', 'same revision, different digest'));
      const persist = rec.acceptedRevision === local.revision ? null : { ...rec, acceptedRevision: local.revision };
      return Either.right({ action: 'send', persist, send: null });
    }
    return Either.right({ action: 'send', persist: null, send: local });
  }
  if (!read.ok) return Either.right({ action: 'skip', reason: read.reason });
  if (head.reportDigest !== null && bytesEqual(head.reportDigest, read.digest)) {
    const report = { revision: head.acceptedRevision, digest: read.digest, content: read.content };
    return Either.right({
      action: 'send',
      persist: { state: 'present', report, acceptedRevision: head.acceptedRevision },
      send: null,
    });
  }
  return Either.map(
    nextCounter(head.acceptedRevision === 0n ? null : head.acceptedRevision, 'report_revision'),
    (revision) => {
      const report = { revision, digest: read.digest, content: read.content };
      return {
        action: 'send' as const,
        persist: { state: 'present' as const, report, acceptedRevision: head.acceptedRevision },
        send: report,
      };
    },
  );
};

/** A got `report.accepted` for what it sent: remember the accepted revision (echo must match, else inconsistent). */
export const onReportAccepted = (
  rec: AReportRecord,
  accepted: ReportHead,
): Either.Either<AReportRecord, ServiceControlError> => {
  if (rec.state !== 'present') return Either.left(scError('state-inconsistent', 'accepted a report we do not hold'));
  if (accepted.acceptedRevision < rec.acceptedRevision) return Either.right(rec); // a late duplicate receipt
  if (accepted.acceptedRevision > rec.report.revision)
    return Either.left(scError('state-inconsistent', 'server accepted a revision above ours'));
  if (accepted.acceptedRevision === rec.report.revision) {
    if (accepted.reportDigest === null || !bytesEqual(accepted.reportDigest, rec.report.digest))
      return Either.left(scError('state-inconsistent', 'same revision, different digest'));
    return Either.right({ ...rec, acceptedRevision: accepted.acceptedRevision });
  }
  return Either.right(rec);
};

// ───────────────────────────────────────────── B ─────────────────────────────────────────────

/** B's report row for one scope: the accepted revision and digest (the result is rebuilt from service rows). */
export interface BReportRow {
  readonly revision: bigint;
  readonly digest: Bytes;
}

export interface ReplaceRequest {
  readonly revision: bigint;
  readonly claimedDigest: Bytes;
  /** The digest B recomputed over the received content. */
  readonly computedDigest: Bytes;
}

export type ReplaceOutcome =
  /** Same revision and digest: answer with the original result, change nothing. */
  | { readonly outcome: 'original'; readonly row: BReportRow }
  /** Replace all declarations of the scope and write an outbox row in the SAME transaction. */
  | { readonly outcome: 'replace'; readonly row: BReportRow; readonly writeOutbox: true };

/** report.replace on B (M6-18). `runtimeCurrent` = the sender is the current instance (checked in the transaction). */
export const acceptReport = (
  row: BReportRow | null,
  req: ReplaceRequest,
  runtimeCurrent: boolean,
): Either.Either<ReplaceOutcome, ServiceControlError> => {
  if (!runtimeCurrent) return Either.left(scError('stale-runtime', 'report from a non-current instance'));
  if (req.revision < 1n) return Either.left(scError('invalid-encoding', 'report_revision must be ≥ 1'));
  if (!bytesEqual(req.claimedDigest, req.computedDigest))
    return Either.left(scError('digest-conflict', 'report_digest does not match the content'));
  if (row !== null) {
    if (req.revision < row.revision) return Either.left(scError('stale-report', 'lower report_revision'));
    if (req.revision === row.revision)
      return bytesEqual(req.claimedDigest, row.digest)
        ? Either.right({ outcome: 'original', row })
        : Either.left(scError('digest-conflict', 'same revision, different digest'));
  }
  return Either.right({
    outcome: 'replace',
    row: { revision: req.revision, digest: req.claimedDigest },
    writeOutbox: true,
  });
};

/** report.head on B: revision 0 and digest null when there is no report. */
export const reportHead = (row: BReportRow | null): ReportHead =>
  row === null
    ? { acceptedRevision: 0n, reportDigest: null }
    : { acceptedRevision: row.revision, reportDigest: row.digest };

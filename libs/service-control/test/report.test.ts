import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bytesEqual, toHex } from '../src/domain/bytes.js';
import { U64_MAX } from '../src/domain/counter.js';
import {
  type AReportRecord,
  type BReportRow,
  type DeclarationRead,
  type ReportVersion,
  acceptReport,
  onReportAccepted,
  prepareReport,
  recoverWithHead,
  reportHead,
} from '../src/domain/report.js';
import { errCode, ok, sha } from './helpers.js';

const read = (text: string): DeclarationRead => ({
  ok: true,
  content: new TextEncoder().encode(text),
  digest: sha(text),
});
const failed: DeclarationRead = { ok: false, reason: 'config unreadable' };
const present = (revision: bigint, text: string, acceptedRevision = revision): AReportRecord => ({
  state: 'present',
  report: { revision, digest: sha(text), content: new TextEncoder().encode(text) },
  acceptedRevision,
});

describe('A: persisting reports', () => {
  it('M6-17 a new content gets revision+1, persisted before it is sent; the same content keeps its revision', () => {
    const plan = ok(prepareReport(present(3n, 'a'), read('b')));
    if (plan.action !== 'send') throw new Error('expected send');
    const persisted = plan.persist;
    if (persisted === null || persisted.state !== 'present') throw new Error('expected a persisted report');
    expect(persisted.report.revision).toBe(4n);
    expect(plan.send).toBe(persisted.report); // exactly what is persisted is what is sent
    const same = ok(prepareReport(present(3n, 'a'), read('a')));
    expect(same).toEqual({ action: 'send', persist: null, send: null }); // accepted already: nothing to send
    const unacked = ok(prepareReport(present(3n, 'a', 2n), read('a')));
    expect(unacked.action === 'send' && unacked.send?.revision).toBe(3n); // resent with the SAME revision
  });

  it('M6-17 a read failure sends nothing and never produces an empty report', () => {
    expect(ok(prepareReport(present(3n, 'a'), failed))).toEqual({ action: 'skip', reason: 'config unreadable' });
    expect(
      ok(recoverWithHead({ state: 'absent' }, { acceptedRevision: 3n, reportDigest: sha('a') }, failed)).action,
    ).toBe('skip');
  });

  it('M6-5 report_revision at 2^64-1 → counter-exhausted, nothing persisted', () => {
    expect(errCode(prepareReport(present(U64_MAX, 'a'), read('b')))).toBe('counter-exhausted');
  });
});

describe('B: report.replace', () => {
  const row: BReportRow = { revision: 5n, digest: sha('x') };
  const req = (revision: bigint, text: string, computed = text) => ({
    revision,
    claimedDigest: sha(text),
    computedDigest: sha(computed),
  });

  it('M6-18 lower → stale-report; same revision + different digest → digest-conflict; same + same → original result', () => {
    expect(errCode(acceptReport(row, req(4n, 'y'), true))).toBe('stale-report');
    expect(errCode(acceptReport(row, req(5n, 'y'), true))).toBe('digest-conflict');
    expect(ok(acceptReport(row, req(5n, 'x'), true))).toEqual({ outcome: 'original', row });
  });

  it('M6-18 higher → full replacement with an outbox row in the same transaction', () => {
    expect(ok(acceptReport(row, req(6n, 'y'), true))).toEqual({
      outcome: 'replace',
      row: { revision: 6n, digest: sha('y') },
      writeOutbox: true,
    });
    expect(ok(acceptReport(null, req(1n, 'y'), true)).outcome).toBe('replace');
  });

  it('M6-18 a non-current runtime is refused even with a higher revision; a digest that does not match the content is refused', () => {
    expect(errCode(acceptReport(row, req(9n, 'y'), false))).toBe('stale-runtime');
    expect(errCode(acceptReport(row, req(6n, 'y', 'z'), true))).toBe('digest-conflict');
    expect(errCode(acceptReport(null, req(0n, 'y'), true))).toBe('invalid-encoding');
  });
});

describe('A: recovery through report.head', () => {
  it('M6-20 report.head with no report is revision 0 and digest null', () => {
    expect(reportHead(null)).toEqual({ acceptedRevision: 0n, reportDigest: null });
    expect(reportHead({ revision: 2n, digest: sha('a') })).toEqual({ acceptedRevision: 2n, reportDigest: sha('a') });
  });

  it('M6-20 after local state loss: equal digest ⇒ adopt the server revision; different ⇒ persist server_revision+1, then send', () => {
    const adopt = ok(recoverWithHead({ state: 'absent' }, { acceptedRevision: 7n, reportDigest: sha('a') }, read('a')));
    expect(adopt).toEqual({ action: 'send', persist: present(7n, 'a'), send: null });
    const bump = ok(recoverWithHead({ state: 'absent' }, { acceptedRevision: 7n, reportDigest: sha('a') }, read('b')));
    expect(bump).toEqual({
      action: 'send',
      persist: present(8n, 'b', 7n),
      send: (present(8n, 'b') as { report: ReportVersion }).report,
    });
    const none = ok(recoverWithHead({ state: 'absent' }, { acceptedRevision: 0n, reportDigest: null }, read('b')));
    expect(none.action === 'send' && none.send?.revision).toBe(1n);
  });

  it('M6-20 local newer durable report ⇒ send it; equal ⇒ nothing new', () => {
    const newer = ok(
      recoverWithHead(present(4n, 'b', 3n), { acceptedRevision: 3n, reportDigest: sha('a') }, read('b')),
    );
    expect(newer.action === 'send' && newer.send?.revision).toBe(4n);
    const equal = ok(
      recoverWithHead(present(4n, 'b', 3n), { acceptedRevision: 4n, reportDigest: sha('b') }, read('b')),
    );
    expect(equal).toEqual({ action: 'send', persist: present(4n, 'b', 4n), send: null }); // receipt was lost: learn it
  });

  it('M6-21 server floor regression, same revision with another digest, or a corrupt local row → state-inconsistent', () => {
    expect(
      errCode(recoverWithHead(present(4n, 'b', 4n), { acceptedRevision: 3n, reportDigest: sha('a') }, read('b'))),
    ).toBe('state-inconsistent');
    expect(
      errCode(recoverWithHead(present(4n, 'b'), { acceptedRevision: 4n, reportDigest: sha('c') }, read('b'))),
    ).toBe('state-inconsistent');
    expect(
      errCode(recoverWithHead(present(4n, 'b'), { acceptedRevision: 5n, reportDigest: sha('c') }, read('b'))),
    ).toBe('state-inconsistent');
    expect(
      errCode(recoverWithHead({ state: 'corrupt' }, { acceptedRevision: 0n, reportDigest: null }, read('b'))),
    ).toBe('state-inconsistent');
    // writes for the scope stop: a corrupt row blocks every new report too
    expect(errCode(prepareReport({ state: 'corrupt' }, read('b')))).toBe('state-inconsistent');
    expect(errCode(onReportAccepted(present(4n, 'b', 3n), { acceptedRevision: 4n, reportDigest: sha('c') }))).toBe(
      'state-inconsistent',
    );
  });
});

// ───────────────────── property: edits, fan-out with crash points, state loss, recovery ─────────────────────

type Fault = 'none' | 'crashBeforePersist' | 'crashAfterPersist' | 'replyLost';
type Op =
  | { t: 'edit'; text: string }
  | { t: 'readFails'; on: boolean }
  | { t: 'fanout'; fault: Fault }
  | { t: 'loseA' }
  | { t: 'recover' };
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ t: fc.constant('edit' as const), text: fc.constantFrom('', 'a', 'b', 'c', 'ab') }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('readFails' as const), on: fc.boolean() }) },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('fanout' as const),
      fault: fc.constantFrom(
        'none' as const,
        'crashBeforePersist' as const,
        'crashAfterPersist' as const,
        'replyLost' as const,
      ),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ t: 'loseA' as const }) },
  { weight: 2, arbitrary: fc.constant({ t: 'recover' as const }) },
);

describe('reports under random edits, crashes and state loss (model-based)', () => {
  it('M6-17 M6-18 M6-20 B revisions never regress, one revision never carries two digests, honest runs never conflict and converge', () => {
    const seen = { replaced: 0, original: 0, adopted: 0, bumped: 0, skipped: 0, crashAfterPersist: 0 };
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 10, maxLength: 60 }), (ops) => {
        let source = 'a';
        let readFails = false;
        let aRec: AReportRecord = { state: 'absent' }; // A durable
        let bRow: BReportRow | null = null; // B durable
        const bHistory = new Map<bigint, string>(); // every revision B ever accepted → digest hex
        let outbox = 0;
        const currentRead = (): DeclarationRead => (readFails ? failed : read(source));

        const deliver = (r: ReportVersion, replyLost: boolean): void => {
          const computed = sha(new TextDecoder().decode(r.content));
          const before: BReportRow | null = bRow;
          const out = acceptReport(
            bRow,
            { revision: r.revision, claimedDigest: r.digest, computedDigest: computed },
            true,
          );
          expect(errCode(out)).toBeNull(); // honest A never triggers stale-report / digest-conflict
          const o = ok(out);
          if (o.outcome === 'replace') {
            outbox++;
            seen.replaced++;
            bRow = o.row;
            if (before !== null) expect(o.row.revision).toBeGreaterThan(before.revision);
          } else seen.original++;
          const prevDigest = bHistory.get(o.row.revision);
          if (prevDigest !== undefined) expect(prevDigest).toBe(toHex(o.row.digest));
          bHistory.set(o.row.revision, toHex(o.row.digest));
          if (!replyLost) aRec = ok(onReportAccepted(aRec, reportHead(bRow)));
        };

        const apply = (plan: ReturnType<typeof prepareReport>, fault: Fault): void => {
          const p = ok(plan);
          if (p.action === 'skip') {
            seen.skipped++;
            return;
          }
          if (p.action === 'head') return;
          if (fault === 'crashBeforePersist') return; // nothing on disk, nothing sent
          if (p.persist !== null) aRec = p.persist;
          if (fault === 'crashAfterPersist') {
            seen.crashAfterPersist++;
            return;
          }
          if (p.send !== null) deliver(p.send, fault === 'replyLost');
        };

        for (const op of ops) {
          if (op.t === 'edit') source = op.text;
          else if (op.t === 'readFails') readFails = op.on;
          else if (op.t === 'loseA') aRec = { state: 'absent' };
          else if (op.t === 'fanout') {
            const plan = prepareReport(aRec, currentRead());
            if (Either.isRight(plan) && plan.right.action === 'head') continue; // must recover first
            apply(plan, op.fault);
          } else {
            const head = reportHead(bRow);
            const r = currentRead();
            const plan = recoverWithHead(aRec, head, r);
            expect(errCode(plan)).toBeNull(); // honest crash sequences never look inconsistent
            const p = ok(plan);
            if (aRec.state === 'absent' && p.action === 'send' && r.ok) {
              if (head.reportDigest !== null && bytesEqual(head.reportDigest, r.digest)) {
                expect(p.send).toBeNull();
                seen.adopted++;
              } else {
                expect(p.send?.revision).toBe(head.acceptedRevision + 1n);
                seen.bumped++;
              }
            }
            apply(plan, 'none');
          }
          if (bRow !== null) expect(outbox).toBe(bHistory.size);
        }
        // convergence: a clean recovery and fan-out leaves B holding exactly the current source
        readFails = false;
        apply(recoverWithHead(aRec, reportHead(bRow), currentRead()), 'none');
        apply(prepareReport(aRec, currentRead()), 'none');
        expect(bRow).not.toBeNull();
        expect(toHex((bRow as unknown as BReportRow).digest)).toBe(toHex(sha(source)));
      }),
      { numRuns: 300 },
    );
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});

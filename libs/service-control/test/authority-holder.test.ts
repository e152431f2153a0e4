// The authority lease rules (decision 0400, digest §5.2 "lease holder"): a standby takes over only when no other
// holder's lease is live; the holder counts on its lease only as long as its last confirmed renewal lasts.
import { describe, expect, it } from 'vitest';
import {
  afterRenewal,
  leaseValidUntil,
  mayTakeOver,
  renewEveryMs,
  standbyWaitMs,
} from '../src/domain/authority-holder.js';

describe('§5.2 authority lease: who may take over', () => {
  it('no row, no holder or no lease: the first process takes over', () => {
    expect(mayTakeOver(null, 'b')).toBe(true);
    expect(mayTakeOver({ holder: null, remainingMs: null }, 'b')).toBe(true);
    expect(mayTakeOver({ holder: 'a', remainingMs: null }, 'b')).toBe(true);
  });

  it("another holder's live lease: never (a live authority is not fenced); once it ended: yes", () => {
    expect(mayTakeOver({ holder: 'a', remainingMs: 1 }, 'b')).toBe(false);
    expect(mayTakeOver({ holder: 'a', remainingMs: 2_000 }, 'b')).toBe(false);
    expect(mayTakeOver({ holder: 'a', remainingMs: 0 }, 'b')).toBe(true);
    expect(mayTakeOver({ holder: 'a', remainingMs: -5 }, 'b')).toBe(true);
  });

  it('its own live lease (a retried acquisition): yes', () => {
    expect(mayTakeOver({ holder: 'b', remainingMs: 2_000 }, 'b')).toBe(true);
  });

  it('the standby asks again when the lease would end, at least after the margin, at most after one lease', () => {
    expect(standbyWaitMs(500, 2_000)).toBe(520);
    expect(standbyWaitMs(0.2, 2_000)).toBe(21);
    expect(standbyWaitMs(-50, 2_000)).toBe(20);
    expect(standbyWaitMs(10_000, 2_000)).toBe(2_000);
  });
});

describe('§5.2 authority lease: the holder', () => {
  it('counts on its lease from the moment the confirmed renewal was sent, one lease length', () => {
    expect(leaseValidUntil(1_000, 2_000)).toBe(3_000);
    expect(renewEveryMs(2_000)).toBe(666);
    expect(renewEveryMs(12)).toBe(10);
  });

  it('renewed: held; another takeover on the row: lost at once; storage failure: held until its lease ends', () => {
    expect(afterRenewal(true, 3_000, 9_000)).toBe('held');
    expect(afterRenewal(false, 3_000, 1_500)).toBe('lost');
    expect(afterRenewal(null, 3_000, 2_999)).toBe('held');
    expect(afterRenewal(null, 3_000, 3_000)).toBe('expired');
  });
});

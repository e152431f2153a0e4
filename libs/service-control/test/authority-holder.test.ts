// The authority lease rules (decision 0400, digest §5.2 "lease holder"): a standby takes over only when no other
// holder's lease is live; the holder counts on its lease only as long as its last confirmed renewal lasts.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { holdAuthority } from '../src/application/authority-holder.js';
import {
  afterRenewal,
  leaseValidUntil,
  mainLoopLive,
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

  it("decision 0600: another holder's live lease whose session the database saw end (a crashed holder): yes", () => {
    expect(mayTakeOver({ holder: 'a', remainingMs: 30_000, holderSessionEnded: true }, 'b')).toBe(true);
    // its session lives (or it holds no presence lock): its running lease is still waited out
    expect(mayTakeOver({ holder: 'a', remainingMs: 30_000, holderSessionEnded: false }, 'b')).toBe(false);
    expect(mayTakeOver({ holder: 'a', remainingMs: 30_000 }, 'b')).toBe(false);
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

describe('decision 0470: renewals gated by the main event loop', () => {
  afterEach(() => void vi.useRealTimers());

  it('the main loop is live while its silence is within the bound', () => {
    expect(mainLoopLive(0, 10_000)).toBe(true);
    expect(mainLoopLive(10_000, 10_000)).toBe(true);
    expect(mainLoopLive(10_001, 10_000)).toBe(false);
  });

  it('renews while the main loop is live; withholds past the bound, resumes within the lease, ends expired after it', async () => {
    vi.useFakeTimers();
    let clock = 0;
    let silent = 0;
    const renewals: number[] = [];
    const ended: string[] = [];
    const logged: string[] = [];
    const store = {
      renewAuthority: async () => {
        renewals.push(clock);
        return true;
      },
      releaseAuthority: async () => undefined,
    };
    const step = async () => {
      clock += 100;
      await vi.advanceTimersByTimeAsync(100);
    };
    const holding = holdAuthority(
      store,
      { holder: 'h', ttlMs: 300, onLost: (r) => ended.push(r) },
      1n,
      0,
      () => clock,
      (event) => logged.push(event),
      { silentMs: () => silent, boundMs: 1_000 },
    );
    for (let i = 0; i < 3; i++) await step(); // a renewal every 100 ms (a third of the lease)
    expect(renewals).toEqual([100, 200, 300]);
    silent = 1_001; // the main loop silent past the bound: no renewal, the lease (until 600) still counts
    await step();
    expect(renewals).toEqual([100, 200, 300]);
    expect(ended).toEqual([]);
    silent = 400; // it came back within the lease: renewals again
    await step();
    expect(renewals).toEqual([100, 200, 300, 500]);
    silent = 5_000; // hung: no renewal; once the last confirmed lease (until 800) ran out, expired
    await step();
    await step();
    expect(ended).toEqual([]);
    await step();
    expect(renewals).toEqual([100, 200, 300, 500]);
    expect(ended).toEqual(['expired']);
    expect(logged).toEqual(['lease-withheld', 'lease-withheld', 'authority-lost']);
    await holding.stop(false);
  });
});

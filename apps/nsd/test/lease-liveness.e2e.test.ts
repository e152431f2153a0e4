// Decision 0470: the authority lease is renewed on a thread of its own, gated by the main event loop's liveness. Two
// real nsd on one database with a short lease, the second standing by: a holder whose main loop is blocked in stretches
// longer than the whole lease (a storm's poll phases, decision 0451) but shorter than the liveness bound keeps the
// authority — the standby never takes over; a holder whose loop is blocked beyond the bound loses it (`expired`), the
// standby takes over with epoch + 1 and the blocked one exits 1. The blocking is nsd's test-only `--test-block-loop`.
import { useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { nsdEnv, processWorkspace, publisherAndConsumer, start, startNsd } from './processes.js';

const db = useDatabase('nsd_lease_liveness');
const ws = processWorkspace('nsd-lease-liveness');
const { members } = publisherAndConsumer(ws);
const LEASE_MS = 1_500;
const leaseEnv = (instance: string, extra: Record<string, string> = {}) => ({
  NSD_AUTHORITY_LEASE_MS: String(LEASE_MS),
  NSD_INSTANCE: instance,
  ...extra,
});
/**
 * An nsd holding the lease with its main loop to be blocked on SIGUSR2 (`block`: `MSxN`) and its renewal thread
 * running, and a second nsd standing by on the same database — on the holder's port (`samePort`) or on its own.
 */
const holderAndStandby = async (
  holder: string,
  standbyName: string,
  o: { livenessMs: number; block: string; samePort: boolean },
) => {
  const active = await startNsd(
    ws,
    db,
    members,
    leaseEnv(holder, { NSD_AUTHORITY_LIVENESS_MS: String(o.livenessMs), NSD_TEST_BLOCK_LOOP: o.block }),
  );
  const port: Record<string, string> = o.samePort ? { NSD_PORT: String(active.port) } : {};
  const standby = start('nsd', nsdEnv(ws, db, members, { ...leaseEnv(standbyName), ...port }));
  ws.procs.push(standby);
  const standing = await standby.waitFor((x) => x['event'] === 'standby');
  await active.proc.waitFor((x) => x['event'] === 'lease-renewer-running');
  return { active, standby, standing };
};
const readyz = async (port: number) => {
  const r = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};

describe('decision 0470: the lease renewed off the request loop, gated by its liveness', () => {
  it('a main loop blocked in stretches longer than the lease but within the bound keeps the authority; the standby waits', async () => {
    // blocks of 2.5 s (> the 1.5 s lease, > a third of it) four times; the bound is 6 s
    const { active, standby, standing } = await holderAndStandby('nsd-a', 'nsd-b', {
      livenessMs: 6000,
      block: '2500x4',
      samePort: true,
    });
    expect(standing).toMatchObject({ holder: 'nsd-a', epoch: String(active.epoch) });

    active.proc.child.kill('SIGUSR2');
    expect(await active.proc.waitFor((x) => x['event'] === 'test-block-loop-done', 60_000)).toMatchObject({ times: 4 });
    // the renewal thread saw the main loop silent (the blocks happened) and renewed through them
    expect(active.proc.lines.filter((l) => l['event'] === 'main-loop-silent').length).toBeGreaterThan(0);
    expect(active.proc.lines.filter((l) => String(l['event']).startsWith('authority-lost'))).toEqual([]);
    expect(active.proc.lines.filter((l) => l['event'] === 'lease-withheld')).toEqual([]);
    // still the authority, ready in its epoch; the standby never took over
    expect(await readyz(active.port)).toEqual({ status: 200, body: { ready: true, epoch: String(active.epoch) } });
    expect(standby.lines.filter((l) => l['event'] === 'epoch-taken-over')).toEqual([]);
    expect(active.proc.child.exitCode).toBeNull();
    expect(standby.child.exitCode).toBeNull();

    // a graceful stop still releases the lease through the thread: the standby takes over at once
    active.proc.child.kill('SIGTERM');
    expect((await active.proc.exited).code).toBe(0);
    expect(await standby.waitFor((x) => x['event'] === 'listening', 30_000)).toMatchObject({
      epoch: String(active.epoch + 1n),
    });
    standby.child.kill('SIGTERM');
    expect((await standby.exited).code).toBe(0);
  });

  it('a main loop blocked beyond the bound loses the authority: no renewal, expired, the standby takes over, exit 1', async () => {
    // one block of 6 s: the 2 s bound + the 1.5 s lease + a margin
    // the standby on a port of its own: the blocked holder keeps its listener until its loop runs again (two pods in
    // production)
    const { active, standby } = await holderAndStandby('nsd-c', 'nsd-d', {
      livenessMs: 2000,
      block: '6000x1',
      samePort: false,
    });

    active.proc.child.kill('SIGUSR2');
    expect(await standby.waitFor((x) => x['event'] === 'listening', 30_000)).toMatchObject({
      epoch: String(active.epoch + 1n),
    });
    expect((await active.proc.exited).code).toBe(1);
    // the thread withheld its renewals once the loop was silent past the bound; the lease ran out: expired
    expect(active.proc.lines.filter((l) => l['event'] === 'lease-withheld')).toEqual([
      expect.objectContaining({ epoch: String(active.epoch) }),
    ]);
    expect(active.proc.lines.filter((l) => l['event'] === 'authority-lost')).toEqual([
      expect.objectContaining({ reason: 'expired', epoch: String(active.epoch) }),
    ]);
    standby.child.kill('SIGTERM');
    expect((await standby.exited).code).toBe(0);
  });
});

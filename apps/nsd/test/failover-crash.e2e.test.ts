// Decision 0600 between real processes: nsd with a long authority lease (30 s) and a standby on the same database. The
// active one is SIGKILLed; the kernel closes its sockets, PostgreSQL ends its sessions, and the standby — waiting on the
// holder's presence lock — takes over with epoch + 1 long before the killed holder's lease could have ended (a logical
// claim with a wide margin, not a speed assertion). While the holder lives, the standby never takes over.
import { setTimeout as sleep } from 'node:timers/promises';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { nsdEnv, processWorkspace, publisherAndConsumer, start, startNsd } from './processes.js';

const db = useDatabase('nsd_failover_crash');
const ws = processWorkspace('nsd-failover-crash');
const { token: TOKEN, members } = publisherAndConsumer(ws);
const sql = sqlOn(db);
const LEASE_MS = 30_000;
const leaseEnv = (instance: string) => ({
  NSD_ADMIN_TOKEN: TOKEN,
  NSD_AUTHORITY_LEASE_MS: String(LEASE_MS),
  NSD_INSTANCE: instance,
});

describe('decision 0600: a SIGKILLed nsd is taken over before its lease could have ended', () => {
  it('the standby waits while the holder lives; after SIGKILL it takes over with epoch + 1 well within the running lease', async () => {
    const active = await startNsd(ws, db, members, leaseEnv('nsd-a'));
    const standby = start('nsd', nsdEnv(ws, db, members, { ...leaseEnv('nsd-b'), NSD_PORT: String(active.port) }));
    ws.procs.push(standby);
    expect(await standby.waitFor((x) => x['event'] === 'standby')).toMatchObject({
      holder: 'nsd-a',
      epoch: String(active.epoch),
    });
    // decision 0650: the standby's lease renewal thread boots while it waits, renewing nothing
    await standby.waitFor((x) => x['event'] === 'lease-renewer-standing-by');
    // the holder lives: several of the standby's waits pass without a takeover (its session holds the lock)
    await sleep(3_000);
    expect(
      standby.lines.filter((l) => l['event'] === 'epoch-taken-over' || l['event'] === 'holder-session-ended'),
    ).toEqual([]);

    const [lease] = await sql(`SELECT lease_until FROM service_control.authority_lease WHERE id = 1`);
    const killedAt = Date.now();
    active.proc.child.kill('SIGKILL');
    const taken = await standby.waitFor((x) => x['event'] === 'listening', LEASE_MS / 2);
    expect(taken['epoch']).toBe(String(active.epoch + 1n));
    expect(taken['port']).toBe(active.port);
    // by the database's clock the killed holder's lease was still running: only its ended session allowed this
    const [still] = await sql(`SELECT clock_timestamp() < $1::timestamptz AS before`, [lease?.['lease_until']]);
    expect(still?.['before']).toBe(true);
    expect(Date.parse(taken['time'] as string) - killedAt).toBeLessThan(LEASE_MS / 2);
    expect(standby.lines.find((l) => l['event'] === 'epoch-taken-over')).toMatchObject({ holder_session_ended: true });
    // the thread booted while standing by renews the new epoch's lease: no other thread was started at the takeover
    await standby.waitFor((x) => x['event'] === 'lease-renewer-running');
    expect(standby.lines.filter((l) => l['event'] === 'lease-renewer-started')).toEqual([
      expect.objectContaining({ epoch: String(active.epoch + 1n) }),
    ]);
    expect(standby.lines.filter((l) => l['event'] === 'lease-renewer-standing-by')).toHaveLength(1);

    standby.child.kill('SIGTERM');
    expect((await standby.exited).code).toBe(0);
  }, 90_000);

  it('with --authority-holder-sessions=off (a pooler deployment) the standby waits out the killed holder’s lease', async () => {
    const short = (instance: string) => ({
      ...leaseEnv(instance),
      NSD_AUTHORITY_LEASE_MS: '4000',
      NSD_AUTHORITY_HOLDER_SESSIONS: 'off',
    });
    const active = await startNsd(ws, db, members, short('nsd-c'));
    const standby = start('nsd', nsdEnv(ws, db, members, { ...short('nsd-d'), NSD_PORT: String(active.port) }));
    ws.procs.push(standby);
    await standby.waitFor((x) => x['event'] === 'standby');
    const [lease] = await sql(`SELECT lease_until, session_epoch FROM service_control.authority_lease WHERE id = 1`);
    expect(lease?.['session_epoch']).toBeNull(); // the holder took no presence lock
    active.proc.child.kill('SIGKILL');
    const taken = await standby.waitFor((x) => x['event'] === 'listening', LEASE_MS);
    expect(taken['epoch']).toBe(String(active.epoch + 1n));
    // by the database's clock the killed holder's lease had ended: nothing but the lease let the standby in
    const [after] = await sql(`SELECT clock_timestamp() >= $1::timestamptz AS ended`, [lease?.['lease_until']]);
    expect(after?.['ended']).toBe(true);
    const tookOver = standby.lines.find((l) => l['event'] === 'epoch-taken-over');
    expect(tookOver).toMatchObject({ event: 'epoch-taken-over', epoch: String(active.epoch + 1n) });
    expect(tookOver?.['holder_session_ended'] ?? false).toBe(false);

    standby.child.kill('SIGTERM');
    expect((await standby.exited).code).toBe(0);
  }, 90_000);
});

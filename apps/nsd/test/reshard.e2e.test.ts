// `nsd reshard --shard-count N` between real processes (decision 0489): two leased nsd of a 2-shard database hold
// their shards, so the re-shard is refused (exit 1, the holders named, nothing written); once both are stopped it
// rewrites the authority rows for 3 shards (exit 0). A process of the former count then exits at start with the
// message that says what to do; the processes of the new count take over above every former epoch.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { nsdEnv, processWorkspace, start, startNsd } from './processes.js';

const db = useDatabase('nsd_reshard');
const sql = sqlOn(db);
const ws = processWorkspace('nsd-reshard');

/** `nsd reshard …` on the test's database: its exit code and its JSON lines (message + annotations). */
const reshard = (args: readonly string[]) =>
  new Promise<{ code: number | null; lines: Record<string, unknown>[] }>((resolve) => {
    const child = spawn(
      process.execPath,
      ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts', 'reshard', ...args],
      {
        cwd: join(import.meta.dirname, '..'),
        env: { ...process.env, ...nsdEnv(ws, db, []) },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.on('exit', (code) =>
      resolve({
        code,
        lines: out
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => {
            const r = JSON.parse(l) as { message: string; annotations: Record<string, unknown> };
            return { event: r.message, ...r.annotations };
          }),
      }),
    );
  });
const rows = () =>
  sql(
    `SELECT a.id, a.epoch::text AS epoch, a.shard_count, l.holder FROM service_control.authority a LEFT JOIN service_control.authority_lease l USING (id) ORDER BY a.id`,
  );

describe('nsd reshard (decision 0489)', () => {
  it('refused while the shards’ holders run; done once they are stopped; the former count is refused at start with what to do, the new count takes over', async () => {
    const lease = { NSD_AUTHORITY_LEASE_MS: '30000' };
    const nsd1 = await startNsd(ws, db, [], { ...lease, NSD_SHARD: '1/2', NSD_INSTANCE: 'nsd-1' });
    const nsd2 = await startNsd(ws, db, [], { ...lease, NSD_SHARD: '2/2', NSD_INSTANCE: 'nsd-2' });
    const before = await rows();
    expect(before.map((r) => [r['id'], r['shard_count'], r['holder']])).toEqual([
      [1, 2, 'nsd-1'],
      [2, 2, 'nsd-2'],
    ]);
    const refused = await reshard(['--shard-count', '3']);
    expect(refused.code).toBe(1);
    expect(refused.lines).toEqual([
      expect.objectContaining({
        event: 'refused',
        reason: expect.stringMatching(
          /^shards 1\/2 \(holder nsd-1\), 2\/2 \(holder nsd-2\) still hold a live lease: stop every nsd/,
        ),
      }),
    ]);
    expect(await rows()).toEqual(before);
    // both stop (SIGTERM releases the lease): the re-shard is done
    for (const p of [nsd1.proc, nsd2.proc]) {
      p.child.kill('SIGTERM');
      await p.exited;
    }
    const done = await reshard(['--shard-count=3']);
    expect(done).toEqual({
      code: 0,
      lines: [expect.objectContaining({ event: 'resharded', from: 2, to: 3, epoch: '2' })],
    });
    expect(await rows()).toEqual([1, 2, 3].map((id) => ({ id, epoch: '2', shard_count: 3, holder: null })));
    // a process of the former count: exit 1 at start, told how to proceed
    const stale = start('nsd', nsdEnv(ws, db, [], { NSD_SHARD: '1/2' }));
    ws.procs.push(stale);
    expect((await stale.exited).code).toBe(1);
    expect(JSON.stringify(stale.lines)).toContain(
      "authority shard count 2 differs from the database's 3: run every nsd of this database with --shard k/3, or change the count offline — stop every nsd, run `nsd reshard --shard-count 2` once",
    );
    // the new count: shard 3/3 takes over above every former epoch
    const nsd3 = await startNsd(ws, db, [], { NSD_SHARD: '3/3' });
    expect(nsd3.epoch).toBe(3n);
  });
});

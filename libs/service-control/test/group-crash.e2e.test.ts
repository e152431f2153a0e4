// Crash points inside a group commit (decisions 0330, 0405) on the machine's PostgreSQL: a child process (fixtures/
// group-crash.ts) sends four report.replace requests of four scopes — or four consumers' lease.acquire of one Network —
// at once, so that they commit as one group, and SIGKILLs itself right after the group's COMMIT before any reply, or
// after the first reply. Evidence: the replies the child wrote before it died and the rows it left. Every reply
// written stands for a committed row (nothing acknowledged is lost), and the group is all or nothing: every member of
// the committed group is there.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';

const MEMBERS = 4;

const crash = async (
  db: ReturnType<typeof useDatabase>,
  point: 'group-commit' | 'group-reply' | 'acquire-commit' | 'acquire-reply' | 'refresh-commit' | 'refresh-reply',
) => {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(import.meta.dirname, 'fixtures/group-crash.ts'),
      JSON.stringify(db.config),
      point,
      String(MEMBERS),
    ],
    { cwd: join(import.meta.dirname, '..'), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_c, s) => resolve(s)));
  const lines = stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const ready = lines.find((l) => l['event'] === 'ready');
  expect(ready?.['identities'], stderr).toEqual(expect.arrayContaining([expect.any(String)]));
  const revisions = new Map(
    (
      (await sqlOn(db)(`SELECT encode(identity, 'hex') AS i, revision FROM service_control.report`)) as {
        i: string;
        revision: string;
      }[]
    ).map((r) => [r.i, r.revision]),
  );
  // each consumer's committed acquire: its mark's seq and its items' results (one per service)
  const acquired = new Map(
    (
      (await sqlOn(db)(
        `SELECT encode(m.holder, 'hex') AS h, m.seq::text AS seq,
           (SELECT array_agg(i.result || ':' || (g.grant_id IS NOT NULL)::text ORDER BY i.service_id)
              FROM service_control.lease_acquire_item i LEFT JOIN service_control.lease_grant g ON g.grant_id = i.grant_id
             WHERE i.holder = m.holder AND i.request_id = m.request_id) AS items
         FROM service_control.lease_mark m WHERE m.space = '\\x'::bytea`,
      )) as { h: string; seq: string; items: string[] | null }[]
    ).map((r) => [r.h, `${r.seq} ${(r.items ?? []).join(' ')}`]),
  );
  // each publisher's committed ready/refresh: its refresh mark's seq and the kind of the mark's request's grant
  const refreshed = new Map(
    (
      (await sqlOn(db)(
        `SELECT encode(m.holder, 'hex') AS h, m.seq::text AS seq,
           (SELECT g.kind FROM service_control.lease_grant g WHERE g.holder = m.holder AND g.request_id = m.request_id) AS kind
         FROM service_control.lease_mark m WHERE m.space <> '\\x'::bytea`,
      )) as { h: string; seq: string; kind: string | null }[]
    ).map((r) => [r.h, `${r.seq} ${r.kind}`]),
  );
  return {
    signal,
    stderr,
    identities: ready?.['identities'] as string[],
    replies: lines.filter((l) => l['event'] === 'reply'),
    revisions,
    acquired,
    refreshed,
  };
};

describe('group commit crash points (decision 0330)', () => {
  const atCommit = useDatabase('sc_group_crash_commit');
  const atReply = useDatabase('sc_group_crash_reply');

  it('M6-58 SIGKILL after the group COMMIT, before any reply: no answer left the process, every member of the group is committed', async () => {
    const r = await crash(atCommit, 'group-commit');
    expect(r.signal, r.stderr).toBe('SIGKILL');
    expect(r.replies).toEqual([]);
    // all or nothing: the one COMMIT carried every member's report (a retransmission finds it: idempotent answer)
    expect(r.identities.map((i) => r.revisions.get(i))).toEqual(Array(MEMBERS).fill('2'));
  });

  it('M6-58 SIGKILL after the first reply of a group: the acknowledged report is committed, and so is every other member', async () => {
    const r = await crash(atReply, 'group-reply');
    expect(r.signal, r.stderr).toBe('SIGKILL');
    expect(r.replies.map((l) => l['kind'])).toEqual(['report.accepted']); // exactly one answer left, then the kill
    const acknowledged = r.replies[0]?.['identity'] as string;
    expect(r.revisions.get(acknowledged)).toBe('2'); // nothing acknowledged is lost
    expect(r.identities.map((i) => r.revisions.get(i))).toEqual(Array(MEMBERS).fill('2'));
  });
});

describe('acquire group crash points (decision 0405)', () => {
  const atCommit = useDatabase('sc_acquire_crash_commit');
  const atReply = useDatabase('sc_acquire_crash_reply');
  /** A consumer's committed acquire: mark seq 1, both services granted with their grant rows. */
  const GRANTED = '1 granted:true granted:true';

  it('M6-35 M6-58 SIGKILL after the COMMIT of a group of four consumers’ acquires of one Network, before any reply: no answer left the process, every acquire is committed with its grants', async () => {
    const r = await crash(atCommit, 'acquire-commit');
    expect(r.signal, r.stderr).toBe('SIGKILL');
    expect(r.replies).toEqual([]);
    expect(r.identities.map((i) => r.acquired.get(i))).toEqual(Array(MEMBERS).fill(GRANTED));
  });

  it('M6-35 M6-58 SIGKILL after the first reply of an acquire group: the acknowledged grants are committed, and so is every other member', async () => {
    const r = await crash(atReply, 'acquire-reply');
    expect(r.signal, r.stderr).toBe('SIGKILL');
    expect(r.replies.map((l) => [l['kind'], l['results']])).toEqual([['lease.result', ['granted', 'granted']]]);
    expect(r.acquired.get(r.replies[0]?.['identity'] as string)).toBe(GRANTED); // nothing acknowledged is lost
    expect(r.identities.map((i) => r.acquired.get(i))).toEqual(Array(MEMBERS).fill(GRANTED));
  });
});

describe('refresh group crash points (decision 0640)', () => {
  const atCommit = useDatabase('sc_refresh_crash_commit');
  const atReply = useDatabase('sc_refresh_crash_reply');
  /** A publisher's committed refresh: its mark at seq 2 and that request's grant, a refresh. */
  const REFRESHED = '2 refresh';

  it('M6-31 M6-58 SIGKILL after the COMMIT of one statement for four publishers’ refreshes, before any reply: no answer left the process, every refresh is committed with its grant', async () => {
    const r = await crash(atCommit, 'refresh-commit');
    expect(r.signal, r.stderr).toBe('SIGKILL');
    expect(r.replies).toEqual([]);
    expect(r.identities.map((i) => r.refreshed.get(i))).toEqual(Array(MEMBERS).fill(REFRESHED));
  });

  it('M6-31 M6-58 SIGKILL after the first reply of a refresh group statement: the acknowledged grant is committed, and so is every other member', async () => {
    const r = await crash(atReply, 'refresh-reply');
    expect(r.signal, r.stderr).toBe('SIGKILL');
    expect(r.replies.map((l) => [l['kind'], l['results']])).toEqual([['lease.result', ['granted']]]);
    expect(r.refreshed.get(r.replies[0]?.['identity'] as string)).toBe(REFRESHED); // nothing acknowledged is lost
    expect(r.identities.map((i) => r.refreshed.get(i))).toEqual(Array(MEMBERS).fill(REFRESHED));
  });
});

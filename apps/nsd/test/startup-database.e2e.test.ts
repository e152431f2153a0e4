// Decision 0288: a database PostgreSQL refuses is exit 5 with one line (no listener, no stack trace), checked against
// the test bed's real PostgreSQL: a database name that does not exist, and a user that does not exist. Decision 0720:
// a server that does not autovacuum is served, with a `database-warning` line at start-up.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { adminQuery, testbed, useDatabase } from '@homelab/testbed/vitest';
import { processWorkspace, startNsd } from './processes.js';

const appDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = mkdtempSync(join(tmpdir(), 'nsd-db-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (env: Record<string, string>) => {
  const pg = testbed().postgres;
  return spawnSync(process.execPath, ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts'], {
    cwd: appDir,
    env: {
      PATH: process.env['PATH'] ?? '',
      NSD_PORT: '0',
      NSD_KEY_FILE: join(dir, 'key.pem'),
      NSD_DB_HOST: pg.host,
      NSD_DB_PORT: String(pg.port),
      NSD_DB_USER: pg.user,
      ...env,
    },
    encoding: 'utf8',
    timeout: 60_000,
  });
};

describe('nsd with database settings PostgreSQL refuses', () => {
  it('a database that does not exist: exit 5, one line with PostgreSQL’s reason', () => {
    const r = run({ NSD_DB_NAME: 'homelab_no_such_database' });
    expect(r.status).toBe(5);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^nsd: database .*\/homelab_no_such_database: .*does not exist/),
    ]);
    expect(r.stdout).not.toContain('"listening"');
  });

  it('a role that does not exist: exit 5', () => {
    const r = run({ NSD_DB_USER: 'homelab_no_such_role', NSD_DB_NAME: 'postgres' });
    expect(r.status).toBe(5);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^nsd: database homelab_no_such_role@.*role .* does not exist/),
    ]);
  });
});

const db = useDatabase('nsd_maintenance');
const ws = processWorkspace('nsd-maintenance');

describe('nsd on a server that does not clean its tables up', () => {
  // the machine's PostgreSQL decides which way this runs (CI's runs with autovacuum off); both ways are checked
  it('autovacuum off: serves, and logs one database-warning naming autovacuum; on: no warning', async () => {
    const [setting] = (await adminQuery(`SELECT current_setting('autovacuum') AS v`)).rows as { v: string }[];
    const nsd = await startNsd(ws, db, []);
    const warnings = nsd.proc.lines.filter((l) => l['event'] === 'database-warning');
    if (setting?.v === 'off') {
      expect(warnings).toHaveLength(1);
      expect(String(warnings[0]?.['warning'])).toMatch(/^autovacuum is off on this PostgreSQL server/);
    } else {
      expect(setting?.v).toBe('on');
      expect(warnings).toEqual([]);
    }
    nsd.proc.child.kill('SIGTERM');
    await nsd.proc.exited;
  });
});

// nsd's process loads PostgreSQL code and never Kubernetes code (design rule); configuration is explicit.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';

const db = useDatabase('nsd_b');
const dir = mkdtempSync(join(tmpdir(), 'nsd-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('nsd', () => {
  it('the running process has loaded pg and never @kubernetes/client-node or SQLite', async () => {
    const trace = join(dir, 'trace.txt');
    writeFileSync(trace, '');
    const child = spawn(
      process.execPath,
      ['--conditions=@homelab/source', '--import', './test/fixtures/trace.mjs', '--import', 'tsx', 'src/main.ts'],
      {
        cwd: join(import.meta.dirname, '..'),
        env: {
          ...process.env,
          TRACE_FILE: trace,
          NSD_PORT: '0',
          NSD_DB_HOST: db.host,
          NSD_DB_PORT: String(db.port),
          NSD_DB_USER: db.user,
          NSD_DB_NAME: db.database,
          NSD_KEY_FILE: join(dir, 'k.pem'),
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (c: Buffer) => (c.toString().includes('"listening"') ? resolve() : undefined)),
    );
    child.kill('SIGTERM');
    const exit = await new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    expect(exit).toBe(0); // graceful shutdown
    const urls = readFileSync(trace, 'utf8').split('\n');
    expect({
      pg: urls.some((u) => /\/node_modules\/pg\//.test(u)),
      kube: urls.some((u) => u.includes('/node_modules/@kubernetes/')),
      sqlite: urls.some((u) => u.includes('/node_modules/better-sqlite3/')),
    }).toEqual({ pg: true, kube: false, sqlite: false });
  });

  it('configuration: flags override environment, members are checked', () => {
    const c = loadConfig({ NSD_PORT: '1', NSD_MEMBERS: `${'a'.repeat(64)}:${'b'.repeat(32)}` }, [
      '--port=2',
      '--db-name',
      'x',
    ]);
    if ('help' in c) throw new Error('expected a configuration');
    expect([c.port, c.database.database, c.members.length]).toEqual([2, 'x', 1]);
    expect(() => loadConfig({ NSD_MEMBERS: 'nope' }, [])).toThrow(/bad member/);
  });
});

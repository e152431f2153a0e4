// Decision 0288: nsd's start-up failures through the real process — each its own exit code, one line on stderr, no
// stack trace, and `--help` lists the codes. The key file comes first (exit 4: unreadable, not writable, not a key);
// the database settings are startup-database.e2e.test.ts (they need PostgreSQL).
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const appDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = mkdtempSync(join(tmpdir(), 'nsd-startup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const runNsd = (env: Record<string, string>, args: string[] = []) =>
  spawnSync(process.execPath, ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts', ...args], {
    cwd: appDir,
    // port 9 on loopback: nothing listens, so a test that got past the key would fail on the database, not hang
    env: { PATH: process.env['PATH'] ?? '', NSD_PORT: '0', NSD_DB_HOST: '127.0.0.1', NSD_DB_PORT: '9', ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });

const oneLine = (stderr: string) => stderr.trim().split('\n');

describe('nsd start-up failures', () => {
  it('--help lists the exit codes', () => {
    const r = runNsd({}, ['--help']);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('Exit codes:');
    expect(r.stdout).toMatch(/ {2}4 {2}the key file/);
    expect(r.stdout).toMatch(/ {2}5 {2}PostgreSQL refuses/);
  });

  it('a key file that is not an Ed25519 key: exit 4, one line naming the file', () => {
    const key = join(dir, 'garbage.pem');
    writeFileSync(key, 'not a key\n');
    const r = runNsd({ NSD_KEY_FILE: key });
    expect(r.status).toBe(4);
    expect(oneLine(r.stderr)).toEqual([
      expect.stringMatching(/^nsd: key file .*garbage\.pem: not an Ed25519 private key/),
    ]);
  });

  it('a key file that cannot be read (a directory): exit 4', () => {
    const key = join(dir, 'a-directory.pem');
    mkdirSync(key);
    const r = runNsd({ NSD_KEY_FILE: key });
    expect(r.status).toBe(4);
    expect(oneLine(r.stderr)).toEqual([
      expect.stringMatching(/^nsd: key file .*a-directory\.pem: cannot read it: EISDIR/),
    ]);
  });

  it('a key file that cannot be created (its directory is missing): exit 4', () => {
    const r = runNsd({ NSD_KEY_FILE: join(dir, 'missing', 'key.pem') });
    expect(r.status).toBe(4);
    expect(oneLine(r.stderr)).toEqual([expect.stringMatching(/^nsd: key file .*: cannot create it: ENOENT/)]);
  });

  it('a usable key and nothing listening at the database address: exit 5, not 4', () => {
    const key = join(dir, 'fresh.pem');
    const r = runNsd({ NSD_KEY_FILE: key });
    expect(r.status).toBe(5);
    expect(oneLine(r.stderr)).toEqual([
      expect.stringMatching(/^nsd: database postgres@127\.0\.0\.1:9\/nsd: .*ECONNREFUSED/),
    ]);
  });
});

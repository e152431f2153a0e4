// Decision 0288: ns-daemon's start-up failures through the real process — each its own exit code, one line on stderr,
// no stack trace; `--help` lists the codes. Exit 3: another daemon holds the state file (state-lock.e2e.test.ts);
// exit 4: the key file cannot be created, read or parsed.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const appDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = mkdtempSync(join(tmpdir(), 'ns-startup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (env: Record<string, string>, args: string[] = []) =>
  spawnSync(process.execPath, ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts', ...args], {
    cwd: appDir,
    env: {
      PATH: process.env['PATH'] ?? '',
      NS_NSD_KEY: 'c'.repeat(64),
      NS_NETWORK: 'd'.repeat(32),
      NS_NSD_URL: 'http://127.0.0.1:9',
      NS_PORT: '0',
      ...env,
    },
    encoding: 'utf8',
    timeout: 60_000,
  });

describe('ns-daemon start-up failures', () => {
  it('--help lists the exit codes', () => {
    const r = run({}, ['--help']);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(
      /Exit codes:\n {2}0 .*\n {2}1 .*\n {2}2 .*\n {2}3 {2}another daemon holds the state file\n {2}4 {2}the key file/,
    );
  });

  it('a key file that is not an Ed25519 key: exit 4, one line naming the file, no state opened past the lock', () => {
    const key = join(dir, 'garbage.pem');
    writeFileSync(key, '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n');
    const r = run({ NS_KEY_FILE: key, NS_STATE_FILE: join(dir, 'a.db') });
    expect(r.status).toBe(4);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^ns-daemon: key file .*garbage\.pem: not an Ed25519 private key in PEM: /),
    ]);
    expect(r.stdout).not.toContain('"listening"');
  });

  it('a key file that cannot be read (a directory): exit 4', () => {
    const key = join(dir, 'a-directory.pem');
    mkdirSync(key);
    const r = run({ NS_KEY_FILE: key, NS_STATE_FILE: join(dir, 'b.db') });
    expect(r.status).toBe(4);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^ns-daemon: key file .*: cannot read it: EISDIR/),
    ]);
  });

  it('a key file that cannot be created (its directory is missing): exit 4, and no key appears', () => {
    const key = join(dir, 'missing', 'key.pem');
    const r = run({ NS_KEY_FILE: key, NS_STATE_FILE: join(dir, 'c.db') });
    expect(r.status).toBe(4);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^ns-daemon: key file .*: cannot create it: ENOENT/),
    ]);
    expect(existsSync(key)).toBe(false);
  });
});

// issue 26 item 6: the daemon's command line through the real process — `--help` starts nothing (no key, no state
// file), a refused flag or value is one line on stderr and exit 2 (no stack trace), and the table parser itself.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigurationError } from '@homelab/service-control/process';
import { loadConfig } from '../src/config.js';

const appDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = mkdtempSync(join(tmpdir(), 'ns-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const valid = { NS_NSD_KEY: 'c'.repeat(64), NS_NETWORK: 'd'.repeat(32) };

const run = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts', ...args], {
    cwd: appDir,
    env: {
      PATH: process.env['PATH'] ?? '',
      NS_KEY_FILE: join(dir, 'key.pem'),
      NS_STATE_FILE: join(dir, 'state.db'),
      ...env,
    },
    encoding: 'utf8',
    timeout: 60_000,
  });

describe('ns-daemon command line', () => {
  it('--help prints every flag with its environment variable and exits 0, creating nothing', () => {
    const r = run(['--help'], valid);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: ns-daemon /);
    expect(r.stdout).toContain('[NS_DNS_PORT]');
    expect([existsSync(join(dir, 'key.pem')), existsSync(join(dir, 'state.db'))]).toEqual([false, false]);
  });

  it('an unknown flag is one line on stderr and exit 2', () => {
    const r = run(['--nsd-url=http://127.0.0.1:1', '--bogus'], valid);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^ns-daemon: configuration: .*--bogus/)]);
    expect(existsSync(join(dir, 'key.pem'))).toBe(false);
  });

  it('a missing required setting names it in one line, exit 2', () => {
    const r = run([]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toBe(
      'ns-daemon: configuration: NS_NSD_KEY / --nsd-key must be the NSD public key as 64 lowercase hex',
    );
  });

  it('--flag value and --flag=value mean the same; stray arguments are refused', () => {
    const a = loadConfig(valid, ['--state-file', '/tmp/x.db', '--port=7']);
    const b = loadConfig(valid, ['--state-file=/tmp/x.db', '--port', '7']);
    if ('help' in a || 'help' in b) throw new Error('expected configurations');
    expect([a.stateFile, a.port]).toEqual(['/tmp/x.db', 7]);
    expect(b).toEqual(a);
    expect(() => loadConfig(valid, ['serve'])).toThrow(ConfigurationError);
    expect(() => loadConfig(valid, ['--port=70000'])).toThrow(/0\.\.65535/);
  });
});

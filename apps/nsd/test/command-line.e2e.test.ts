// issue 26 item 6: nsd's command line through the real process — `--help` creates nothing, a refused flag or value
// is one line on stderr and exit 2 (no stack trace), and the table parser itself.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigurationError } from '@homelab/service-control/process';
import { loadConfig } from '../src/config.js';

const appDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = mkdtempSync(join(tmpdir(), 'nsd-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts', ...args], {
    cwd: appDir,
    env: { PATH: process.env['PATH'] ?? '', NSD_KEY_FILE: join(dir, 'key.pem'), ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });

describe('nsd command line', () => {
  it('--help prints every flag with its environment variable and exits 0 without writing the key file', () => {
    const r = run(['--help']);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: nsd /);
    expect(r.stdout).toContain('--db-host');
    expect(r.stdout).toContain('[NSD_ADMIN_TOKEN]');
    expect(r.stdout).toContain('--max-unary-in-flight');
    expect(existsSync(join(dir, 'key.pem'))).toBe(false);
  });

  it('an unknown flag is one line on stderr and exit 2, and nothing is created', () => {
    const r = run(['--no-such-flag=1']);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^nsd: configuration: .*--no-such-flag/)]);
    expect(existsSync(join(dir, 'key.pem'))).toBe(false);
  });

  it('a bad value from the environment is refused the same way', () => {
    const r = run([], { NSD_PORT: 'http' });
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toBe('nsd: configuration: --port must be a port 0..65535, not "http"');
  });

  it('--flag value and --flag=value mean the same; a flag beats its environment variable', () => {
    const a = loadConfig({ NSD_HOST: '127.0.0.2' }, ['--host', '127.0.0.3', '--port=7']);
    const b = loadConfig({}, ['--host=127.0.0.3', '--port', '7']);
    if ('help' in a || 'help' in b) throw new Error('expected configurations');
    expect([a.host, a.port]).toEqual(['127.0.0.3', 7]);
    expect(b).toEqual(a);
    expect(() => loadConfig({}, ['stray'])).toThrow(ConfigurationError);
    expect(() => loadConfig({}, ['--port'])).toThrow(/--port/);
  });

  it('decision 0620: at most 64 unary requests in flight unless told otherwise; a bound below 1 refused', () => {
    const d = loadConfig({}, []);
    const c = loadConfig({ NSD_MAX_UNARY_IN_FLIGHT: '128' }, []);
    if ('help' in d || 'help' in c) throw new Error('expected configurations');
    expect([d.maxUnaryInFlight, c.maxUnaryInFlight]).toEqual([64, 128]);
    expect(() => loadConfig({}, ['--max-unary-in-flight=0'])).toThrow(/--max-unary-in-flight/);
    expect(() => loadConfig({}, ['--max-unary-in-flight', 'many'])).toThrow(/--max-unary-in-flight/);
  });

  it('decision 0470: the lease is renewed on a thread with a 10 s liveness bound unless told otherwise; bad values refused', () => {
    const d = loadConfig({}, []);
    const c = loadConfig({ NSD_AUTHORITY_RENEWAL: 'loop', NSD_TEST_BLOCK_LOOP: '2500x4' }, [
      '--authority-liveness-ms=6000',
    ]);
    if ('help' in d || 'help' in c) throw new Error('expected configurations');
    expect([d.authorityRenewal, d.authorityLivenessMs, d.testBlockLoop]).toEqual(['thread', 10_000, null]);
    expect([c.authorityRenewal, c.authorityLivenessMs, c.testBlockLoop]).toEqual([
      'loop',
      6_000,
      { ms: 2500, times: 4 },
    ]);
    expect(() => loadConfig({}, ['--authority-renewal=timer'])).toThrow(/--authority-renewal/);
    expect(() => loadConfig({}, ['--authority-liveness-ms=99'])).toThrow(/--authority-liveness-ms/);
    expect(() => loadConfig({}, ['--test-block-loop=5'])).toThrow(/--test-block-loop/);
  });

  it('decision 0600: a crashed holder is watched through its database session unless --authority-holder-sessions=off', () => {
    const d = loadConfig({}, []);
    const off = loadConfig({ NSD_AUTHORITY_HOLDER_SESSIONS: 'off' }, []);
    if ('help' in d || 'help' in off) throw new Error('expected configurations');
    expect([d.authorityHolderSessions, off.authorityHolderSessions]).toEqual([true, false]);
    expect(() => loadConfig({}, ['--authority-holder-sessions=no'])).toThrow(/--authority-holder-sessions/);
  });
});

// issue 26 item 6: the controller's command line through the real process — `--help` prints the flag table and
// starts nothing; an unknown flag or a stray argument is one configuration line and exit 2, never a listener.
// Issue 18 item 5: a refused start is one line on stderr with its own exit code — 3 the Kubernetes client, 4 the
// control-plane database — never a stack trace.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CONTROLLER_FLAGS, ConfigError, parseConfig } from '../src/config.js';
import { closedPort, spawnController } from './support.js';

describe('controller command line', () => {
  const children: ChildProcess[] = [];
  afterAll(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

  it('--help prints every flag with its environment variable and exits 0 without listening', async () => {
    const p = spawnController(['--help'], children);
    expect(await p.exited).toBe(0);
    expect(await p.listening).toBeUndefined();
    expect(p.output.text).toMatch(/^usage: controller /);
    for (const f of CONTROLLER_FLAGS) expect(p.output.text).toContain(`--${f.name}`);
    expect(p.output.text).toContain('[KOS_CONTINUE_KEY]');
  });

  it('an unknown flag is one line and exit 2; the server never listens', async () => {
    const p = spawnController(['--modules=kos', '--prot=9090'], children);
    expect(await p.exited).toBe(2);
    expect(await p.listening).toBeUndefined();
    expect(p.output.text.trim()).toBe('configuration: unknown flag --prot (see --help)');
  });

  it('stray arguments and value flags without a value are refused; both flag spellings still work', () => {
    expect(() => parseConfig(['kos'], {})).toThrow(new ConfigError('unexpected argument "kos" (see --help)'));
    expect(() => parseConfig(['--kos-crds'], {})).toThrow(new ConfigError('--kos-crds needs a value'));
    expect(() => parseConfig(['--kos-crds', '--port=1'], {})).toThrow(new ConfigError('--kos-crds needs a value'));
    expect(parseConfig(['--kos-crds', 'install', '--port=1'], {})).toMatchObject({ kosCrds: 'install', port: 1 });
    expect(parseConfig(['--kos-crds=install', '--port', '1'], {})).toMatchObject({ kosCrds: 'install', port: 1 });
  });

  it('--help lists the exit codes', async () => {
    const p = spawnController(['--help'], children);
    expect(await p.exited).toBe(0);
    for (const code of [
      '0  stopped',
      '1  start refused',
      '2  configuration',
      '3  the Kubernetes client',
      '4  the control-plane database',
    ])
      expect(p.output.text).toContain(code);
  });

  it('a kubeconfig that cannot be loaded is one line on stderr and exit 3; nothing listens', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'controller-exit-'));
    try {
      const p = spawnController(['--modules=kos', `--kubeconfig=${join(dir, 'missing-kubeconfig')}`], children);
      expect(await p.exited).toBe(3);
      expect(await p.listening).toBeUndefined();
      const lines = p.output.text.trim().split('\n');
      expect(lines.at(-1)).toMatch(
        /^controller failed to start: Kubernetes client: loading kube config: .*missing-kubeconfig/,
      );
      expect(p.output.text).not.toMatch(/^\s+at /m); // no stack trace
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a control-plane database that cannot be opened is one line on stderr and exit 4; nothing listens', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'controller-exit-'));
    try {
      // a loadable kubeconfig (its server is a closed port: the database is opened before anything is asked of it)
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(
        kubeconfig,
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [{ name: 'c', cluster: { server: `https://127.0.0.1:${await closedPort()}` } }],
          users: [{ name: 'u', user: { token: 'not-a-real-token' } }],
          contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
          'current-context': 'x',
        }),
      );
      const db = join(dir, 'no-such-directory', 'cp.db');
      const p = spawnController(['--modules=kos', `--kubeconfig=${kubeconfig}`, `--identity-db=${db}`], children);
      expect(await p.exited).toBe(4);
      expect(await p.listening).toBeUndefined();
      const lines = p.output.text.trim().split('\n');
      expect(lines.at(-1)).toMatch(new RegExp(`^controller failed to start: the control-plane database ${db}: `));
      expect(p.output.text).not.toMatch(/^\s+at /m);
      expect(p.output.text).not.toContain('not-a-real-token');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

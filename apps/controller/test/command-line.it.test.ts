// issue 26 item 6: the controller's command line through the real process — `--help` prints the flag table and
// starts nothing; an unknown flag or a stray argument is one configuration line and exit 2, never a listener.
import type { ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { CONTROLLER_FLAGS, ConfigError, parseConfig } from '../src/config.js';
import { spawnController } from './support.js';

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
});

// One ns-daemon per state file (spec §5.16 "[D] an exclusive lock file next to the SQLite DB", decision 0265), through
// real processes: a second daemon on the same state file refuses to start (one line on stderr, exit 3) and never
// touches the state; the lock dies with its holder, even SIGKILLed, so the next daemon starts without any cleanup.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'ns-lock-'));
const children: ChildProcessByStdio<null, Readable, Readable>[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const daemon = (stateFile: string, key: string) => {
  const child = spawn(process.execPath, ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts'], {
    cwd: join(import.meta.dirname, '..'),
    env: {
      PATH: process.env['PATH'] ?? '',
      NS_NSD_URL: 'http://127.0.0.1:9',
      NS_NSD_KEY: 'a'.repeat(64),
      NS_NETWORK: 'b'.repeat(32),
      NS_KEY_FILE: join(dir, key),
      NS_STATE_FILE: stateFile,
      NS_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.on('exit', (code, signal) => r({ code, signal })),
  );
  /** Resolves true once the daemon listens, false if it exits first. */
  const started = new Promise<boolean>((resolve) => {
    child.stdout.on('data', () => (out.includes('"listening"') ? resolve(true) : undefined));
    void exited.then(() => resolve(false));
  });
  return { child, exited, started, stderr: () => err, stdout: () => out };
};

describe('the state-file lock', () => {
  it('a second ns-daemon on the same state file refuses to start; another state file starts; the lock dies with a SIGKILLed holder', async () => {
    const state = join(dir, 'state.db');
    const first = daemon(state, 'k1.pem');
    expect(await first.started).toBe(true);

    const second = daemon(state, 'k2.pem');
    expect(await second.started).toBe(false);
    expect(await second.exited).toEqual({ code: 3, signal: null });
    expect(second.stderr().trim()).toBe(
      `ns-daemon: the state file is in use by another ns-daemon (lock ${state}.lock is held)`,
    );
    expect(second.stdout()).not.toContain('"startup"'); // it never ran the daemon on the state

    // a daemon on its own state file is not blocked by the first one's lock
    const other = daemon(join(dir, 'other.db'), 'k3.pem');
    expect(await other.started).toBe(true);
    other.child.kill('SIGTERM');
    expect((await other.exited).code).toBe(0);

    // the holder dies without any cleanup: the kernel drops its lock, the next daemon starts on the same state file
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    const third = daemon(state, 'k1.pem');
    expect(await third.started).toBe(true);
    third.child.kill('SIGTERM');
    expect((await third.exited).code).toBe(0);
  });
});

// TC-72 and the offline recovery through the controller itself: a real controller (test bed kube-apiserver, real SQLite
// file) exports its database with VACUUM INTO to --export-dir, data changes, the controller stops, `controller db
// restore` (src/main.ts as a process) puts the export back, and the next start serves the accounts of the export
// moment. `controller accounts reset-owner` recovers a locked-out Owner. Without --export-dir the start says so.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect, type ManagedRuntime } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Bootstrap, Exporter, NO_TARGET_HINT } from '@homelab/kos-kernel';
import type { ControllerHandle } from '../src/index.js';
import { call, prepareCluster, startTestController } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'kos-offline-it-'));
const dbFile = join(dir, 'controlplane.db');
const exportDir = join(dir, 'exports');
const PASSWORD = 'correct horse battery staple';

/** `src/main.ts <args>` as a process; its exit code and everything it printed. */
const offline = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--conditions=@homelab/source', join(import.meta.dirname, '../src/main.ts'), ...args],
      { cwd: join(import.meta.dirname, '..'), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('exit', (code) => resolve({ code, output }));
  });

const login = (cp: ControllerHandle, name: string, password: string) =>
  call(cp.url, 'POST', '/api/v1/auth/login', { name, password });

/** Log in with a one-time password and change it to PASSWORD; the session token. */
const firstLogin = async (cp: ControllerHandle, name: string, oneTime: string) => {
  const first = await login(cp, name, oneTime);
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  const changed = await call(
    cp.url,
    'PUT',
    '/api/v1/auth/password',
    { currentPassword: oneTime, newPassword: PASSWORD },
    { authorization: `Bearer ${first.body.token}` },
  );
  expect(changed.status, JSON.stringify(changed.body)).toBe(200);
  return first.body.token as string;
};

beforeAll(async () => {
  await prepareCluster();
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('TC-72 daily export of the control-plane database and offline restore, through the controller', () => {
  it('TC-72 export, change, stop, `controller db restore`, start: the accounts of the export moment', async () => {
    let boot: Bootstrap | undefined;
    const logs: string[] = [];
    let cp = await startTestController(
      { identityDb: dbFile, exportDir },
      { onBootstrap: (b) => (boot = b), log: (l) => logs.push(l) },
    );
    let exported = '';
    try {
      if (boot === undefined) throw new Error('no bootstrap Owner');
      expect(logs.join('\n')).not.toContain('not exported');
      const owner = await firstLogin(cp, boot.name, boot.oneTimePassword);
      const kept = await call(
        cp.url,
        'POST',
        '/api/v1/accounts',
        { name: 'kept', role: 'Member' },
        { authorization: `Bearer ${owner}` },
      );
      await firstLogin(cp, 'kept', kept.body.oneTimePassword);
      // the daily export, run now through the controller's own Exporter
      const exporter = (cp.runtime as unknown as ManagedRuntime.ManagedRuntime<Exporter, never>).runPromise;
      const result = await exporter(Effect.flatMap(Exporter, (e) => e.exportNow));
      if (result.skipped) throw new Error('export skipped');
      exported = result.file;
      expect(readdirSync(exportDir)).toEqual([exported.slice(exportDir.length + 1)]);
      // after the export: one account more, one gone
      const later = await call(
        cp.url,
        'POST',
        '/api/v1/accounts',
        { name: 'later', role: 'Guest' },
        { authorization: `Bearer ${owner}` },
      );
      await firstLogin(cp, 'later', later.body.oneTimePassword);
      expect(
        (await call(cp.url, 'DELETE', '/api/v1/accounts/kept', undefined, { authorization: `Bearer ${owner}` })).status,
      ).toBe(200);
    } finally {
      await cp.close();
    }
    // a file that is not an export: refused, the database unchanged (exit 1)
    const bad = await offline(['db', 'restore', join(dir, 'nope.db'), '--identity-db', dbFile]);
    expect(bad.code, bad.output).toBe(1);
    expect(bad.output).toMatch(/restore failed, .* unchanged/);
    // no export file named: a configuration error (exit 2)
    expect((await offline(['db', 'restore', '--identity-db', dbFile])).code).toBe(2);
    const restored = await offline(['db', 'restore', exported, '--identity-db', dbFile]);
    expect(restored.code, restored.output).toBe(0);
    expect(restored.output).toContain(`restored ${dbFile}`);

    cp = await startTestController({ identityDb: dbFile });
    try {
      expect((await login(cp, 'kept', PASSWORD)).status).toBe(200);
      expect((await login(cp, 'later', PASSWORD)).status).toBe(401);
      expect((await login(cp, 'owner', PASSWORD)).status).toBe(200);
    } finally {
      await cp.close();
    }
  }, 180_000);

  it('`controller accounts reset-owner` gives a locked-out Owner a new one-time password (shown once, exit 0)', async () => {
    let cp = await startTestController({ identityDb: dbFile });
    try {
      for (let i = 0; i < 5; i++) expect((await login(cp, 'owner', `wrong ${i}`)).status).toBe(401);
      const locked = await login(cp, 'owner', PASSWORD);
      expect(locked.body.error.retryAfterSeconds).toBeGreaterThan(0);
    } finally {
      await cp.close();
    }
    const reset = await offline(['accounts', 'reset-owner', '--identity-db', dbFile]);
    expect(reset.code, reset.output).toBe(0);
    const oneTime = /one-time password \(shown once\): (\S+)/.exec(reset.output)?.[1];
    expect(oneTime).toBeDefined();
    cp = await startTestController({ identityDb: dbFile });
    try {
      const answer = await login(cp, 'owner', oneTime as string);
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body).toMatchObject({ role: 'Owner', passwordChangeRequired: true });
      expect((await login(cp, 'owner', PASSWORD)).status).toBe(401); // the old password is gone
    } finally {
      await cp.close();
    }
    expect((await offline(['accounts', 'reset-owner'])).code).toBe(2); // no --identity-db
  }, 180_000);

  it('without --export-dir the start leaves an observable hint: the log line and the Exporter status', async () => {
    const logs: string[] = [];
    const cp = await startTestController(
      { identityDb: join(dir, 'no-export.db') },
      { onBootstrap: () => undefined, log: (l) => logs.push(l) },
    );
    try {
      expect(logs.join('\n')).toContain('is not exported daily');
      const status = await (cp.runtime as unknown as ManagedRuntime.ManagedRuntime<Exporter, never>).runPromise(
        Effect.flatMap(Exporter, (e) => e.status),
      );
      expect(status.hint).toBe(NO_TARGET_HINT);
    } finally {
      await cp.close();
    }
  });
});

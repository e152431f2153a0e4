// A's store on SQLite (better-sqlite3, WAL, synchronous=FULL) on temp files.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteDaemonStore } from '../src/adapter/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'ns-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const file = () => join(dir, `state-${n++}.db`);
const id = new Uint8Array(32).fill(1);
const floors = (rev: bigint) => ({
  revision: rev,
  digest: new Uint8Array(32).fill(Number(rev)),
  listeners: new Map([
    ['svc-a', { revision: 2n, digest: null }],
    ['svc-b', { revision: 5n, digest: new Uint8Array(32).fill(4) }],
  ]),
});

describe('A on SQLite', () => {
  it('opens in WAL with synchronous=FULL and the schema name ns.service-control.v1', () => {
    const s = openSqliteDaemonStore(file());
    expect(s.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(s.db.pragma('synchronous', { simple: true })).toBe(2); // FULL
    expect(s.db.prepare("SELECT value FROM meta WHERE key = 'schema'").pluck().get()).toBe('ns.service-control.v1');
    s.close();
  });

  it('M6-8 M6-17 M6-24 every record survives a reopen exactly (runtime, binding, session seq, report, floors)', () => {
    const f = file();
    const s = openSqliteDaemonStore(f);
    s.saveRuntime(id, { state: 'recovering', generation: 9n, floorRequestId: new Uint8Array(16).fill(2) });
    const binding = {
      identity: id,
      nsdId: new Uint8Array(16).fill(5),
      networkId: new Uint8Array(16).fill(6),
      generation: 9n,
      runtimeId: new Uint8Array(16).fill(7),
      authorityEpoch: 3n,
    };
    s.saveBinding('k', binding);
    s.saveSessionSeq('k', 18446744073709551615n);
    const report = {
      state: 'present' as const,
      report: { revision: 2n, digest: new Uint8Array(32).fill(8), content: new Uint8Array([1, 2]) },
      acceptedRevision: 1n,
    };
    s.saveReport('k', report);
    s.saveFloors('k', floors(4n));
    s.close();
    const r = openSqliteDaemonStore(f);
    expect(r.runtime(id)).toEqual({ state: 'recovering', generation: 9n, floorRequestId: new Uint8Array(16).fill(2) });
    expect(r.binding('k')).toEqual(binding);
    expect(r.lastSessionSeq('k')).toBe(18446744073709551615n);
    expect(r.report('k')).toEqual(report);
    expect(r.floors('k')).toEqual({ state: 'present', floors: floors(4n) });
    expect(r.floors('other')).toEqual({ state: 'uninitialized' });
    expect(r.report('other')).toEqual({ state: 'absent' });
    r.close();
  });

  it('M6-60 M6-21 M6-24 a corrupt record is corrupt for its scope only; a vanished floor record after init is missing; a corrupt runtime record means the floor procedure', () => {
    const s = openSqliteDaemonStore(file());
    s.saveReport('a', {
      state: 'present',
      report: { revision: 1n, digest: new Uint8Array(32).fill(1), content: new Uint8Array([1]) },
      acceptedRevision: 1n,
    });
    s.saveReport('b', {
      state: 'present',
      report: { revision: 1n, digest: new Uint8Array(32).fill(1), content: new Uint8Array([1]) },
      acceptedRevision: 1n,
    });
    s.saveFloors('a', floors(1n));
    s.saveFloors('b', floors(1n));
    s.saveRuntime(id, { state: 'normal', generation: 3n });
    s.db.prepare("UPDATE record SET value = replace(value, 'n:1', 'n:2') WHERE kind = 'report' AND scope = 'a'").run();
    s.db.prepare("UPDATE record SET value = value || ' ' WHERE kind = 'floors' AND scope = 'a'").run();
    s.db.prepare("UPDATE record SET checksum = 'x' WHERE kind = 'runtime'").run();
    expect(s.report('a')).toEqual({ state: 'corrupt' });
    expect(s.floors('a')).toEqual({ state: 'corrupt' });
    expect(s.report('b').state).toBe('present');
    expect(s.floors('b').state).toBe('present');
    expect(s.runtime(id)).toEqual({ state: 'absent' });
    s.db.prepare("DELETE FROM record WHERE kind = 'floors' AND scope = 'b'").run();
    expect(s.floors('b')).toEqual({ state: 'missing' });
    s.close();
  });

  it('M6-59 a storage failure is storage-unavailable (thrown; the caller sends nothing)', () => {
    const s = openSqliteDaemonStore(file());
    s.close();
    expect(() => s.saveSessionSeq('k', 1n)).toThrow(expect.objectContaining({ code: 'storage-unavailable' }));
    expect(() => s.report('k')).toThrow(expect.objectContaining({ code: 'storage-unavailable' }));
  });

  it('a database of another schema is refused as state-inconsistent, never migrated over', () => {
    const f = file();
    const s = openSqliteDaemonStore(f);
    s.db.prepare("UPDATE meta SET value = 'something.else' WHERE key = 'schema'").run();
    s.close();
    expect(() => openSqliteDaemonStore(f)).toThrow(expect.objectContaining({ code: 'state-inconsistent' }));
  });

  it('M6-58 SIGKILL right after a commit: a restarted process finds everything written before the kill, nothing after', () => {
    for (const [killAfter, expectReport, expectSeq] of [
      ['runtime', false, false],
      ['report', true, false],
      ['session', true, true],
    ] as const) {
      const f = file();
      const r = spawnSync(
        process.execPath,
        ['--import', 'tsx', join(import.meta.dirname, 'fixtures/sqlite-crash.ts'), f, killAfter],
        {
          encoding: 'utf8',
          cwd: join(import.meta.dirname, '..'),
        },
      );
      expect(r.signal).toBe('SIGKILL');
      const s = openSqliteDaemonStore(f);
      expect(s.runtime(new Uint8Array(32).fill(3))).toEqual({ state: 'normal', generation: 7n });
      expect(s.report('scope-1').state).toBe(expectReport ? 'present' : 'absent');
      expect(s.lastSessionSeq('scope-1')).toBe(expectSeq ? 12n : null);
      s.close();
    }
  });
});

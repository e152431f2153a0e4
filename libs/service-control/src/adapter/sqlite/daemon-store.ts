// A's store on SQLite (better-sqlite3 12): WAL, synchronous=FULL, schema `ns.service-control.v1` with numbered
// migrations. Each record is one row `(kind, scope, value, checksum)`: value = canonical JSON text (bigints and bytes
// as strings), checksum = SHA-256 of the value. A checksum mismatch or an unparsable value is corruption of that one
// scope (decision 0105); an init marker row per scope turns a vanished floor record into `missing`.
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import type { DaemonStore } from '../../application/daemon-store.js';
import { fromHex, toHex } from '../../domain/bytes.js';
import { guardStorage as guard, openDaemonDatabase } from './database.js';
import type { AReportRecord } from '../../domain/report.js';
import type { ABinding, ARuntimeRecord } from '../../domain/runtime.js';
import type { AFloorRecord, SnapshotFloors } from '../../domain/snapshot.js';

export { SQLITE_SCHEMA_NAME } from './database.js';

const MIGRATIONS: readonly string[] = [
  `CREATE TABLE record (kind TEXT NOT NULL, scope TEXT NOT NULL, value TEXT NOT NULL, checksum TEXT NOT NULL,
     PRIMARY KEY (kind, scope)) STRICT;
   CREATE TABLE init_marker (kind TEXT NOT NULL, scope TEXT NOT NULL, PRIMARY KEY (kind, scope)) STRICT;`,
];

const sum = (value: string): string => createHash('sha256').update(value).digest('hex');

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const enc = (v: unknown): Json => {
  if (typeof v === 'bigint') return `n:${v.toString()}`;
  if (v instanceof Uint8Array) return `b:${toHex(v)}`;
  if (v instanceof Map) return { $map: [...v.entries()].map(([k, x]) => [enc(k), enc(x)]) as Json[] };
  if (Array.isArray(v)) return v.map(enc);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, enc(x)]));
  return v as Json;
};
const dec = (v: Json): unknown => {
  if (typeof v === 'string') {
    if (v.startsWith('n:')) return BigInt(v.slice(2));
    if (v.startsWith('b:')) return fromHex(v.slice(2));
    if (v.startsWith('s:')) return v.slice(2);
    return v;
  }
  if (Array.isArray(v)) return v.map(dec);
  if (v !== null && typeof v === 'object') {
    if ('$map' in v) return new Map((v['$map'] as Json[][]).map(([k, x]) => [dec(k as Json), dec(x as Json)]));
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, dec(x)]));
  }
  return v;
};
// plain strings that could look like tagged values are prefixed
const encStr = (v: unknown): Json => (typeof v === 'string' ? `s:${v}` : enc(v));
const serialize = (v: unknown): string => JSON.stringify(deepStr(v));
const deepStr = (v: unknown): Json => {
  if (typeof v === 'string') return encStr(v);
  if (v instanceof Map) return { $map: [...v.entries()].map(([k, x]) => [deepStr(k), deepStr(x)]) as Json[] };
  if (Array.isArray(v)) return v.map(deepStr);
  if (v !== null && typeof v === 'object' && !(v instanceof Uint8Array))
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deepStr(x)]));
  return enc(v);
};

export interface SqliteDaemonStoreOptions {
  /** Injected fault: called after each committed write with its record kind (crash-point tests). */
  readonly afterWrite?: (kind: string) => void;
}

export const openSqliteDaemonStore = (
  path: string,
  options: SqliteDaemonStoreOptions = {},
): DaemonStore & { readonly db: Database.Database } => {
  const db = openDaemonDatabase(path, { versionKey: 'version', migrations: MIGRATIONS, foreignKeys: true });
  const getStmt = db.prepare<[string, string], { value: string; checksum: string }>(
    'SELECT value, checksum FROM record WHERE kind = ? AND scope = ?',
  );
  const putStmt = db.prepare('INSERT OR REPLACE INTO record VALUES (?, ?, ?, ?)');
  const markStmt = db.prepare('INSERT OR IGNORE INTO init_marker VALUES (?, ?)');
  const hasMark = db.prepare<[string, string], { one: number }>(
    'SELECT 1 AS one FROM init_marker WHERE kind = ? AND scope = ?',
  );

  /** undefined = no row; 'corrupt' = checksum/parse failure; else the decoded value. */
  const get = (kind: string, scope: string): unknown =>
    guard(() => {
      const row = getStmt.get(kind, scope);
      if (row === undefined) return undefined;
      if (sum(row.value) !== row.checksum) return 'corrupt';
      try {
        return dec(JSON.parse(row.value) as Json);
      } catch {
        return 'corrupt';
      }
    });
  const put = (kind: string, scope: string, value: unknown, mark = false): void => {
    guard(() => {
      const text = serialize(value);
      db.transaction(() => {
        putStmt.run(kind, scope, text, sum(text));
        if (mark) markStmt.run(kind, scope);
      }).immediate();
    });
    options.afterWrite?.(kind);
  };
  const unstr = (v: unknown): unknown => v; // strings are decoded by `dec` ("s:" prefix)

  const isRec = (v: unknown): v is Record<string, unknown> =>
    v !== null && typeof v === 'object' && !(v instanceof Uint8Array) && !(v instanceof Map);

  return {
    db,
    runtime: (identity) => {
      const v = get('runtime', toHex(identity));
      if (v === undefined || v === 'corrupt' || !isRec(v)) return { state: 'absent' };
      if (v['state'] === 'normal' && typeof v['generation'] === 'bigint')
        return { state: 'normal', generation: v['generation'] };
      if (
        v['state'] === 'recovering' &&
        typeof v['generation'] === 'bigint' &&
        v['floorRequestId'] instanceof Uint8Array
      )
        return { state: 'recovering', generation: v['generation'], floorRequestId: v['floorRequestId'] };
      return { state: 'absent' };
    },
    saveRuntime: (identity, r: ARuntimeRecord) => put('runtime', toHex(identity), r),
    binding: (scope) => {
      const v = get('binding', scope);
      if (v === undefined) return null;
      if (v === 'corrupt' || !isRec(v) || typeof v['authorityEpoch'] !== 'bigint') return 'corrupt';
      return v as unknown as ABinding;
    },
    saveBinding: (scope, b) => put('binding', scope, b),
    lastSessionSeq: (scope) => {
      const v = get('session', scope);
      if (v === undefined) return null;
      return typeof v === 'bigint' ? v : 'corrupt';
    },
    saveSessionSeq: (scope, seq) => put('session', scope, seq),
    report: (scope): AReportRecord => {
      const v = get('report', scope);
      if (v === undefined) return { state: 'absent' };
      if (v === 'corrupt' || !isRec(v) || !isRec(v['report']) || typeof v['acceptedRevision'] !== 'bigint')
        return { state: 'corrupt' };
      const r = v['report'];
      if (
        typeof r['revision'] !== 'bigint' ||
        !(r['digest'] instanceof Uint8Array) ||
        !(r['content'] instanceof Uint8Array) ||
        r['digest'].length !== 32
      )
        return { state: 'corrupt' };
      return {
        state: 'present',
        report: { revision: r['revision'], digest: r['digest'], content: r['content'] },
        acceptedRevision: v['acceptedRevision'],
      };
    },
    saveReport: (scope, r) => {
      if (r.state !== 'present') throw new Error('only a present report row is written');
      put('report', scope, { report: r.report, acceptedRevision: r.acceptedRevision });
    },
    floors: (scope): AFloorRecord => {
      const v = get('floors', scope);
      const marked = guard(() => hasMark.get('floors', scope) !== undefined);
      if (v === undefined) return marked ? { state: 'missing' } : { state: 'uninitialized' };
      if (
        v === 'corrupt' ||
        !isRec(v) ||
        typeof v['revision'] !== 'bigint' ||
        !(v['digest'] instanceof Uint8Array) ||
        !(v['listeners'] instanceof Map)
      )
        return { state: 'corrupt' };
      return {
        state: 'present',
        floors: {
          revision: v['revision'],
          digest: v['digest'],
          listeners: unstr(v['listeners']) as SnapshotFloors['listeners'],
        },
      };
    },
    saveFloors: (scope, f) => put('floors', scope, f, true),
    close: () => db.close(),
  };
};

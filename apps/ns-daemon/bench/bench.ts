// ns-daemon bench: durable state commits per second through the daemon's SQLite store (checksummed record,
// one IMMEDIATE transaction, WAL, synchronous=FULL) against raw better-sqlite3 single-row inserts with the same
// journal mode and synchronous setting, on temp files, in the same run. Prints the ratio (goal ≥ 0.7).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openSqliteDaemonStore } from '@homelab/service-control/sqlite';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const N = Number(process.env['BENCH_N'] ?? 2000);
const dir = mkdtempSync(join(tmpdir(), 'ns-bench-'));
try {
  const time = (n: number, f: (i: number) => void): number => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) f(i);
    return (n * 1e9) / Number(process.hrtime.bigint() - t0);
  };
  const raw = new Database(join(dir, 'raw.db'));
  raw.pragma('journal_mode = WAL');
  raw.pragma('synchronous = FULL');
  raw.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)');
  const ins = raw.prepare('INSERT OR REPLACE INTO t VALUES (?, ?)');
  const value = 'x'.repeat(200);
  const store = openSqliteDaemonStore(join(dir, 'store.db'));
  const report = (i: number) => ({
    state: 'present' as const,
    report: {
      revision: BigInt(i + 1),
      digest: new Uint8Array(32).fill(i & 0xff),
      content: new Uint8Array(120).fill(7),
    },
    acceptedRevision: BigInt(i),
  });
  // interleave rounds so machine noise hits both sides alike
  let rawTotal = 0;
  let storeTotal = 0;
  let seqTotal = 0;
  const rounds = 5;
  for (let r = 0; r < rounds; r++) {
    rawTotal += time(N / rounds, (i) => ins.run(i % 16, value));
    storeTotal += time(N / rounds, (i) => store.saveReport('scope', report(i)));
    seqTotal += time(N / rounds, (i) => store.saveSessionSeq('scope', BigInt(i + 1)));
  }
  const rawRate = rawTotal / rounds;
  const storeRate = storeTotal / rounds;
  const seqRate = seqTotal / rounds;
  const fmt = (x: number) => x.toFixed(0).padStart(7);
  print(`ns-daemon bench (N=${N}, WAL, synchronous=FULL, ${dir})`);
  print(`  raw better-sqlite3 insert commits      ${fmt(rawRate)} /s   (peer)`);
  print(
    `  store: report row (persist-before-send) ${fmt(storeRate)} /s   ratio ${(storeRate / rawRate).toFixed(3)}  (goal ≥ 0.7)`,
  );
  print(
    `  store: session seq reservation          ${fmt(seqRate)} /s   ratio ${(seqRate / rawRate).toFixed(3)}  (goal ≥ 0.7)`,
  );
  store.close();
  raw.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

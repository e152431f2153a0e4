// Daily export and offline restore of the control-plane database (seed 000, TC-72): `VACUUM INTO` a consistent
// snapshot in the configured target; no target → skipped, with an observable hint in `Exporter.status`. Restore is
// offline: with the control plane stopped, the export replaces the database file (decision 0216).
import { closeSync, copyFileSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { Clock, Context, Data, Duration, Effect, Layer, Ref, Schedule } from 'effect';
import { DatabaseUnavailable } from '../../application/identity/errors.js';
import { ControlPlaneDb, schemaVersion } from './control-plane-db.js';
import { LATEST_VERSION } from './migrations.js';

export const EXPORT_PREFIX = 'kos-controlplane-';
/** Export files kept in the target (newest first); older ones are removed after a successful export. */
export const EXPORTS_KEPT = 14;
export const EXPORT_INTERVAL = Duration.hours(24);
export const NO_TARGET_HINT = 'no export target configured: the control-plane database is not being exported';

export interface ExporterStatus {
  readonly target?: string;
  /** Set when exports are skipped (no target) or the last one failed. */
  readonly hint?: string;
  readonly lastExportAt?: string;
  readonly lastFile?: string;
  readonly lastError?: string;
}

export type ExportResult =
  { readonly skipped: true; readonly hint: string } | { readonly skipped: false; readonly file: string };

export class ExportFailed extends Data.TaggedError('ExportFailed')<{ readonly message: string }> {}

export class Exporter extends Context.Tag('@homelab/kos-kernel/Exporter')<
  Exporter,
  {
    readonly exportNow: Effect.Effect<ExportResult, DatabaseUnavailable>;
    readonly status: Effect.Effect<ExporterStatus>;
  }
>() {}

const stamp = (ms: number): string =>
  new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');

export interface ExporterOptions {
  /** Directory the exports go to; absent = exports skipped with a hint. */
  readonly target?: string;
  /** Run the daily loop (default true); false for tests that call `exportNow`. */
  readonly schedule?: boolean;
}

export const makeExporter = (options: ExporterOptions) =>
  Effect.gen(function* () {
    const cp = yield* ControlPlaneDb;
    const status = yield* Ref.make<ExporterStatus>(
      options.target === undefined ? { hint: NO_TARGET_HINT } : { target: options.target },
    );
    const exportNow: Effect.Effect<ExportResult, DatabaseUnavailable> = Effect.gen(function* () {
      const target = options.target;
      if (target === undefined) {
        yield* Ref.set(status, { hint: NO_TARGET_HINT });
        return { skipped: true, hint: NO_TARGET_HINT } as const;
      }
      const now = yield* Clock.currentTimeMillis;
      const file = join(target, `${EXPORT_PREFIX}${stamp(now)}.db`);
      const done = yield* Effect.either(
        cp.use((db) => {
          mkdirSync(target, { recursive: true });
          rmSync(file, { force: true });
          db.prepare('VACUUM INTO ?').run(file);
          const old = readdirSync(target)
            .filter((f) => f.startsWith(EXPORT_PREFIX) && f.endsWith('.db'))
            .sort()
            .reverse()
            .slice(EXPORTS_KEPT);
          for (const f of old) rmSync(join(target, f), { force: true });
        }),
      );
      if (done._tag === 'Left') {
        yield* Ref.update(status, (s) => ({
          ...s,
          lastError: done.left.message,
          hint: `the last export failed: ${done.left.message}`,
        }));
        return yield* done.left;
      }
      yield* Ref.set(status, { target, lastExportAt: new Date(now).toISOString(), lastFile: file });
      return { skipped: false, file } as const;
    });
    if (options.schedule ?? true)
      yield* exportNow.pipe(
        Effect.catchAll((e) => Effect.logWarning(`control-plane database export failed: ${e.message}`)),
        Effect.repeat(Schedule.spaced(EXPORT_INTERVAL)),
        Effect.delay(EXPORT_INTERVAL),
        Effect.forkScoped,
      );
    return Exporter.of({ exportNow, status: Ref.get(status) });
  });

export const ExporterLive = (options: ExporterOptions): Layer.Layer<Exporter, never, ControlPlaneDb> =>
  Layer.scoped(Exporter, makeExporter(options));

/**
 * Offline restore (`controller db restore <file>`): checks the export (integrity, schema version this build knows),
 * then replaces `dbPath` (and drops its WAL/SHM files) by an atomic rename. Run only while the control plane is stopped.
 */
export const restoreDatabase = (
  exportFile: string,
  dbPath: string,
): Effect.Effect<{ readonly schemaVersion: number }, ExportFailed> =>
  Effect.try({
    try: () => {
      const check = new Database(exportFile, { readonly: true, fileMustExist: true });
      let version: number;
      try {
        const integrity = check.pragma('integrity_check', { simple: true });
        if (integrity !== 'ok') throw new Error(`integrity check: ${String(integrity)}`);
        version = schemaVersion(check);
        if (version === 0 || version > LATEST_VERSION)
          throw new Error(`schema version ${version} is not a control-plane database this build can serve`);
      } finally {
        check.close();
      }
      const tmp = join(dirname(dbPath), `.${basename(dbPath)}.restore`);
      copyFileSync(exportFile, tmp);
      const fd = openSync(tmp, 'r');
      fsyncSync(fd);
      closeSync(fd);
      rmSync(`${dbPath}-wal`, { force: true });
      rmSync(`${dbPath}-shm`, { force: true });
      renameSync(tmp, dbPath);
      return { schemaVersion: version };
    },
    catch: (e) => new ExportFailed({ message: e instanceof Error ? e.message : String(e) }),
  });

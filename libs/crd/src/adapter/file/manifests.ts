// The one place this library touches the file system: compare generated manifests with the files in a
// directory (check mode), or write them (write mode). Files in the directory that nothing generated, and
// that end in one of the given extensions, are reported as stray so deleted kinds do not linger.
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Effect } from 'effect';
import { compareManifest, type DriftReport, type FileDrift } from '../../domain/drift.js';
import { ManifestIoError } from '../../domain/errors.js';

export interface SyncManifestsOptions {
  readonly directory: string;
  /** File name (relative to `directory`) → generated content. */
  readonly files: Readonly<Record<string, string>>;
  /** `check` only reads; `write` brings the directory in line (never deletes stray files). */
  readonly mode: 'check' | 'write';
  /** Extensions of files owned by the generator, for stray detection (default: `.yaml`). */
  readonly extensions?: ReadonlyArray<string>;
}

const readIfExists = (file: string) =>
  Effect.tryPromise({
    try: () => readFile(file, 'utf8'),
    catch: (e) => e as NodeJS.ErrnoException,
  }).pipe(
    Effect.catchAll((e) =>
      e.code === 'ENOENT' ? Effect.succeed(undefined) : Effect.fail(new ManifestIoError({ file, reason: e.message })),
    ),
  );

const listDir = (directory: string) =>
  Effect.tryPromise({ try: () => readdir(directory), catch: (e) => e as NodeJS.ErrnoException }).pipe(
    Effect.catchAll((e) =>
      e.code === 'ENOENT'
        ? Effect.succeed([] as string[])
        : Effect.fail(new ManifestIoError({ file: directory, reason: e.message })),
    ),
  );

export const syncManifests = Effect.fn('syncManifests')(function* (options: SyncManifestsOptions) {
  const extensions = options.extensions ?? ['.yaml'];
  const names = Object.keys(options.files).sort();
  const results: FileDrift[] = [];
  const written: string[] = [];
  for (const name of names) {
    const path = join(options.directory, name);
    const generated = options.files[name] as string;
    const onDisk = yield* readIfExists(path);
    const drift = compareManifest(name, generated, onDisk);
    if (options.mode === 'write' && drift._tag !== 'InSync') {
      yield* Effect.tryPromise({
        try: async () => {
          await mkdir(options.directory, { recursive: true });
          await writeFile(path, generated, 'utf8');
        },
        catch: (e) => new ManifestIoError({ file: path, reason: e instanceof Error ? e.message : String(e) }),
      });
      written.push(name);
      results.push({ _tag: 'InSync', file: name });
    } else {
      results.push(drift);
    }
  }
  const present = yield* listDir(options.directory);
  for (const file of present.sort()) {
    if (!names.includes(file) && extensions.some((ext) => file.endsWith(ext))) results.push({ _tag: 'Stray', file });
  }
  const report: DriftReport = {
    directory: options.directory,
    files: results,
    problems: results.filter((r) => r._tag !== 'InSync'),
    written,
  };
  return report;
});

/** `write` when the environment asks to regenerate (`HOMELAB_WRITE_GENERATED=1`), else `check`. */
export const driftModeFromEnv = (): 'check' | 'write' =>
  process.env['HOMELAB_WRITE_GENERATED'] === '1' ? 'write' : 'check';

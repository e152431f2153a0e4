// A consumer project outside the workspace (decision 0281): installs tarballs with npm from the local cache
// (`--offline`; only when something is not cached, `--prefer-offline` lets npm fetch it), compiles with the
// consumer's own tsc and runs with plain node — no workspace resolution, no source condition, no tsx.
import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The environment without the outer npm run's npm_* variables (they would point npm back at the workspace) and
 * without colours (Nx sets FORCE_COLOR, which makes console.log colour numbers and booleans). */
export const cleanEnv = (): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => (!/^npm_/i.test(k) || k.toLowerCase() === 'npm_config_cache') && k !== 'FORCE_COLOR',
    ),
  ),
  NO_COLOR: '1',
});

export interface InstallResult {
  /** "offline" when every package came from the local npm cache. */
  readonly mode: 'offline' | 'prefer-offline';
  readonly output: string;
}

const npmInstall = (dir: string, mode: InstallResult['mode'], specs: readonly string[]): SpawnSyncReturns<string> =>
  spawnSync('npm', ['install', `--${mode}`, '--ignore-scripts', '--no-audit', '--no-fund', ...specs], {
    cwd: dir,
    env: cleanEnv(),
    encoding: 'utf8',
  });

/** A fresh consumer project in `dir` with these packages (tarball paths or name@version) as dependencies. */
export const installConsumer = (dir: string, specs: readonly string[]): InstallResult => {
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({ name: 'homelab-consumer', private: true, type: 'module' }, null, 2)}\n`,
  );
  let r = npmInstall(dir, 'offline', specs);
  let mode: InstallResult['mode'] = 'offline';
  if (r.status !== 0 && /ENOTCACHED/.test(r.stderr)) {
    mode = 'prefer-offline';
    r = npmInstall(dir, mode, specs);
  }
  if (r.status !== 0) throw new Error(`npm install in ${dir} failed (exit ${r.status}):\n${r.stderr}`);
  return { mode, output: r.stdout + r.stderr };
};

export interface Diagnostic {
  readonly file: string;
  readonly text: string;
}

/** Runs the consumer's tsc on its tsconfig.json; the diagnostics, each with the file it is in. */
export const compile = (dir: string): readonly Diagnostic[] => {
  const r = spawnSync(
    process.execPath,
    [join(dir, 'node_modules/typescript/bin/tsc'), '-p', dir, '--pretty', 'false'],
    {
      cwd: dir,
      env: cleanEnv(),
      encoding: 'utf8',
    },
  );
  return r.stdout
    .split('\n')
    .filter((l) => /\): error TS\d+/.test(l))
    .map((text) => ({ file: text.slice(0, text.indexOf('(')), text }));
};

/** Runs a compiled file with plain node in the consumer project; its stdout. */
export const run = (dir: string, file: string): string =>
  execFileSync(process.execPath, [file], { cwd: dir, env: cleanEnv(), encoding: 'utf8' });

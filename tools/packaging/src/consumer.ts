// A consumer project outside the workspace (decision 0281): installs tarballs with npm from the local cache
// (`--offline`; only when something is not cached, `--prefer-offline` lets npm fetch it), compiles with the
// consumer's own tsc and runs with plain node — no workspace resolution, no source condition, no tsx.
import { execFileSync, spawn } from 'node:child_process';
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

interface Exited {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * A command run without blocking the caller's event loop: npm install and tsc take minutes on a loaded machine, and a
 * vitest worker blocked that long misses its own RPC deadline (60 s: "Timeout calling onTaskUpdate").
 */
const runAsync = (command: string, args: readonly string[], cwd: string): Promise<Exited> =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });

const npmInstall = (dir: string, mode: InstallResult['mode'], specs: readonly string[]): Promise<Exited> =>
  runAsync('npm', ['install', `--${mode}`, '--ignore-scripts', '--no-audit', '--no-fund', ...specs], dir);

/** A fresh consumer project in `dir` with these packages (tarball paths or name@version) as dependencies. */
export const installConsumer = async (dir: string, specs: readonly string[]): Promise<InstallResult> => {
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({ name: 'homelab-consumer', private: true, type: 'module' }, null, 2)}\n`,
  );
  let r = await npmInstall(dir, 'offline', specs);
  let mode: InstallResult['mode'] = 'offline';
  if (r.status !== 0 && /ENOTCACHED/.test(r.stderr)) {
    mode = 'prefer-offline';
    r = await npmInstall(dir, mode, specs);
  }
  if (r.status !== 0) throw new Error(`npm install in ${dir} failed (exit ${r.status}):\n${r.stderr}`);
  return { mode, output: r.stdout + r.stderr };
};

export interface Diagnostic {
  readonly file: string;
  readonly text: string;
}

/** Runs the consumer's tsc on its tsconfig.json; the diagnostics, each with the file it is in. */
export const compile = async (dir: string): Promise<readonly Diagnostic[]> => {
  const r = await runAsync(
    process.execPath,
    [join(dir, 'node_modules/typescript/bin/tsc'), '-p', dir, '--pretty', 'false'],
    dir,
  );
  return r.stdout
    .split('\n')
    .filter((l) => /\): error TS\d+/.test(l))
    .map((text) => ({ file: text.slice(0, text.indexOf('(')), text }));
};

/** Runs a compiled file with plain node in the consumer project; its stdout. */
export const run = (dir: string, file: string): string =>
  execFileSync(process.execPath, [file], { cwd: dir, env: cleanEnv(), encoding: 'utf8' });

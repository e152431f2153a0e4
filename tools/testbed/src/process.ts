import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { Duration, Effect } from 'effect';
import { TestbedError } from './errors.js';

type Component = TestbedError['component'];

export interface ManagedProcess {
  readonly child: ChildProcess;
  readonly logFile: string;
  /** Set once the process has exited; readiness probes fail fast on it. */
  exited: { readonly code: number | null; readonly signal: NodeJS.Signals | null } | undefined;
}

export const logTail = (logFile: string, lines = 30): string => {
  try {
    return readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
};

export interface ProcessSpec {
  readonly component: Component;
  readonly command: string;
  readonly args: ReadonlyArray<string>;
  readonly logFile: string;
  readonly env?: NodeJS.ProcessEnv;
}

/** Spawns a long-running process whose stdout/stderr are appended to `logFile` (throws if it cannot be spawned). */
export const spawnManaged = (spec: ProcessSpec): ManagedProcess => {
  const fd = openSync(spec.logFile, 'a');
  try {
    const child = spawn(spec.command, [...spec.args], {
      stdio: ['ignore', fd, fd],
      env: { ...process.env, ...spec.env },
    });
    const managed: ManagedProcess = { child, logFile: spec.logFile, exited: undefined };
    child.on('exit', (code, signal) => {
      managed.exited = { code, signal };
    });
    child.on('error', (err) => {
      managed.exited = { code: -1, signal: null };
      console.error(`test bed ${spec.component}: ${err.message}`);
    });
    return managed;
  } finally {
    closeSync(fd);
  }
};

/**
 * Spawns a long-running service whose stdout/stderr go to `logFile`; the scope's release sends SIGTERM,
 * waits up to 10 s, then SIGKILLs, so a test run never leaves a service behind.
 */
export const spawnScoped = (spec: ProcessSpec) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => spawnManaged(spec),
      catch: (e) =>
        new TestbedError({ component: spec.component, reason: `spawn failed: ${String(e)}`, logFile: spec.logFile }),
    }),
    (managed) => stopProcess(managed),
  );

/**
 * {@link spawnScoped} with a restart: when the process exits while the scope is open, it is spawned again with the
 * same command after `restartDelayMs` and `onRestart` is told its pid. Closing the scope stops the current one and
 * ends the restarts.
 */
export const spawnSupervised = (
  spec: ProcessSpec,
  onRestart: (managed: ManagedProcess, previous: ManagedProcess['exited']) => void,
  restartDelayMs = 1000,
) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        let stopping = false;
        let restarts = 0;
        const supervised = {
          current: spawnManaged(spec),
          get restarts() {
            return restarts;
          },
          stop: () => {
            stopping = true;
          },
        };
        const watch = (managed: ManagedProcess) =>
          managed.child.once('exit', () =>
            setTimeout(() => {
              if (stopping) return;
              const next = spawnManaged(spec);
              restarts += 1;
              supervised.current = next;
              watch(next);
              onRestart(next, managed.exited);
            }, restartDelayMs),
          );
        watch(supervised.current);
        return supervised;
      },
      catch: (e) =>
        new TestbedError({ component: spec.component, reason: `spawn failed: ${String(e)}`, logFile: spec.logFile }),
    }),
    (supervised) =>
      Effect.suspend(() => {
        supervised.stop();
        return stopProcess(supervised.current);
      }),
  );

export const stopProcess = (managed: ManagedProcess): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (managed.exited || managed.child.exitCode !== null) return resume(Effect.void);
    const timer = setTimeout(() => managed.child.kill('SIGKILL'), 10_000);
    managed.child.once('exit', () => {
      clearTimeout(timer);
      resume(Effect.void);
    });
    managed.child.kill('SIGTERM');
  });

/**
 * Polls `probe` every 200 ms until it answers true; fails with the log tail if the process exits
 * or the deadline passes.
 */
export const waitReady = (
  component: Component,
  managed: ManagedProcess,
  probe: () => Promise<boolean>,
  timeout: Duration.DurationInput,
): Effect.Effect<void, TestbedError> =>
  Effect.gen(function* () {
    const deadline = Date.now() + Duration.toMillis(timeout);
    for (;;) {
      if (managed.exited) {
        return yield* new TestbedError({
          component,
          reason: `exited (code ${managed.exited.code}, signal ${managed.exited.signal}) before becoming ready:\n${logTail(managed.logFile)}`,
          logFile: managed.logFile,
        });
      }
      const ok = yield* Effect.promise(() => probe().catch(() => false));
      if (ok) return;
      if (Date.now() > deadline) {
        return yield* new TestbedError({
          component,
          reason: `not ready after ${Duration.format(timeout)}:\n${logTail(managed.logFile)}`,
          logFile: managed.logFile,
        });
      }
      yield* Effect.sleep('200 millis');
    }
  });

/** Runs a command to completion, capturing output; fails with its output on non-zero exit. */
export const runCommand = (
  component: Component,
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly env?: NodeJS.ProcessEnv; readonly inheritStderr?: boolean } = {},
): Effect.Effect<string, TestbedError> =>
  Effect.async<string, TestbedError>((resume) => {
    const child = spawn(command, [...args], {
      stdio: ['ignore', 'pipe', options.inheritStderr ? 'inherit' : 'pipe'],
      env: { ...process.env, ...options.env },
    });
    let out = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr?.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.on('error', (e) => resume(Effect.fail(new TestbedError({ component, reason: `${command}: ${e.message}` }))));
    child.on('exit', (code) =>
      resume(
        code === 0
          ? Effect.succeed(out)
          : Effect.fail(
              new TestbedError({
                component,
                reason: `${command} ${args.join(' ')} exited ${code}:\n${out.slice(-4000)}`,
              }),
            ),
      ),
    );
  });

// The process edge every app shares: launch the app's layer graph, end the process when it ends (0 when it stopped
// on a signal or ended, otherwise the code `exitCode` gives its failure — default 1), and turn SIGTERM/SIGINT into an
// interruption of the graph, so every layer's finalizer runs in the reverse order of construction (what uses a
// resource stops before the resource closes). A second signal is ignored; `graceMs` ends a shutdown that hangs.
import { Cause, Effect, Exit, Fiber, Layer, Option } from 'effect';
import type { LogFn } from './logger.js';

export interface LaunchOptions<E> {
  /** How long a shutdown may take before the process ends anyway (default 5 s). */
  readonly graceMs?: number;
  /**
   * The exit code of a failure of the graph (the typed error when there is one): a start-up failure the operator can
   * tell apart by its code. Default 1 after logging the cause.
   */
  readonly onFailure?: (error: Option.Option<E>, cause: Cause.Cause<E>) => number;
}

/** Runs `app` until it ends or a signal stops it, then ends the process. */
export const launchUntilSignal = <E>(
  app: Layer.Layer<never, E, never>,
  log: LogFn,
  options: LaunchOptions<E> = {},
): Fiber.RuntimeFiber<never, E> => {
  const main = Effect.runFork(Layer.launch(app));
  let stopping = false;
  main.addObserver((exit) => {
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
      const code =
        options.onFailure?.(Cause.failureOption(exit.cause), exit.cause) ??
        (log('failed', { error: Cause.pretty(exit.cause) }, 'Error'), 1);
      process.exit(code);
    }
    process.exit(process.exitCode ?? 0);
  });
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log('shutdown', { signal });
    Effect.runFork(Fiber.interrupt(main));
    setTimeout(() => process.exit(process.exitCode ?? 0), options.graceMs ?? 5_000).unref();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  return main;
};

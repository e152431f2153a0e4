// The process edge shared by nsd and ns-daemon: launch the app's layer, end the process when it ends (exit 1 on a
// failure, 0 otherwise), and turn SIGTERM/SIGINT into an interruption so every scope finalizer runs (listener → service
// → store); a second signal is ignored and a 5 s guard ends a shutdown that hangs.
import { Cause, Effect, Exit, Fiber, Layer } from 'effect';

export type ProcessLog = (event: string, fields?: Record<string, unknown>) => void;

export const launchUntilSignal = <E>(app: Layer.Layer<never, E, never>, log: ProcessLog, graceMs = 5_000): void => {
  const main = Effect.runFork(Layer.launch(app));
  main.addObserver((exit) => {
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
      log('failed', { error: Cause.pretty(exit.cause) });
      process.exit(1);
    }
    process.exit(0);
  });
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log('shutdown', { signal });
    Effect.runFork(Fiber.interrupt(main));
    setTimeout(() => process.exit(0), graceMs).unref();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
};

export * from './command-line.js';

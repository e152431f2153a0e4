// `npm start -w @homelab/controller`: configuration from flags/env, then one layer graph launched until SIGINT/SIGTERM
// (decision 0292). Exit codes (also in `--help` and the README): 0 stopped, 1 start refused or a module stopped on
// its own, 2 configuration, 3 the Kubernetes client (kubeconfig, token, service account), 4 the control-plane
// database. A refused start is one line on stderr, never a stack trace.
import { Cause, Effect, Fiber, Option } from 'effect';
import { jsonLogger, launchUntilSignal, logFnOf } from '@homelab/process';
import { ConfigError, controllerHelp, parseConfig, wantsHelp } from './config.js';
import { isOfflineCommand, OFFLINE_HELP, runOffline } from './offline.js';
import { controllerLayer, EXIT_CODES, exitCodeOf, prepareStart } from './server.js';

const argv = process.argv.slice(2);
const refuse = (e: unknown): never => {
  if (!(e instanceof ConfigError)) throw e;
  process.stderr.write(`configuration: ${e.message}\n`);
  process.exit(EXIT_CODES.configuration);
};

if (wantsHelp(argv)) {
  process.stdout.write(controllerHelp() + '\n' + OFFLINE_HELP);
  process.exit(0);
}
if (isOfflineCommand(argv)) {
  try {
    process.exit(await runOffline(argv, process.env, (line) => process.stderr.write(`${line}\n`)));
  } catch (e) {
    refuse(e);
  }
}

let config;
try {
  config = parseConfig(argv, process.env);
  prepareStart(config); // where to bind, the TLS files: refused as configuration, before anything is built
} catch (e) {
  refuse(e);
}

const log = logFnOf(jsonLogger({ app: 'controller' }));
let stop = (): void => undefined;
const app = controllerLayer(config as NonNullable<typeof config>, {
  // A module that stops on its own (setup error, Lease lost) ends the process, as controller-runtime's manager does:
  // the graph is stopped in order and the exit code is 1.
  onFatal: (reason) => {
    log(reason, {}, 'Error');
    process.exitCode = EXIT_CODES.startFailed;
    stop();
  },
});
const main = launchUntilSignal(app, log, {
  graceMs: (config as NonNullable<typeof config>).shutdownGraceMs + 15_000,
  onFailure: (error, cause) => {
    const line = Option.isSome(error)
      ? error.value.message
      : (String(Cause.squash(cause)).split('\n')[0] as string).replace(/^Error: /, '');
    process.stderr.write(`controller failed to start: ${line}\n`);
    return Option.isSome(error) ? exitCodeOf(error.value) : EXIT_CODES.startFailed;
  },
});
stop = () => void Effect.runFork(Fiber.interrupt(main));

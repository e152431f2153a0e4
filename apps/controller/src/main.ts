// `npm start -w @homelab/controller`: configuration from flags/env, the control plane on it, SIGINT/SIGTERM stop it
// gracefully.
import { ConfigError, controllerHelp, parseConfig, wantsHelp } from './config.js';
import { isOfflineCommand, OFFLINE_HELP, runOffline } from './offline.js';
import { startController } from './server.js';

const main = async () => {
  if (wantsHelp(process.argv.slice(2))) {
    process.stdout.write(controllerHelp() + '\n' + OFFLINE_HELP);
    process.exit(0);
  }
  if (isOfflineCommand(process.argv.slice(2))) {
    try {
      process.exit(await runOffline(process.argv.slice(2), process.env, (line) => process.stderr.write(`${line}\n`)));
    } catch (e) {
      if (e instanceof ConfigError) {
        console.error(`configuration: ${e.message}`);
        process.exit(2);
      }
      throw e;
    }
  }
  let config;
  try {
    config = parseConfig(process.argv.slice(2), process.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`configuration: ${e.message}`);
      process.exit(2);
    }
    throw e;
  }
  const handle = await startController(config, {
    // A module that stops on its own (setup error, Lease lost) ends the process, as controller-runtime's manager does.
    onFatal: (reason) => {
      console.error(reason);
      process.exit(1);
    },
  });
  const stop = () => {
    handle.close().then(
      () => process.exit(0),
      (e: unknown) => {
        console.error(e);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
};

main().catch((e: unknown) => {
  console.error(`controller failed to start: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});

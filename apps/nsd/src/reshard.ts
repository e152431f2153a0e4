// `nsd reshard --shard-count N` (decision 0489): change the shard count of the database, offline. Every nsd of the
// database must be stopped first (a live lease refuses it); the database settings are nsd's own (flags, NSD_DB_*,
// PG*). Exit 0 done, 1 refused (nothing written; the line says what to do), 2 a bad command line.
import { jsonLogger, logFnOf } from '@homelab/process';
import { ReshardRefused, reshardAuthority } from '@homelab/service-control/postgresql';
import { ConfigurationError } from '@homelab/service-control/process';
import { loadConfig } from './config.js';

export const isReshardCommand = (argv: readonly string[]): boolean => argv[0] === 'reshard';

const USAGE = 'usage: nsd reshard --shard-count N [nsd database flags: --db-host … or NSD_DB_* / PG*]';

/** Run `reshard …` (argv without the program); the process exit code. */
export const runReshard = async (argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> => {
  const log = logFnOf(jsonLogger({ app: 'nsd' }));
  let count: string | undefined;
  const rest: string[] = [];
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--shard-count') count = argv[++i];
    else if (a.startsWith('--shard-count=')) count = a.slice('--shard-count='.length);
    else rest.push(a);
  }
  if (count === undefined || !/^[0-9]+$/.test(count)) {
    log('configuration', { error: USAGE });
    return 2;
  }
  let database;
  try {
    const c = loadConfig(env, rest);
    if ('help' in c) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    database = c.database;
  } catch (e) {
    if (!(e instanceof ConfigurationError)) throw e;
    log('configuration', { error: e.message });
    return 2;
  }
  try {
    const r = await reshardAuthority(database, Number(count));
    log('resharded', { from: r.from, to: r.to, epoch: r.epoch.toString() });
    return 0;
  } catch (e) {
    if (e instanceof ReshardRefused) {
      log('refused', { reason: e.reason });
      return 1;
    }
    log('failed', { error: e instanceof Error ? e.message : String(e) });
    return 1;
  }
};

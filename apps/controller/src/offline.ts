// The offline commands, run on the control-plane database file while the control plane is stopped (seed 000:
// restore is offline; `reset-owner` recovers a homelab whose Owner is locked out or forgot the password):
//   controller accounts reset-owner --identity-db <file> [--name <account>]
//   controller db restore <export-file> --identity-db <file>
import { Effect } from 'effect';
import { resetOwnerOffline, restoreDatabase } from '@homelab/kos-kernel';
import { ConfigError } from './config.js';

export const OFFLINE_HELP = [
  'offline commands (stop the controller first):',
  '  controller accounts reset-owner --identity-db <file> [--name <account>]',
  '      make <account> (default: the first Owner, or "owner") a usable Owner with a new one-time password',
  '  controller db restore <export-file> --identity-db <file>',
  '      replace the control-plane database by a daily export (accounts, sessions, audit return to that moment)',
  '',
].join('\n');

/** True when argv names an offline command (its first word is not a flag). */
export const isOfflineCommand = (argv: ReadonlyArray<string>): boolean => argv[0] === 'accounts' || argv[0] === 'db';

const valueOf = (args: ReadonlyArray<string>, name: string): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === `--${name}`) return args[i + 1];
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return undefined;
};

/** The positional arguments, after refusing unknown flags and more positionals than `positional`. */
const positionals = (args: ReadonlyArray<string>, allowed: ReadonlyArray<string>, positional: number) => {
  const found: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (!a.startsWith('--')) {
      if (found.push(a) > positional) throw new ConfigError(`unexpected argument "${a}"\n${OFFLINE_HELP}`);
      continue;
    }
    const name = a.slice(2).split('=')[0] as string;
    if (!allowed.includes(name)) throw new ConfigError(`unknown flag --${name}\n${OFFLINE_HELP}`);
    if (!a.includes('=')) i++;
  }
  return found;
};

/** Run an offline command; resolves with the exit code. Secrets go to `out` once, never to a log. */
export const runOffline = async (
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>,
  out: (line: string) => void,
): Promise<number> => {
  const [group, command, ...rest] = argv;
  const db = valueOf(rest, 'identity-db') ?? env['KOS_IDENTITY_DB'];
  if (group === 'accounts' && command === 'reset-owner') {
    positionals(rest, ['identity-db', 'name'], 0);
    if (db === undefined || db === '') throw new ConfigError('accounts reset-owner needs --identity-db <file>');
    const name = valueOf(rest, 'name');
    const result = await Effect.runPromise(Effect.either(resetOwnerOffline({ path: db }, name)));
    if (result._tag === 'Left') {
      out(`reset-owner failed: ${result.left.message}`);
      return 1;
    }
    out(
      `the account "${result.right.name}" is a usable Owner again; its one-time password (shown once): ${result.right.oneTimePassword}`,
    );
    out('log in with it and change it (PUT /api/v1/auth/password); every other session of it has ended');
    return 0;
  }
  if (group === 'db' && command === 'restore') {
    const [exportFile] = positionals(rest, ['identity-db'], 1);
    if (exportFile === undefined) throw new ConfigError('db restore needs the export file');
    if (db === undefined || db === '') throw new ConfigError('db restore needs --identity-db <file>');
    const result = await Effect.runPromise(Effect.either(restoreDatabase(exportFile, db)));
    if (result._tag === 'Left') {
      out(`restore failed, ${db} unchanged: ${result.left.message}`);
      return 1;
    }
    out(`restored ${db} from ${exportFile} (schema version ${result.right.schemaVersion})`);
    return 0;
  }
  throw new ConfigError(`unknown command "${argv.slice(0, 2).join(' ')}"\n${OFFLINE_HELP}`);
};

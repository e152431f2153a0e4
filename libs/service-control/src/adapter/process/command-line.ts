// The command line of nsd and ns-daemon (issue 26 item 6): one table of flags per app gives parsing, the
// environment fallback and `--help`. Unknown flags and stray arguments are refused; `--flag value` and
// `--flag=value` are both accepted (node:util.parseArgs, strict). A flag beats its environment variable, which
// beats the default.
import { parseArgs } from 'node:util';

export interface FlagSpec {
  /** The flag without dashes, e.g. `db-host`. */
  readonly name: string;
  /** One line for `--help`. */
  readonly help: string;
  readonly default?: string;
}

/** A command line or configuration the app refuses: main prints `<app>: configuration: <message>` and exits 2. */
export class ConfigurationError extends Error {
  override readonly name = 'ConfigurationError';
}

export type CommandLine =
  | { readonly _tag: 'Help'; readonly text: string }
  | { readonly _tag: 'Values'; readonly get: (name: string) => string | undefined };

/** `db-host` with prefix `NSD` → `NSD_DB_HOST`. */
export const envName = (prefix: string, flag: string): string => `${prefix}_${flag.toUpperCase().replaceAll('-', '_')}`;

export const helpText = (app: string, summary: string, envPrefix: string, specs: ReadonlyArray<FlagSpec>): string => {
  const width = Math.max(...specs.map((s) => s.name.length)) + 2;
  const lines = specs.map((s) => {
    const dflt = s.default === undefined ? '' : ` (default ${s.default === '' ? '""' : s.default})`;
    return `  --${s.name.padEnd(width)}${s.help}${dflt}  [${envName(envPrefix, s.name)}]`;
  });
  return [`usage: ${app} [--flag value | --flag=value]...`, '', summary, '', 'flags:', ...lines, '  --help', ''].join(
    '\n',
  );
};

export const parseCommandLine = (
  spec: {
    readonly app: string;
    readonly summary: string;
    readonly envPrefix: string;
    readonly flags: ReadonlyArray<FlagSpec>;
  },
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>,
): CommandLine => {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args: [...argv],
      options: {
        help: { type: 'boolean' },
        ...Object.fromEntries(spec.flags.map((f) => [f.name, { type: 'string' as const }])),
      },
      strict: true,
      allowPositionals: false,
    }).values as Record<string, string | boolean | undefined>;
  } catch (e) {
    // parseArgs' messages name the flag; the hint about `--` is for positional-taking programs, not ours.
    const message = (e as Error).message.split('. To specify')[0] as string;
    throw new ConfigurationError(`${message} (see --help)`);
  }
  if (values['help'] === true)
    return { _tag: 'Help', text: helpText(spec.app, spec.summary, spec.envPrefix, spec.flags) };
  const known = new Map(spec.flags.map((f) => [f.name, f]));
  return {
    _tag: 'Values',
    get: (name) => {
      const f = known.get(name);
      if (f === undefined) throw new Error(`flag --${name} is not in ${spec.app}'s table`); // a bug, not input
      const v = values[name];
      return typeof v === 'string' ? v : (env[envName(spec.envPrefix, name)] ?? f.default);
    },
  };
};

/**
 * The process edge of configuration: `--help` prints the table and exits 0 before anything is created (no key file,
 * no database); a ConfigurationError is one line on stderr and exit 2, never a stack trace.
 */
export const configurationOrExit = <C extends object>(app: string, load: () => C | { readonly help: string }): C => {
  let loaded: C | { readonly help: string };
  try {
    loaded = load();
  } catch (e) {
    if (!(e instanceof ConfigurationError)) throw e;
    process.stderr.write(`${app}: configuration: ${e.message}\n`);
    process.exit(2);
  }
  if ('help' in loaded && typeof loaded.help === 'string') {
    process.stdout.write(loaded.help);
    process.exit(0);
  }
  return loaded as C;
};

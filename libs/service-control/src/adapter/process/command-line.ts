// The command line of nsd and ns-daemon (issue 26 item 6): one table of flags per app gives parsing, the
// environment fallback and `--help`. Unknown flags and stray arguments are refused; `--flag value` and
// `--flag=value` are both accepted (node:util.parseArgs, strict). A flag beats its environment variable, which
// beats the default.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
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
    /** The exit codes `--help` lists after the flags (decision 0288). */
    readonly exitCodes?: ReadonlyArray<keyof typeof EXIT_CODES>;
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
    return {
      _tag: 'Help',
      text:
        helpText(spec.app, spec.summary, spec.envPrefix, spec.flags) +
        (spec.exitCodes === undefined ? '' : exitCodesHelp(spec.exitCodes)),
    };
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
 * Exit codes of nsd and ns-daemon (decision 0288), printed by `--help` and listed in each README. Start-up failures
 * are one line on stderr (`<app>: <what>: <reason>`), never a stack trace.
 */
export const EXIT_CODES = {
  /** stopped by SIGTERM/SIGINT, or `--help` */
  ok: 0,
  /** a failure after start-up (logged as a `failed` event) */
  failed: 1,
  /** a refused flag or environment variable */
  configuration: 2,
  /** ns-daemon: another daemon holds the state file */
  stateLocked: 3,
  /** the key file cannot be read, written or parsed as an Ed25519 private key */
  keyFile: 4,
  /** nsd: PostgreSQL refuses the connection settings (host, port, user, password, database) */
  database: 5,
} as const;

/** The exit-code table as `--help` prints it. */
export const exitCodesHelp = (codes: ReadonlyArray<keyof typeof EXIT_CODES>): string =>
  `\nExit codes:\n${codes.map((c) => `  ${EXIT_CODES[c]}  ${EXIT_CODE_TEXT[c]}`).join('\n')}\n`;

const EXIT_CODE_TEXT: Readonly<Record<keyof typeof EXIT_CODES, string>> = {
  ok: 'stopped by SIGTERM/SIGINT (or --help)',
  failed: 'failed after start-up (see the `failed` log event)',
  configuration: 'configuration refused (one line on stderr)',
  stateLocked: 'another daemon holds the state file',
  keyFile: 'the key file cannot be read, written or parsed as an Ed25519 private key',
  database: 'PostgreSQL refuses the connection settings',
};

/** A start-up failure: one line on stderr and its exit code (decision 0288). */
export const exitStartup = (app: string, code: keyof typeof EXIT_CODES, line: string): never => {
  process.stderr.write(`${app}: ${line}\n`);
  process.exit(EXIT_CODES[code]);
};

const reasonOf = (e: unknown): string => {
  const code = (e as { code?: string }).code;
  const message = (e instanceof Error ? e.message : String(e)).split('\n')[0] ?? '';
  return code !== undefined && !message.includes(code) ? `${code}: ${message}` : message;
};

/**
 * The node's or nsd's Ed25519 key (decision 0288): created with `generate` when the file is missing, then read and
 * parsed; a file that cannot be created, read or parsed ends the process with exit 4 and one line naming the file.
 */
export const keyFileOrExit = <S>(app: string, path: string, generate: () => string, parse: (pem: string) => S): S => {
  try {
    if (!existsSync(path)) writeFileSync(path, generate(), { mode: 0o600 });
  } catch (e) {
    return exitStartup(app, 'keyFile', `key file ${path}: cannot create it: ${reasonOf(e)}`);
  }
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (e) {
    return exitStartup(app, 'keyFile', `key file ${path}: cannot read it: ${reasonOf(e)}`);
  }
  try {
    return parse(pem);
  } catch (e) {
    return exitStartup(app, 'keyFile', `key file ${path}: not an Ed25519 private key in PEM: ${reasonOf(e)}`);
  }
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

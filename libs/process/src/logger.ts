// One log line for every app (issue 18 item 4, decision 0291): Effect's Logger writing one JSON object a line —
// `time`, `level`, `app`, `message`, `annotations` (and `cause` when there is one) — with secrets redacted by the logger
// itself, so no call site can forget: an annotation whose name says it holds a secret loses its value, and a value
// (or message) holding a URL with a password loses the password. Libraries only call `Effect.log*` with
// `Effect.annotateLogs`; the app installs this logger once at the top of its layer graph.
import { Cause, FiberId, FiberRefs, HashMap, Layer, List, Logger, LogLevel } from 'effect';

export const REDACTED = '[redacted]';

/** The words of an annotation name: `dbPassword`, `db_password`, `DB-PASSWORD` → db, password. */
const words = (name: string): ReadonlyArray<string> =>
  name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== '');

const SECRET_WORDS = new Set([
  'password',
  'passwd',
  'pwd',
  'secret',
  'token',
  'dsn',
  'credential',
  'credentials',
  'authorization',
  'cookie',
  'apikey',
  'passphrase',
]);

/**
 * Whether an annotation named so holds a secret: one of its words is password, secret, token, dsn, credential(s),
 * authorization, cookie, apikey, passphrase — or `key`, unless it is said to be public (`nsd_public_key`).
 */
export const isSecretName = (name: string): boolean => {
  const w = words(name);
  if (w.some((x) => SECRET_WORDS.has(x))) return true;
  return w.includes('key') && !w.includes('public');
};

// scheme://user:password@ — the password is everything between the first ':' after the user and the '@'
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/]*:)([^\s@/]+)@/gi;
// key=value DSNs (libpq): password=… up to the next space
const KEYWORD_PASSWORD = /\b(password\s*=\s*)('[^']*'|[^\s]+)/gi;

/** Text with every URL password and libpq `password=` value replaced. */
export const redactText = (text: string): string =>
  text.replace(URL_PASSWORD, `$1${REDACTED}@`).replace(KEYWORD_PASSWORD, `$1${REDACTED}`);

/** A value made safe for a log line: secrets by name removed (recursively), text redacted, JSON-safe scalars. */
export const redactValue = (value: unknown, depth = 0): unknown => {
  if (typeof value === 'string') return redactText(value);
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object') return value;
  if (depth > 8) return '[deep]';
  if (value instanceof Error) return redactText(value.message);
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Uint8Array) return `<${value.length} bytes>`;
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = isSecretName(k) ? REDACTED : redactValue(v, depth + 1);
  return out;
};

export interface LogRecord {
  readonly time: string;
  readonly level: string;
  readonly app: string;
  readonly message: string;
  readonly annotations: Readonly<Record<string, unknown>>;
  readonly cause?: string;
}

const messageText = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message];
  return parts
    .map((p) => (typeof p === 'string' ? p : p instanceof Error ? p.message : JSON.stringify(redactValue(p))))
    .join(' ');
};

/** The record of one Effect log call, redacted. */
export const recordOf = (app: string, options: Logger.Logger.Options<unknown>): LogRecord => {
  const annotations: Record<string, unknown> = {};
  // sorted by name: the same call gives the same line (a HashMap's order is its hashes')
  const entries = HashMap.toEntries(options.annotations).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [k, v] of entries) annotations[k] = v;
  const cause = Cause.isEmpty(options.cause) ? undefined : redactText(Cause.pretty(options.cause));
  return {
    time: options.date.toISOString(),
    level: options.logLevel.label,
    app,
    message: redactText(messageText(options.message)),
    annotations: redactValue(annotations) as Record<string, unknown>,
    ...(cause !== undefined ? { cause } : {}),
  };
};

export interface JsonLoggerOptions {
  /** The `app` field of every line. */
  readonly app: string;
  /** Where a line goes (without its newline); default standard output. */
  readonly write?: (line: string) => void;
}

const stdout = (line: string): void => void process.stdout.write(`${line}\n`);

/** The logger: one redacted JSON line a log call. */
export const jsonLogger = (options: JsonLoggerOptions): Logger.Logger<unknown, void> => {
  const write = options.write ?? stdout;
  return Logger.make((o) => write(JSON.stringify(recordOf(options.app, o))));
};

/** Installs the JSON logger in place of Effect's default one (the app's graph provides it to everything). */
export const JsonLoggerLive = (options: JsonLoggerOptions): Layer.Layer<never> =>
  Logger.replace(Logger.defaultLogger, jsonLogger(options));

export type LevelName = 'Debug' | 'Info' | 'Warning' | 'Error';

/** A log call outside a fiber (a Node callback, a listener's event): `message` with `annotations`. */
export type LogFn = (message: string, annotations?: Record<string, unknown>, level?: LevelName) => void;

/** The same logger called directly, for code that is not an Effect (callbacks handed to libraries). */
export const logFnOf = (logger: Logger.Logger<unknown, void>): LogFn => {
  return (message, annotations = {}, level = 'Info') =>
    logger.log({
      fiberId: FiberId.none,
      logLevel: LogLevel.fromLiteral(level),
      message,
      cause: Cause.empty,
      context: FiberRefs.empty(),
      spans: List.empty(),
      annotations: HashMap.fromIterable(Object.entries(annotations)),
      date: new Date(),
    });
};

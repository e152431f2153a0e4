// NSD configuration: flags (`--name value` or `--name=value`) override environment variables (NSD_NAME), which
// override defaults; unknown flags are refused (issue 26 item 6).
import { type AuthorityShard, DEFAULT_LIVENESS_BOUND_MS, MAX_SHARDS, validShard } from '@homelab/service-control';
import { ConfigurationError, type FlagSpec, parseCommandLine } from '@homelab/service-control/process';

export interface NsdConfig {
  readonly host: string;
  readonly port: number;
  /** PostgreSQL connection (libpq environment variables are honoured by pg as well). */
  readonly database: {
    readonly host: string;
    readonly port: number;
    readonly user: string;
    readonly database: string;
    readonly password?: string;
  };
  /** PEM file of the NSD's Ed25519 response key; created on first start. */
  readonly keyFile: string;
  /** Network members `identityHex:networkHex`, comma separated (the stand-in for existing ownership). */
  readonly members: readonly { readonly identity: string; readonly network: string }[];
  /** Crash-point injection for tests: SIGKILL after the commit of this request kind, before the reply. */
  readonly fault: string | null;
  /**
   * Tests only (`--test-block-loop MSxN`, decision 0470): on SIGUSR2 once listening, block the main event loop
   * synchronously for MS ms, N times, 50 ms apart — a stand-in for a loop busy with a reconnect storm, or hung.
   */
  readonly testBlockLoop: { readonly ms: number; readonly times: number } | null;
  /** Bearer token of the owner's admin API (`/v1/admin/*`, the policy stand-in); null = the API is off. */
  readonly adminToken: string | null;
  /**
   * Uncertain P proposals (decisions 0170, 0171): the confirmation window in ms (`--port-uncertain-ms`, default 3 × 2 s)
   * and whether port.query/port.cancel are sent on config.stream (`--port-stream-requests=0` turns the mode off).
   */
  readonly portUncertainMs: number | null;
  readonly portStreamRequests: boolean;
  /**
   * The authority lease (decision 0400): its length in ms (`--authority-lease-ms`); null = no lease, take over at
   * start (decision 0332). With it, a process stands by while another holder's lease is live.
   */
  readonly authorityLeaseMs: number | null;
  /**
   * Where the lease is renewed (decision 0470): `thread` (default) on a worker thread with its own connection, sent only
   * while the main event loop showed progress within `authorityLivenessMs`; `loop` on the request event loop as
   * before (decision 0400; the failover bench's peer).
   */
  readonly authorityRenewal: 'thread' | 'loop';
  /**
   * Whether the holder keeps a presence lock on its lease connection and a standby takes over as soon as that session
   * ends (decision 0600, `--authority-holder-sessions`, default on); off where the connection is not a session of its
   * own (a transaction-mode pooler): the lease alone then bounds a failover.
   */
  readonly authorityHolderSessions: boolean;
  /** The liveness bound of the renewal thread in ms (`--authority-liveness-ms`, default 10 s, decision 0470). */
  readonly authorityLivenessMs: number;
  /** This process's holder name on the authority row (`--instance`); null = host, pid and a random suffix (main). */
  readonly instance: string | null;
  /**
   * The authority shard (decision 0455, `--shard k/N`): this process is the authority of the Networks of shard k of N
   * only (its own authority row, epoch and lease); default 1/1, every Network.
   */
  readonly shard: AuthorityShard;
  /**
   * The probe listener (`--health-port`, `--health-host`; decision 0452): /healthz and /readyz from the start of the
   * process, so a standby (no service listener yet) is alive and not ready. null = none (the service port answers).
   */
  readonly health: { readonly host: string; readonly port: number } | null;
  /**
   * At most this many unary requests in flight on the service listener (`--max-unary-in-flight`, decision 0620); a
   * request over it is refused at once with a retryable 503 before its signature is verified or PostgreSQL touched.
   */
  readonly maxUnaryInFlight: number;
}

/** Decision 0620: unary requests in flight before nsd refuses more (≈ 6 × the store's 10 connections). */
export const DEFAULT_MAX_UNARY_IN_FLIGHT = 64;

/** Every flag nsd takes (its environment variable is `NSD_<NAME>`); `--help` prints this table. */
export const NSD_FLAGS: ReadonlyArray<FlagSpec> = [
  { name: 'host', help: 'address of the service-control listener', default: '127.0.0.1' },
  { name: 'port', help: 'port of the service-control listener (0 = any)', default: '7400' },
  { name: 'db-host', help: 'PostgreSQL host (default $PGHOST or 127.0.0.1)' },
  { name: 'db-port', help: 'PostgreSQL port (default $PGPORT or 5432)' },
  { name: 'db-user', help: 'PostgreSQL user (default $PGUSER or postgres)' },
  { name: 'db-name', help: 'PostgreSQL database (default $PGDATABASE or nsd)' },
  { name: 'db-password', help: 'PostgreSQL password (default $PGPASSWORD)' },
  { name: 'key-file', help: "PEM file of nsd's Ed25519 response key, created on first start", default: 'nsd-key.pem' },
  { name: 'members', help: 'Network members identityHex(64):networkHex(32), comma separated', default: '' },
  { name: 'admin-token', help: "bearer token of the owner's admin API /v1/admin/* (unset = API off)" },
  { name: 'port-uncertain-ms', help: 'confirmation window of uncertain port proposals in ms (default 6000)' },
  { name: 'port-stream-requests', help: '0 turns off port.query/port.cancel on config.stream', default: '1' },
  {
    name: 'authority-lease-ms',
    help: 'authority lease in ms: stand by while another nsd holds it, take over when it ends (unset = take over at start)',
  },
  {
    name: 'authority-holder-sessions',
    help: 'on: a standby takes over at once when the holder’s database session ends (a crash); off: it waits out the lease (needed behind a transaction-mode pooler)',
    default: 'on',
  },
  {
    name: 'authority-renewal',
    help: 'thread: renew the lease on a thread of its own while the main loop lives; loop: on the request loop',
    default: 'thread',
  },
  {
    name: 'authority-liveness-ms',
    help: 'renewal thread: no renewal once the main event loop has been silent this long (ms)',
    default: String(DEFAULT_LIVENESS_BOUND_MS),
  },
  { name: 'instance', help: 'holder name of this process on the authority lease (default host:pid:random)' },
  {
    name: 'shard',
    help: `authority shard k/N: serve only the Networks of shard k of N (N ≤ ${MAX_SHARDS}, the same N for every nsd of the database)`,
    default: '1/1',
  },
  {
    name: 'health-port',
    help: 'port of the probe listener (/healthz, /readyz), up while standing by too (unset = none)',
  },
  { name: 'health-host', help: 'address of the probe listener', default: '127.0.0.1' },
  {
    name: 'max-unary-in-flight',
    help: 'unary requests in flight before more are refused at once with a retryable 503 (storage-unavailable, retry-after)',
    default: String(DEFAULT_MAX_UNARY_IN_FLIGHT),
  },
  { name: 'fault', help: 'tests only: SIGKILL after the commit of this request kind, before the reply' },
  { name: 'test-block-loop', help: 'tests only: MSxN, on SIGUSR2 block the event loop MS ms, N times' },
];

const NSD_COMMAND = {
  app: 'nsd',
  summary: 'The M6 authority: service-control over signed HTTP/SSE, state in PostgreSQL.',
  envPrefix: 'NSD',
  flags: NSD_FLAGS,
  exitCodes: ['ok', 'failed', 'configuration', 'keyFile', 'database'] as const,
};

const port = (what: string, raw: string): number => {
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n > 65_535)
    throw new ConfigurationError(`${what} must be a port 0..65535, not "${raw}"`);
  return n;
};

/** The configuration, `help` when `--help` was given; a refused flag or value throws ConfigurationError. */
export const loadConfig = (env: NodeJS.ProcessEnv, argv: readonly string[]): NsdConfig | { readonly help: string } => {
  const line = parseCommandLine(NSD_COMMAND, argv, env);
  if (line._tag === 'Help') return { help: line.text };
  const get = line.get;
  const members = (get('members') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => {
      const [identity, network] = s.split(':');
      if (!/^[0-9a-f]{64}$/.test(identity ?? '') || !/^[0-9a-f]{32}$/.test(network ?? ''))
        throw new ConfigurationError(`bad member ${s}: identityHex(64):networkHex(32)`);
      return { identity: identity as string, network: network as string };
    });
  const password = get('db-password') ?? env['PGPASSWORD'];
  const uncertain = get('port-uncertain-ms');
  if (uncertain !== undefined && !/^[0-9]+$/.test(uncertain))
    throw new ConfigurationError(`--port-uncertain-ms must be a whole number of ms, not "${uncertain}"`);
  const lease = get('authority-lease-ms');
  if (lease !== undefined && (!/^[0-9]+$/.test(lease) || Number(lease) < 100))
    throw new ConfigurationError(`--authority-lease-ms must be a whole number of ms ≥ 100, not "${lease}"`);
  const renewal = get('authority-renewal') as string;
  if (renewal !== 'thread' && renewal !== 'loop')
    throw new ConfigurationError(`--authority-renewal must be thread or loop, not "${renewal}"`);
  const holderSessions = get('authority-holder-sessions') as string;
  if (holderSessions !== 'on' && holderSessions !== 'off')
    throw new ConfigurationError(`--authority-holder-sessions must be on or off, not "${holderSessions}"`);
  const liveness = get('authority-liveness-ms') as string;
  if (!/^[0-9]+$/.test(liveness) || Number(liveness) < 100)
    throw new ConfigurationError(`--authority-liveness-ms must be a whole number of ms ≥ 100, not "${liveness}"`);
  const block = get('test-block-loop');
  const blockParts = block === undefined ? null : /^([0-9]+)x([0-9]+)$/.exec(block);
  if (block !== undefined && blockParts === null)
    throw new ConfigurationError(`--test-block-loop must be MSxN, not "${block}"`);
  const shardText = get('shard') as string;
  const [index, count] = shardText.split('/').map((x) => (/^[0-9]+$/.test(x) ? Number(x) : NaN));
  const shard = { index: index ?? NaN, count: count ?? NaN };
  if (!validShard(shard))
    throw new ConfigurationError(`--shard must be k/N with 1 ≤ k ≤ N ≤ ${MAX_SHARDS}, not "${shardText}"`);
  const healthPort = get('health-port');
  const maxUnary = get('max-unary-in-flight') as string;
  if (!/^[0-9]+$/.test(maxUnary) || Number(maxUnary) < 1)
    throw new ConfigurationError(`--max-unary-in-flight must be a whole number ≥ 1, not "${maxUnary}"`);
  return {
    host: get('host') as string,
    port: port('--port', get('port') as string),
    database: {
      host: get('db-host') ?? env['PGHOST'] ?? '127.0.0.1',
      port: port('--db-port', get('db-port') ?? env['PGPORT'] ?? '5432'),
      user: get('db-user') ?? env['PGUSER'] ?? 'postgres',
      database: get('db-name') ?? env['PGDATABASE'] ?? 'nsd',
      ...(password === undefined ? {} : { password }),
    },
    keyFile: get('key-file') as string,
    members,
    fault: get('fault') ?? null,
    testBlockLoop: blockParts === null ? null : { ms: Number(blockParts[1]), times: Number(blockParts[2]) },
    adminToken: get('admin-token') ?? null,
    portUncertainMs: uncertain === undefined ? null : Number(uncertain),
    portStreamRequests: get('port-stream-requests') !== '0',
    authorityLeaseMs: lease === undefined ? null : Number(lease),
    authorityRenewal: renewal,
    authorityHolderSessions: holderSessions === 'on',
    authorityLivenessMs: Number(liveness),
    instance: get('instance') ?? null,
    shard,
    health:
      healthPort === undefined ? null : { host: get('health-host') as string, port: port('--health-port', healthPort) },
    maxUnaryInFlight: Number(maxUnary),
  };
};

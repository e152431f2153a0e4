// Configuration from flags and environment (flags win), with defaults that are safe on a workstation: loopback
// only, port 8080, 1 MiB bodies. Pure: argv and env are parameters.
import { randomBytes } from 'node:crypto';
import { Domain } from '@homelab/ayatori-database';

export type KubeSource =
  | { readonly _tag: 'Kubeconfig'; readonly path: string }
  | { readonly _tag: 'InCluster' }
  | { readonly _tag: 'TestbedState'; readonly path?: string };

export interface ControllerConfig {
  /** The address asked for; without an identity module the server binds loopback whatever this says. */
  readonly host: string;
  readonly port: number;
  /**
   * The probe listener (`--health-port`, `--health-host`; issue 26 item 6): plain HTTP answering only GET /healthz,
   * /readyz and /metrics, whatever the Host header, so a kubelet can probe and Prometheus scrape the pod while the
   * API stays on loopback. No port = none (the API's listener answers the probes, as before).
   */
  readonly health: { readonly host: string; readonly port: number } | null;
  /**
   * The control-plane database (`--identity-db`, KOS_IDENTITY_DB): accounts, sessions, audit. With it every request
   * is authenticated and the API may bind beyond loopback (with TLS, or `--insecure-http`); without it the API is
   * loopback-only and every caller is the local Owner (decision 0204).
   */
  readonly identityDb?: string;
  /** Where the daily `VACUUM INTO` export of the control-plane database goes (`--export-dir`); absent = skipped. */
  readonly exportDir?: string;
  /** TLS certificate and key files (PEM); both or neither. */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  /** Serve plain HTTP on a non-loopback address anyway (passwords and tokens then cross the network in clear). */
  readonly insecureHttp: boolean;
  readonly kube: KubeSource;
  readonly bodyLimitBytes: number;
  /** HMAC key of continue tokens; random per process unless given (tokens then do not survive a restart). */
  readonly continueKey: Uint8Array;
  readonly discoveryNamespaces: ReadonlyArray<string>;
  readonly discoveryIntervalMs: number;
  readonly shutdownGraceMs: number;
  /** Which modules run in this process (`--modules` / `CONTROLLER_MODULES`, default both). */
  readonly modules: ReadonlySet<ControllerModule>;
  /** Seed `--database-secret-namespace` (default `$POD_NAMESPACE`): the admin Secrets' namespace; empty disables the Instance controller. */
  readonly databaseSecretNamespace: string;
  /** Seed `--database-root-cert`: path of the PEM bundle trusted for management connections; empty = system roots. */
  readonly databaseRootCert: string;
  /** Restrict the Ayatori informers to a label selector (`--database-label-selector`; not in the seed: shared test clusters). Empty = every object. */
  readonly databaseLabelSelector: string;
  /**
   * How many Tenants (and Databases, Instances) each Ayatori controller reconciles at once (`--database-workers`,
   * controller-runtime's MaxConcurrentReconciles; default 1, decision 0421). One key is never in two rounds at once.
   */
  readonly databaseWorkers: number;
  /**
   * Issue 21: provisioning, credential delivery, rotation and reclaim of Tenants run only with an OpenBao address
   * (`--openbao-address`, `--openbao-token-file`, `--openbao-kv-mount` default `secret`,
   * `--openbao-tenant-base-path` default `postgresql-tenants`). Absent: the seed slice (Bound ≠ Ready).
   */
  readonly openBao?: {
    readonly address: string;
    readonly tokenFile: string;
    readonly mount: string;
    readonly basePath: string;
  };
  /** Leader election of the Ayatori controllers (`--leader-elect`, kubebuilder's flag; default off). */
  readonly leaderElection: { readonly enabled: boolean; readonly namespace: string; readonly id: string };
  /** KOS module start-up: `install` applies the generated CRDs and waits until served; `verify` (default) refuses to start when they are missing or drift. */
  readonly kosCrds: 'install' | 'verify';
  /**
   * Who writes each extension's ClusterRole (`--extension-rbac`, decision 0440): `managed` (default) — the Installer,
   * under the shipped `kos-controller-extension-rbac` role (`escalate` on ClusterRoles); `external` — an operator,
   * from `npm run render:extension-role -w @homelab/controller`.
   */
  readonly extensionRbac: 'managed' | 'external';
  /** The Lease of the KOS reconcilers under leader election (`--kos-leader-election-id`). */
  readonly kosLeaderElectionId: string;
  /** Restrict the KOS reconcilers' informers (`--kos-label-selector`; for shared test clusters). Empty = every object. */
  readonly kosLabelSelector: string;
  /**
   * The directory `file:` package references of SystemComponents resolve in (`--extension-dir`, decision 0340); unset
   * = only `http(s)://` packages are readable (a `file:` one is `PackageVerified=False`, unreadable).
   */
  readonly extensionDir?: string;
}

export const CONTROLLER_MODULES = ['kos', 'ayatori'] as const;
export type ControllerModule = (typeof CONTROLLER_MODULES)[number];

export class ConfigError extends Error {}

/**
 * Every flag the controller takes, with its environment variable: `--help` prints this table and any other flag or a
 * stray argument is refused (issue 26 item 6). `boolean` flags may stand alone; the others take `--flag value` or
 * `--flag=value`.
 */
export const CONTROLLER_FLAGS: ReadonlyArray<{
  readonly name: string;
  readonly env?: string;
  readonly help: string;
  readonly boolean?: true;
}> = [
  { name: 'host', env: 'KOS_HOST', help: 'API address; loopback only until identity is configured (127.0.0.1)' },
  { name: 'port', env: 'KOS_PORT', help: 'API port, 0 = any (8080)' },
  {
    name: 'health-host',
    env: 'CONTROLLER_HEALTH_HOST',
    help: 'address of the probe listener: /healthz /readyz /metrics only (127.0.0.1)',
  },
  { name: 'health-port', env: 'CONTROLLER_HEALTH_PORT', help: 'port of the probe listener, 0 = any (unset = none)' },
  { name: 'kubeconfig', env: 'KUBECONFIG', help: 'kubeconfig file (default: in-cluster, else the test bed)' },
  { name: 'testbed-state', env: 'HOMELAB_TESTBED_STATE', help: "the test bed's state file" },
  { name: 'modules', env: 'CONTROLLER_MODULES', help: `modules to run (${CONTROLLER_MODULES.join(',')})` },
  { name: 'body-limit', env: 'KOS_BODY_LIMIT', help: 'largest request body in bytes (1048576)' },
  { name: 'continue-key', env: 'KOS_CONTINUE_KEY', help: 'hex key of list continue tokens, shared by replicas' },
  { name: 'discovery-namespaces', env: 'KOS_DISCOVERY_NAMESPACES', help: 'namespaces discovery reads (all)' },
  { name: 'discovery-interval-ms', env: 'KOS_DISCOVERY_INTERVAL_MS', help: 'discovery interval (30000)' },
  { name: 'shutdown-grace-ms', env: 'KOS_SHUTDOWN_GRACE_MS', help: 'grace for accepted work on SIGTERM (30000)' },
  { name: 'kos-crds', env: 'KOS_CRDS', help: 'install or verify the KOS CRDs (verify)' },
  {
    name: 'extension-rbac',
    env: 'KOS_EXTENSION_RBAC',
    help: "managed or external: who writes each extension's ClusterRole (managed)",
  },
  { name: 'kos-label-selector', env: 'KOS_LABEL_SELECTOR', help: 'KOS objects this controller reconciles (all)' },
  { name: 'kos-leader-election-id', env: 'KOS_LEADER_ELECTION_ID', help: "KOS module's Lease name" },
  {
    name: 'extension-dir',
    env: 'KOS_EXTENSION_DIR',
    help: 'directory of file: extension packages (unset = http(s) packages only)',
  },
  {
    name: 'leader-elect',
    env: 'CONTROLLER_LEADER_ELECT',
    help: 'run modules only while holding a Lease',
    boolean: true,
  },
  { name: 'leader-election-namespace', env: 'CONTROLLER_LEADER_ELECTION_NAMESPACE', help: 'Lease namespace' },
  { name: 'leader-election-id', env: 'CONTROLLER_LEADER_ELECTION_ID', help: "Ayatori module's Lease name" },
  { name: 'database-secret-namespace', env: 'POD_NAMESPACE', help: 'namespace of Ayatori credential Secrets' },
  { name: 'database-root-cert', help: 'CA file for PostgreSQL connections' },
  { name: 'database-label-selector', env: 'CONTROLLER_DATABASE_LABEL_SELECTOR', help: 'Ayatori objects handled' },
  {
    name: 'database-workers',
    env: 'CONTROLLER_DATABASE_WORKERS',
    help: 'Ayatori objects of one kind reconciled at once (1)',
  },
  { name: 'openbao-address', help: 'OpenBao URL (unset = no OpenBao delivery)' },
  { name: 'openbao-token-file', help: 'file holding the OpenBao token' },
  { name: 'openbao-kv-mount', help: 'KV v2 mount (secret)' },
  { name: 'openbao-tenant-base-path', help: 'KV path of tenant credentials (postgresql-tenants)' },
  {
    name: 'identity-db',
    env: 'KOS_IDENTITY_DB',
    help: 'control-plane SQLite file: accounts, sessions, audit (unset = loopback Owner)',
  },
  { name: 'export-dir', env: 'KOS_EXPORT_DIR', help: 'directory of the daily control-plane database export' },
  { name: 'tls-cert', env: 'KOS_TLS_CERT', help: 'TLS certificate file (PEM), with --tls-key' },
  { name: 'tls-key', env: 'KOS_TLS_KEY', help: 'TLS private key file (PEM), with --tls-cert' },
  {
    name: 'insecure-http',
    env: 'KOS_INSECURE_HTTP',
    help: 'allow plain HTTP beyond loopback (tokens in clear)',
    boolean: true,
  },
];

export const controllerHelp = (): string =>
  [
    'usage: controller [--flag value | --flag=value]...',
    '',
    'The KOS control plane and reconcilers, and the Ayatori Database module.',
    '',
    'flags:',
    ...CONTROLLER_FLAGS.map((f) => `  --${f.name.padEnd(27)}${f.help}${f.env !== undefined ? `  [${f.env}]` : ''}`),
    '  --help',
    '',
    'exit codes:',
    '  0  stopped by SIGTERM/SIGINT',
    '  1  start refused (KOS CRD/ABI gate, a port in use, an unreadable file) or a module stopped on its own',
    '  2  configuration (flags, environment, TLS files): one line on stderr',
    '  3  the Kubernetes client could not be made (kubeconfig, token, in-cluster service account)',
    '  4  the control-plane database (--identity-db) could not be opened',
    '',
  ].join('\n');

/** True when `--help` is among the arguments: main prints `controllerHelp()` and exits 0 before anything starts. */
export const wantsHelp = (argv: ReadonlyArray<string>): boolean => argv.includes('--help');

/** An unknown flag, a value flag without its value, or a stray argument is refused before anything is read. */
const refuseUnknownArguments = (argv: ReadonlyArray<string>): void => {
  const known = new Map(CONTROLLER_FLAGS.map((f) => [f.name, f]));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (!a.startsWith('--')) throw new ConfigError(`unexpected argument "${a}" (see --help)`);
    const eq = a.indexOf('=');
    const name = a.slice(2, eq < 0 ? undefined : eq);
    const f = known.get(name);
    if (f === undefined) throw new ConfigError(`unknown flag --${name} (see --help)`);
    if (eq >= 0 || f.boolean === true) continue;
    const value = argv[i + 1];
    if (value === undefined || value.startsWith('--')) throw new ConfigError(`--${name} needs a value`);
    i++;
  }
};

const flag = (argv: ReadonlyArray<string>, name: string): string | undefined => {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === `--${name}`) return argv[i + 1];
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return undefined;
};

/** A boolean flag may stand alone (`--leader-elect`) or carry a value (`--leader-elect=false`). */
const boolFlag = (argv: ReadonlyArray<string>, name: string): string | undefined => {
  for (const a of argv) {
    if (a === `--${name}`) return 'true';
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return undefined;
};

const int = (what: string, raw: string, min: number, max: number): number => {
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < min || n > max)
    throw new ConfigError(`${what} must be an integer from ${min} to ${max}, not "${raw}"`);
  return n;
};

const healthListener = (host: string | undefined, port: string | undefined): ControllerConfig['health'] => {
  if (port === undefined || port === '') {
    if (host !== undefined && host !== '') throw new ConfigError('--health-host needs --health-port');
    return null;
  }
  return { host: host || '127.0.0.1', port: int('health port', port, 0, 65535) };
};

export const parseConfig = (
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>,
): ControllerConfig => {
  refuseUnknownArguments(argv);
  const get = (f: string, e: string) => flag(argv, f) ?? env[e];
  const kubeconfig = get('kubeconfig', 'KUBECONFIG') || undefined;
  const testbedState = get('testbed-state', 'HOMELAB_TESTBED_STATE') || undefined;
  const kube: KubeSource =
    kubeconfig !== undefined
      ? { _tag: 'Kubeconfig', path: kubeconfig }
      : env['KUBERNETES_SERVICE_HOST'] !== undefined
        ? { _tag: 'InCluster' }
        : { _tag: 'TestbedState', ...(testbedState !== undefined ? { path: testbedState } : {}) };
  const key = get('continue-key', 'KOS_CONTINUE_KEY');
  if (key !== undefined && !/^([0-9a-f]{2}){16,}$/i.test(key))
    throw new ConfigError('the continue key must be at least 16 bytes of hex');
  if (env['KOS_IDENTITY'] !== undefined && env['KOS_IDENTITY'] !== '')
    throw new ConfigError('KOS_IDENTITY is not a setting: give the control-plane database with KOS_IDENTITY_DB');
  const identityDb = get('identity-db', 'KOS_IDENTITY_DB') || undefined;
  const exportDir = get('export-dir', 'KOS_EXPORT_DIR') || undefined;
  if (exportDir !== undefined && identityDb === undefined)
    throw new ConfigError('--export-dir exports the control-plane database: give --identity-db too');
  const certFile = get('tls-cert', 'KOS_TLS_CERT') || undefined;
  const keyFile = get('tls-key', 'KOS_TLS_KEY') || undefined;
  if ((certFile === undefined) !== (keyFile === undefined))
    throw new ConfigError('--tls-cert and --tls-key go together');
  const insecureRaw = boolFlag(argv, 'insecure-http') ?? env['KOS_INSECURE_HTTP'] ?? 'false';
  if (!['true', 'false'].includes(insecureRaw))
    throw new ConfigError(`--insecure-http must be true or false, not "${insecureRaw}"`);
  const host = get('host', 'KOS_HOST') ?? '127.0.0.1';
  if (identityDb !== undefined && !LOOPBACK.has(host) && certFile === undefined && insecureRaw !== 'true')
    throw new ConfigError(
      `--host ${host} is beyond loopback: give --tls-cert and --tls-key, or --insecure-http to send passwords and tokens in clear`,
    );
  const moduleNames = (get('modules', 'CONTROLLER_MODULES') ?? CONTROLLER_MODULES.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const m of moduleNames)
    if (!(CONTROLLER_MODULES as ReadonlyArray<string>).includes(m))
      throw new ConfigError(`unknown module "${m}" (known: ${CONTROLLER_MODULES.join(', ')})`);
  if (moduleNames.length === 0)
    throw new ConfigError(`--modules names no module (known: ${CONTROLLER_MODULES.join(', ')})`);
  const leaderRaw = boolFlag(argv, 'leader-elect') ?? env['CONTROLLER_LEADER_ELECT'] ?? 'false';
  if (!['true', 'false'].includes(leaderRaw))
    throw new ConfigError(`--leader-elect must be true or false, not "${leaderRaw}"`);
  const leaderNamespace =
    get('leader-election-namespace', 'CONTROLLER_LEADER_ELECTION_NAMESPACE') || env['POD_NAMESPACE'] || '';
  if (leaderRaw === 'true' && leaderNamespace === '')
    throw new ConfigError('--leader-elect needs --leader-election-namespace (or POD_NAMESPACE)');
  const kosCrds = get('kos-crds', 'KOS_CRDS') ?? 'verify';
  const extensionRbac = get('extension-rbac', 'KOS_EXTENSION_RBAC') ?? 'managed';
  if (extensionRbac !== 'managed' && extensionRbac !== 'external')
    throw new ConfigError(`--extension-rbac must be managed or external, not "${extensionRbac}"`);
  if (kosCrds !== 'install' && kosCrds !== 'verify')
    throw new ConfigError(`--kos-crds must be install or verify, not "${kosCrds}"`);
  const openBaoAddress = flag(argv, 'openbao-address') ?? '';
  let openBao: ControllerConfig['openBao'];
  if (openBaoAddress !== '') {
    const tokenFile = flag(argv, 'openbao-token-file') ?? '';
    const mount = flag(argv, 'openbao-kv-mount') ?? 'secret';
    const basePath = flag(argv, 'openbao-tenant-base-path') ?? 'postgresql-tenants';
    if (!Domain.isValidOpenBaoAddress(openBaoAddress))
      throw new ConfigError('--openbao-address must be an absolute http(s) URL without userinfo, query or fragment');
    if (tokenFile === '') throw new ConfigError('--openbao-address needs --openbao-token-file');
    if (!Domain.isValidKvPath(mount) || !Domain.isValidKvPath(basePath))
      throw new ConfigError(
        '--openbao-kv-mount and --openbao-tenant-base-path must be mount-relative paths without empty, ., .., data or metadata segments',
      );
    openBao = { address: openBaoAddress, tokenFile, mount, basePath };
  }
  const extensionDir = get('extension-dir', 'KOS_EXTENSION_DIR');
  return {
    ...(openBao !== undefined ? { openBao } : {}),
    ...(extensionDir !== undefined && extensionDir !== '' ? { extensionDir } : {}),
    host,
    ...(identityDb !== undefined ? { identityDb } : {}),
    ...(exportDir !== undefined ? { exportDir } : {}),
    ...(certFile !== undefined && keyFile !== undefined ? { tls: { certFile, keyFile } } : {}),
    insecureHttp: insecureRaw === 'true',
    port: int('port', get('port', 'KOS_PORT') ?? '8080', 0, 65535),
    health: healthListener(get('health-host', 'CONTROLLER_HEALTH_HOST'), get('health-port', 'CONTROLLER_HEALTH_PORT')),
    kube,
    bodyLimitBytes: int(
      'body limit',
      get('body-limit', 'KOS_BODY_LIMIT') ?? String(1024 * 1024),
      1024,
      64 * 1024 * 1024,
    ),
    continueKey: key !== undefined ? Uint8Array.from(Buffer.from(key, 'hex')) : new Uint8Array(randomBytes(32)),
    discoveryNamespaces: (get('discovery-namespaces', 'KOS_DISCOVERY_NAMESPACES') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
    discoveryIntervalMs: int(
      'discovery interval',
      get('discovery-interval-ms', 'KOS_DISCOVERY_INTERVAL_MS') ?? '30000',
      100,
      86_400_000,
    ),
    shutdownGraceMs: int('shutdown grace', get('shutdown-grace-ms', 'KOS_SHUTDOWN_GRACE_MS') ?? '30000', 0, 600_000),
    modules: new Set(moduleNames as ControllerModule[]),
    databaseSecretNamespace: flag(argv, 'database-secret-namespace') ?? env['POD_NAMESPACE'] ?? '',
    databaseRootCert: flag(argv, 'database-root-cert') ?? '',
    databaseLabelSelector: get('database-label-selector', 'CONTROLLER_DATABASE_LABEL_SELECTOR') ?? '',
    databaseWorkers: int('database workers', get('database-workers', 'CONTROLLER_DATABASE_WORKERS') ?? '1', 1, 64),
    leaderElection: {
      enabled: leaderRaw === 'true',
      namespace: leaderNamespace,
      id: get('leader-election-id', 'CONTROLLER_LEADER_ELECTION_ID') ?? 'ayatori-database.database.ayatori.ddupan.top',
    },
    kosCrds,
    extensionRbac,
    kosLabelSelector: get('kos-label-selector', 'KOS_LABEL_SELECTOR') ?? '',
    kosLeaderElectionId: get('kos-leader-election-id', 'KOS_LEADER_ELECTION_ID') ?? 'kos-controller.kos.tsic.top',
  };
};

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/**
 * Where to bind. Without the control-plane database: loopback, always — every caller is the local Owner (decisions
 * 0093, 0200). With it: the asked-for address, beyond loopback only with TLS or an explicit `--insecure-http`.
 */
export const bindAddress = (config: ControllerConfig): { readonly host: string; readonly notice?: string } => {
  if (config.identityDb !== undefined) {
    const host = config.host === 'localhost' ? '127.0.0.1' : config.host;
    if (LOOPBACK.has(config.host) || config.tls !== undefined) return { host };
    if (config.insecureHttp)
      return {
        host,
        notice: `--insecure-http: the control-plane API listens on ${host} without TLS; passwords and tokens cross the network in clear`,
      };
    throw new ConfigError(
      `--host ${config.host} is beyond loopback: give --tls-cert and --tls-key, or --insecure-http to send passwords and tokens in clear`,
    );
  }
  if (LOOPBACK.has(config.host)) {
    return {
      host: config.host === 'localhost' ? '127.0.0.1' : config.host,
      notice:
        'no identity module is configured: the control-plane API listens on loopback only and every caller acts as the local Owner',
    };
  }
  return {
    host: '127.0.0.1',
    notice: `no identity module is configured: refusing to listen on ${config.host}; the control-plane API listens on loopback (127.0.0.1) only and every caller acts as the local Owner`,
  };
};

// NSD configuration: flags (--name=value) override environment variables (NSD_NAME), which override defaults.
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
  /** Bearer token of the owner's admin API (`/v1/admin/*`, the policy stand-in); null = the API is off. */
  readonly adminToken: string | null;
  /**
   * Uncertain P proposals (decisions 0170, 0171): the confirmation window in ms (`--port-uncertain-ms`, default 3 × 2 s)
   * and whether port.query/port.cancel are sent on config.stream (`--port-stream-requests=0` turns the mode off).
   */
  readonly portUncertainMs: number | null;
  readonly portStreamRequests: boolean;
}

const flag = (argv: readonly string[], name: string): string | undefined => {
  const hit = argv.find((a) => a.startsWith(`--${name}=`));
  return hit?.slice(name.length + 3);
};

export const loadConfig = (env: NodeJS.ProcessEnv, argv: readonly string[]): NsdConfig => {
  const get = (name: string, fallback?: string): string | undefined =>
    flag(argv, name) ?? env[`NSD_${name.toUpperCase().replaceAll('-', '_')}`] ?? fallback;
  const members = (get('members', '') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => {
      const [identity, network] = s.split(':');
      if (!/^[0-9a-f]{64}$/.test(identity ?? '') || !/^[0-9a-f]{32}$/.test(network ?? ''))
        throw new Error(`bad member ${s}: identityHex(64):networkHex(32)`);
      return { identity: identity as string, network: network as string };
    });
  const password = get('db-password', env['PGPASSWORD']);
  return {
    host: get('host', '127.0.0.1') as string,
    port: Number(get('port', '7400')),
    database: {
      host: get('db-host', env['PGHOST'] ?? '127.0.0.1') as string,
      port: Number(get('db-port', env['PGPORT'] ?? '5432')),
      user: get('db-user', env['PGUSER'] ?? 'postgres') as string,
      database: get('db-name', env['PGDATABASE'] ?? 'nsd') as string,
      ...(password === undefined ? {} : { password }),
    },
    keyFile: get('key-file', 'nsd-key.pem') as string,
    members,
    fault: get('fault') ?? null,
    adminToken: get('admin-token') ?? null,
    portUncertainMs: get('port-uncertain-ms') === undefined ? null : Number(get('port-uncertain-ms')),
    portStreamRequests: get('port-stream-requests', '1') !== '0',
  };
};

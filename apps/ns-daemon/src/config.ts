// ns-daemon configuration: flags (`--name value` or `--name=value`) override environment variables (NS_NAME), which
// override defaults; unknown flags are refused (issue 26 item 6).
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parsePeers } from '@homelab/service-control/dataplane';
import { Either } from 'effect';
import { ConfigurationError, type FlagSpec, parseCommandLine } from '@homelab/service-control/process';
import {
  type AuthorityShard,
  type DeclarationWire,
  MAX_SHARDS,
  declarationFromLocal,
  declarationToWire,
  fromHex,
  shardOf,
  sortDeclarations,
} from '@homelab/service-control';

export interface NsConfig {
  /** Base URL of the NSD of this daemon's Network, e.g. http://127.0.0.1:7400 (chosen from the shard list, 0485). */
  readonly nsdUrl: string;
  /** With a shard list in `--nsd-url`: the authority shard of `network` the URL was chosen for; null = one URL given. */
  readonly nsdShard: AuthorityShard | null;
  /** The trusted NSD response key (raw Ed25519 public key, 64 hex). */
  readonly nsdKey: string;
  readonly network: string;
  readonly keyFile: string;
  readonly stateFile: string;
  /** JSON file: a list of local declarations ({key, protocols, backend_host, backend_port, ...}). */
  readonly declarationsFile: string | null;
  readonly host: string;
  readonly port: number;
  /** The probe listener (/healthz, /readyz, /metrics only); no port = none, the owner's listener answers them. */
  readonly healthHost: string;
  readonly healthPort: number | null;
  readonly fault: string | null;
  /**
   * Test-only stand-in for a data plane (decision 0146): `POST /debug/simulated-flow` opens a simulated flow through
   * the consumer's PermitEngine. Off unless `--debug-simulated-flows=1` / `NS_DEBUG_SIMULATED_FLOWS=1`.
   */
  readonly debugSimulatedFlows: boolean;
  /** The local-name DNS listener (decision 0176): loopback only (127.0.0.1 or ::1); no port = no listener. */
  readonly dnsHost: string;
  readonly dnsPort: number | null;
  /** The local zone: a single label or one label under it is a managed name (decision 0119). */
  readonly dnsZone: string;
  /** Test-only fault (decision 0172): arbitrate snapshot proposals this many ms late (`--debug-defer-proposals-ms`). */
  readonly debugDeferProposalsMs: number | null;
  /**
   * The data plane (decision 0262): `sockets` = real TCP/UDP forwarding gated by the permits, `simulated` = the
   * stand-in of decision 0146 (no listener is bound).
   */
  readonly dataPlane: DataPlaneConfig | null;
}

export interface DataPlaneConfig {
  /** This node's data-plane address (N6 stand-in): publisher endpoints bind here, consumer flows dial from here. */
  readonly host: string;
  /** Where consumed services are served (VIP stand-in). */
  readonly consumerHost: string;
  /** identity (64 hex) → that node's data-plane address (where to dial; with `n6Mode: address`, [D] the peer identity, decision 0262). */
  readonly peers: ReadonlyMap<string, string>;
  /**
   * `tls`: TCP between daemons is N6 — TLS 1.3 with this node's Ed25519 key, peers proven by theirs (decision 0264) —
   * and UDP is AEAD frames keyed from such a TLS connection (decision 0269);
   * `address`: the address-based stand-in of decision 0262 (no handshake).
   */
  readonly n6Mode: 'tls' | 'address';
}

/** Every flag the daemon takes (its environment variable is `NS_<NAME>`); `--help` prints this table. */
export const NS_FLAGS: ReadonlyArray<FlagSpec> = [
  {
    name: 'nsd-url',
    help: "base URL of the NSD, or of every authority shard's NSD: 1=url,2=url,… (the daemon uses its Network's shard)",
    default: 'http://127.0.0.1:7400',
  },
  { name: 'nsd-key', help: "the NSD's Ed25519 public key, 64 lowercase hex (required)" },
  { name: 'network', help: 'the Network id, 32 lowercase hex (required)' },
  { name: 'key-file', help: "PEM file of this node's Ed25519 key, created on first start", default: 'ns-key.pem' },
  { name: 'state-file', help: 'SQLite file of the daemon state', default: 'ns-state.db' },
  { name: 'declarations', help: 'JSON file listing the local service declarations' },
  { name: 'host', help: "address of the owner's loopback endpoints", default: '127.0.0.1' },
  { name: 'port', help: "port of the owner's endpoints (0 = any)", default: '7410' },
  {
    name: 'health-host',
    help: 'address of the probe listener (/healthz, /readyz, /metrics only)',
    default: '127.0.0.1',
  },
  { name: 'health-port', help: 'port of the probe listener (unset = none; the owner port answers probes)' },
  { name: 'dns-host', help: 'local-name DNS listener address: 127.0.0.1 or ::1', default: '127.0.0.1' },
  { name: 'dns-port', help: 'local-name DNS listener port (unset = no listener, 0 = any)' },
  { name: 'dns-zone', help: 'the local zone of managed names', default: 'ns.internal' },
  {
    name: 'data-plane',
    help: 'sockets = real TCP/UDP forwarding gated by the permits; simulated = none',
    default: 'simulated',
  },
  { name: 'data-plane-host', help: "this node's data-plane address: published services bind here (needed by sockets)" },
  { name: 'data-plane-consumer-host', help: 'address consumed services are served on (default: --data-plane-host)' },
  { name: 'data-plane-peers', help: "other nodes' data-plane addresses: identity=address,... (identity 64 hex)" },
  {
    name: 'data-plane-n6',
    help: 'tls = TCP and UDP between daemons keyed by TLS 1.3 with the nodes’ Ed25519 keys; address = unauthenticated stand-in',
    default: 'tls',
  },
  { name: 'fault', help: 'tests only: crash-point injection' },
  { name: 'debug-simulated-flows', help: 'tests only: 1 enables POST /debug/simulated-flow', default: '0' },
  { name: 'debug-defer-proposals-ms', help: 'tests only: arbitrate snapshot proposals this many ms late' },
];

const NS_COMMAND = {
  app: 'ns-daemon',
  summary: 'The per-node M6 daemon: declares local services to the NSD, holds leases and permits, answers local names.',
  envPrefix: 'NS',
  flags: NS_FLAGS,
  exitCodes: ['ok', 'failed', 'configuration', 'stateLocked', 'keyFile'] as const,
};

/** The configuration, `help` when `--help` was given; a refused flag or value throws ConfigurationError. */
export const loadConfig = (env: NodeJS.ProcessEnv, argv: readonly string[]): NsConfig | { readonly help: string } => {
  const line = parseCommandLine(NS_COMMAND, argv, env);
  if (line._tag === 'Help') return { help: line.text };
  const get = line.get;
  const nsdKey = get('nsd-key') ?? '';
  const network = get('network') ?? '';
  if (!/^[0-9a-f]{64}$/.test(nsdKey))
    throw new ConfigurationError('NS_NSD_KEY / --nsd-key must be the NSD public key as 64 lowercase hex');
  if (!/^[0-9a-f]{32}$/.test(network)) throw new ConfigurationError('NS_NETWORK / --network must be 32 lowercase hex');
  const port = get('port') as string;
  if (!/^[0-9]+$/.test(port) || Number(port) > 65_535)
    throw new ConfigurationError(`NS_PORT / --port must be 0..65535, not "${port}"`);
  const defer = get('debug-defer-proposals-ms');
  const healthPort = get('health-port');
  if (healthPort !== undefined && (!/^[0-9]+$/.test(healthPort) || Number(healthPort) > 65_535))
    throw new ConfigurationError(`NS_HEALTH_PORT / --health-port must be 0..65535, not "${healthPort}"`);
  const nsd = nsdOfNetwork(get('nsd-url') as string, network);
  if ('error' in nsd) throw new ConfigurationError(`NS_NSD_URL / --nsd-url: ${nsd.error}`);
  return {
    nsdUrl: nsd.url,
    nsdShard: nsd.shard,
    nsdKey,
    network,
    keyFile: get('key-file') as string,
    stateFile: get('state-file') as string,
    declarationsFile: get('declarations') ?? null,
    host: get('host') as string,
    port: Number(port),
    healthHost: get('health-host') as string,
    healthPort: healthPort === undefined ? null : Number(healthPort),
    fault: get('fault') ?? null,
    debugSimulatedFlows: get('debug-simulated-flows') === '1',
    ...dnsConfig(get('dns-host') as string, get('dns-port'), get('dns-zone') as string),
    debugDeferProposalsMs: defer === undefined ? null : Number(defer),
    dataPlane: dataPlaneConfig(get),
  };
};

/**
 * The NSD of the daemon's Network (decision 0485). `--nsd-url` is one URL (that NSD serves the Network, as before), or
 * the URL of every authority shard, `1=url,2=url,…,N=url`: the list's length is the shard count N and the daemon
 * talks to the NSD of shard `shardOf(network, N)` — the same pure function the NSD processes and the database use
 * (decision 0455), so one list configures every daemon of every Network. Every index 1..N exactly once.
 */
export const nsdOfNetwork = (
  value: string,
  networkHex: string,
): { readonly url: string; readonly shard: AuthorityShard | null } | { readonly error: string } => {
  if (!/^[0-9]+=/.test(value.trim())) return { url: value, shard: null };
  const urls = new Map<number, string>();
  for (const entry of value.split(',')) {
    const m = /^\s*([0-9]+)=(\S+)\s*$/.exec(entry);
    if (m === null) return { error: `"${entry}" is not shard=url (a list is 1=url,2=url,…)` };
    const index = Number(m[1]);
    if (urls.has(index)) return { error: `shard ${index} is listed twice` };
    if (!/^https?:\/\/[^/\s]+/.test(m[2] as string))
      return { error: `shard ${index}: "${m[2]}" is not an http(s) URL` };
    urls.set(index, (m[2] as string).replace(/\/+$/, ''));
  }
  const count = urls.size;
  if (count > MAX_SHARDS) return { error: `${count} shards, at most ${MAX_SHARDS}` };
  for (const k of urls.keys())
    if (k < 1 || k > count) return { error: `shard ${k} outside 1..${count} (the list's length is the shard count)` };
  const index = shardOf(fromHex(networkHex), count);
  return { url: urls.get(index) as string, shard: { index, count } };
};

/** The data-plane flags, checked: `sockets` needs an IP address to bind; every peer entry is identity=IP. */
const dataPlaneConfig = (get: (name: string) => string | undefined): DataPlaneConfig | null => {
  const mode = get('data-plane');
  if (mode === 'simulated') return null;
  if (mode !== 'sockets')
    throw new ConfigurationError(`NS_DATA_PLANE / --data-plane must be sockets or simulated, not "${mode}"`);
  const host = get('data-plane-host') ?? '';
  if (isIP(host) === 0)
    throw new ConfigurationError(`NS_DATA_PLANE_HOST / --data-plane-host must be an IP address, not "${host}"`);
  const consumerHost = get('data-plane-consumer-host') ?? host;
  if (isIP(consumerHost) === 0)
    throw new ConfigurationError(
      `NS_DATA_PLANE_CONSUMER_HOST / --data-plane-consumer-host must be an IP address, not "${consumerHost}"`,
    );
  const peers = parsePeers(get('data-plane-peers') ?? '');
  if ('error' in peers) throw new ConfigurationError(`NS_DATA_PLANE_PEERS / --data-plane-peers: ${peers.error}`);
  for (const [id, a] of peers)
    if (isIP(a) === 0)
      throw new ConfigurationError(`NS_DATA_PLANE_PEERS / --data-plane-peers: ${id}=${a} is not an IP address`);
  const n6 = get('data-plane-n6');
  if (n6 !== 'tls' && n6 !== 'address')
    throw new ConfigurationError(`NS_DATA_PLANE_N6 / --data-plane-n6 must be tls or address, not "${n6}"`);
  return { host, consumerHost, peers, n6Mode: n6 };
};

/** The DNS listener's settings, checked: it binds loopback only and a port is 0..65535 (0 = ephemeral). */
const dnsConfig = (
  dnsHost: string,
  port: string | undefined,
  dnsZone: string,
): Pick<NsConfig, 'dnsHost' | 'dnsPort' | 'dnsZone'> => {
  if (dnsHost !== '127.0.0.1' && dnsHost !== '::1')
    throw new ConfigurationError(
      'NS_DNS_HOST / --dns-host must be 127.0.0.1 or ::1 (the DNS listener is loopback only)',
    );
  const dnsPort = port === undefined || port === '' ? null : Number(port);
  if (dnsPort !== null && !(Number.isInteger(dnsPort) && dnsPort >= 0 && dnsPort <= 65_535))
    throw new ConfigurationError('NS_DNS_PORT / --dns-port must be 0..65535');
  if (!/^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(dnsZone))
    throw new ConfigurationError('NS_DNS_ZONE / --dns-zone must be a lowercase DNS name');
  return { dnsHost, dnsPort, dnsZone };
};

/** Read the declarations file completely; any failure is a failed read (never "no declarations"). */
export const readDeclarations = (file: string | null): Either.Either<readonly DeclarationWire[], string> => {
  if (file === null) return Either.right([]);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    return Either.left(`cannot read ${file}: ${String(e)}`);
  }
  if (!Array.isArray(raw)) return Either.left(`${file} must hold a JSON list`);
  const out = [];
  for (const d of raw) {
    const r = declarationFromLocal(d as Record<string, unknown>);
    if (Either.isLeft(r)) return Either.left(`${r.left.code}: ${r.left.detail ?? ''}`);
    out.push(r.right);
  }
  const sorted = sortDeclarations(out);
  if (Either.isLeft(sorted)) return Either.left(sorted.left.code);
  return Either.right(sorted.right.map(declarationToWire));
};

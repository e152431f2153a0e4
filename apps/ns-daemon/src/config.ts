// ns-daemon configuration: flags (--name=value) override environment variables (NS_NAME), which override defaults.
import { readFileSync } from 'node:fs';
import { Either } from 'effect';
import {
  type DeclarationWire,
  declarationFromLocal,
  declarationToWire,
  sortDeclarations,
} from '@homelab/service-control';

export interface NsConfig {
  /** Base URL of NSD, e.g. http://127.0.0.1:7400 */
  readonly nsdUrl: string;
  /** The trusted NSD response key (raw Ed25519 public key, 64 hex). */
  readonly nsdKey: string;
  readonly network: string;
  readonly keyFile: string;
  readonly stateFile: string;
  /** JSON file: a list of local declarations ({key, protocols, backend_host, backend_port, ...}). */
  readonly declarationsFile: string | null;
  readonly host: string;
  readonly port: number;
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
}

const flag = (argv: readonly string[], name: string): string | undefined =>
  argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

export const loadConfig = (env: NodeJS.ProcessEnv, argv: readonly string[]): NsConfig => {
  const get = (name: string, fallback?: string): string | undefined =>
    flag(argv, name) ?? env[`NS_${name.toUpperCase().replaceAll('-', '_')}`] ?? fallback;
  const nsdKey = get('nsd-key', '') as string;
  const network = get('network', '') as string;
  if (!/^[0-9a-f]{64}$/.test(nsdKey))
    throw new Error('NS_NSD_KEY / --nsd-key must be the NSD public key as 64 lowercase hex');
  if (!/^[0-9a-f]{32}$/.test(network)) throw new Error('NS_NETWORK / --network must be 32 lowercase hex');
  return {
    nsdUrl: get('nsd-url', 'http://127.0.0.1:7400') as string,
    nsdKey,
    network,
    keyFile: get('key-file', 'ns-key.pem') as string,
    stateFile: get('state-file', 'ns-state.db') as string,
    declarationsFile: get('declarations') ?? null,
    host: get('host', '127.0.0.1') as string,
    port: Number(get('port', '7410')),
    fault: get('fault') ?? null,
    debugSimulatedFlows: get('debug-simulated-flows', '0') === '1',
    ...dnsConfig(get('dns-host', '127.0.0.1') as string, get('dns-port'), get('dns-zone', 'ns.internal') as string),
    debugDeferProposalsMs:
      get('debug-defer-proposals-ms') === undefined ? null : Number(get('debug-defer-proposals-ms')),
  };
};

/** The DNS listener's settings, checked: it binds loopback only and a port is 0..65535 (0 = ephemeral). */
const dnsConfig = (
  dnsHost: string,
  port: string | undefined,
  dnsZone: string,
): Pick<NsConfig, 'dnsHost' | 'dnsPort' | 'dnsZone'> => {
  if (dnsHost !== '127.0.0.1' && dnsHost !== '::1')
    throw new Error('NS_DNS_HOST / --dns-host must be 127.0.0.1 or ::1 (the DNS listener is loopback only)');
  const dnsPort = port === undefined || port === '' ? null : Number(port);
  if (dnsPort !== null && !(Number.isInteger(dnsPort) && dnsPort >= 0 && dnsPort <= 65_535))
    throw new Error('NS_DNS_PORT / --dns-port must be 0..65535');
  if (!/^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(dnsZone))
    throw new Error('NS_DNS_ZONE / --dns-zone must be a lowercase DNS name');
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

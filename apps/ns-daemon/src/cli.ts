// `ns service retry-port <ServiceRef> --request-id <UUID>` (spec §3.3): the local owner's explicit retry. The command
// talks to the RUNNING daemon over its loopback listener (`POST /v1/owner/retry-port`), which relays
// `service.retry-port` to NSD with its current runtime/epoch (decision 0128). The ServiceRef is three canonical
// lowercase UUIDs `nsd/network/service`; the request id is a UUID the owner reuses after an uncertain result.
import { parseId16 } from '@homelab/service-control';

export interface RetryPortArgs {
  readonly serviceRef: {
    readonly nsd_id: Uint8Array;
    readonly network_id: Uint8Array;
    readonly service_id: Uint8Array;
  };
  readonly requestId: Uint8Array;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Parse `nsd/network/service` (three canonical lowercase UUIDs; the Network/Service parts may be ULID text). */
export const parseServiceRef = (text: string): RetryPortArgs['serviceRef'] | null => {
  const parts = text.split('/');
  if (parts.length !== 3 || !UUID.test(parts[0] as string)) return null;
  const [n, w, s] = parts.map(parseId16);
  return n && w && s ? { nsd_id: n, network_id: w, service_id: s } : null;
};

/** `service retry-port <ServiceRef> --request-id <UUID>` → the arguments, or a usage error. */
export const parseRetryPort = (argv: readonly string[]): RetryPortArgs | string => {
  if (argv[0] !== 'service' || argv[1] !== 'retry-port')
    return 'usage: ns service retry-port <nsd/network/service> --request-id <UUID>';
  const ref = argv[2] === undefined ? null : parseServiceRef(argv[2]);
  if (ref === null) return 'the ServiceRef must be three canonical UUIDs: nsd/network/service';
  const i = argv.indexOf('--request-id');
  const inline = argv.find((a) => a.startsWith('--request-id='))?.slice('--request-id='.length);
  const rid = inline ?? (i >= 0 ? argv[i + 1] : undefined);
  if (rid === undefined || !UUID.test(rid))
    return '--request-id must be a canonical lowercase UUID (reuse it after an uncertain result)';
  return { serviceRef: ref, requestId: parseId16(rid) as Uint8Array };
};

export const isServiceCommand = (argv: readonly string[]): boolean => argv[0] === 'service';

/** Run the command against the daemon's listener (`NS_HOST`/`NS_PORT` or `--host=`/`--port=`); returns the exit code. */
export const runServiceCommand = async (argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> => {
  const args = parseRetryPort(argv.filter((a) => !a.startsWith('--host=') && !a.startsWith('--port=')));
  if (typeof args === 'string') {
    process.stderr.write(`${args}\n`);
    return 2;
  }
  const flag = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const host = flag('host') ?? env['NS_HOST'] ?? '127.0.0.1';
  const port = flag('port') ?? env['NS_PORT'] ?? '7410';
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
  process.stdout.write(`retry-port: asking the daemon at ${host}:${port}\n`);
  const res = await fetch(`http://${host}:${port}/v1/owner/retry-port`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      nsd_id: hex(args.serviceRef.nsd_id),
      network_id: hex(args.serviceRef.network_id),
      service_id: hex(args.serviceRef.service_id),
      request_id: hex(args.requestId),
    }),
  }).catch((e: unknown) => new Error(String(e)));
  if (res instanceof Error) {
    process.stderr.write(
      `retry-port: the daemon is not reachable (${res.message}); the result is uncertain — reuse the same --request-id\n`,
    );
    return 1;
  }
  const text = await res.text();
  process.stdout.write(`${text}\n`);
  return res.ok ? 0 : 1;
};

// Service declarations (spec §2.5, seed §2.1) and their semantic validation (M6-22): unsupported behaviour is refused
// with `unsupported-field`, never dropped; HTTP/HTTPS declarations keep only their TCP backend semantics.
import { Either } from 'effect';
import type { Bytes } from './bytes.js';
import { type ServiceControlError, scError } from './errors.js';

export type Protocol = 'tcp' | 'udp';
export type PortMode = 'fixed' | 'auto';
export type BackendHost = { readonly ipv4: Bytes } | { readonly ipv6: Bytes } | { readonly dns: string };

export interface Declaration {
  readonly declarationKey: string;
  readonly displayName: string | null;
  readonly description: string | null;
  readonly enabled: boolean;
  /** Ordered set: canonical order is "tcp" < "udp" (bytewise on the encoding), non-empty [D]. */
  readonly protocols: readonly Protocol[];
  readonly backendHost: BackendHost;
  readonly backendPort: bigint;
  readonly portMode: PortMode;
  readonly requestedPort: bigint | null;
}

export const MAX_TEXT_BYTES = 4096;
const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

/** Canonical DNS host text: lowercase, no trailing dot, labels 1..63 of [a-z0-9-] without edge hyphens, ≤ 253. */
export const isCanonicalDnsHost = (s: string): boolean =>
  s.length >= 1 && s.length <= 253 && s.split('.').every((l) => /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(l));

const checkPort = (p: bigint, what: string): Either.Either<void, ServiceControlError> =>
  p >= 1n && p <= 65535n ? Either.void : Either.left(scError('invalid-encoding', `${what} outside 1..65535`));

/** Semantic checks of a decoded declaration (the codec has already checked the closed shape and types). */
export const validateDeclaration = (d: Declaration): Either.Either<Declaration, ServiceControlError> => {
  if (d.declarationKey.length === 0) return Either.left(scError('invalid-encoding', 'empty declaration_key'));
  for (const t of [d.declarationKey, d.displayName, d.description])
    if (t !== null && utf8Length(t) > MAX_TEXT_BYTES) return Either.left(scError('invalid-encoding', 'text too long'));
  if (d.protocols.length === 0) return Either.left(scError('invalid-encoding', 'protocols must not be empty'));
  const sorted = [...new Set(d.protocols)].sort();
  if (sorted.length !== d.protocols.length || sorted.some((p, i) => p !== d.protocols[i]))
    return Either.left(scError('invalid-encoding', 'protocols is not a sorted set'));
  const host = d.backendHost;
  if ('ipv4' in host && host.ipv4.length !== 4) return Either.left(scError('invalid-encoding', 'ipv4 is 4 bytes'));
  if ('ipv6' in host && host.ipv6.length !== 16) return Either.left(scError('invalid-encoding', 'ipv6 is 16 bytes'));
  if ('dns' in host && !isCanonicalDnsHost(host.dns))
    return Either.left(scError('invalid-encoding', 'backend dns host is not canonical'));
  const port = checkPort(d.backendPort, 'backend_port');
  if (Either.isLeft(port)) return Either.left(port.left);
  if (d.portMode === 'fixed') {
    if (d.requestedPort === null || d.requestedPort === 0n)
      return Either.left(scError('invalid-encoding', 'fixed mode needs a non-zero requested_port'));
    const rp = checkPort(d.requestedPort, 'requested_port');
    if (Either.isLeft(rp)) return Either.left(rp.left);
  } else if (d.requestedPort !== null)
    return Either.left(scError('invalid-encoding', 'auto mode needs requested_port = null'));
  return Either.right(d);
};

/** Keys of A's local declaration source that carry behaviour this contract cannot honour (seed §2.1). */
const UNSUPPORTED_BEHAVIOUR = [
  'host',
  'host_header',
  'sni',
  'server_name',
  'public_domain',
  'domain',
  'gateway',
  'tunnel',
  'role',
  'tls',
] as const;
const KNOWN_LOCAL_KEYS = [
  'key',
  'display_name',
  'description',
  'enabled',
  'protocols',
  'backend_host',
  'backend_port',
  'port_mode',
  'requested_port',
] as const;

const parseIpv4 = (s: string): Bytes | null => {
  const parts = s.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255)) return null;
  return new Uint8Array(parts.map(Number));
};

const parseIpv6 = (s: string): Bytes | null => {
  if (!/^[0-9a-fA-F:.]+$/.test(s) || s.split('::').length > 2) return null;
  const expand = (part: string): number[] | null => {
    if (part === '') return [];
    const out: number[] = [];
    const groups = part.split(':');
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i] as string;
      if (i === groups.length - 1 && g.includes('.')) {
        const v4 = parseIpv4(g);
        if (v4 === null) return null;
        out.push(((v4[0] as number) << 8) | (v4[1] as number), ((v4[2] as number) << 8) | (v4[3] as number));
      } else if (/^[0-9a-fA-F]{1,4}$/.test(g)) out.push(parseInt(g, 16));
      else return null;
    }
    return out;
  };
  const [head, tail] = s.split('::') as [string, string | undefined];
  const h = expand(head);
  const t = tail === undefined ? [] : expand(tail);
  if (h === null || t === null) return null;
  const fill = 8 - h.length - t.length;
  if (tail === undefined ? fill !== 0 : fill < 1) return null;
  const groups = [...h, ...Array<number>(tail === undefined ? 0 : fill).fill(0), ...t];
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    bytes[i * 2] = g >> 8;
    bytes[i * 2 + 1] = g & 0xff;
  });
  return bytes;
};

/** Parse a host text of the local config into the typed wire form (IP literals become bytes). */
export const parseBackendHost = (s: string): Either.Either<BackendHost, ServiceControlError> => {
  const v4 = parseIpv4(s);
  if (v4 !== null) return Either.right({ ipv4: v4 });
  const literal = s.startsWith('[') && s.endsWith(']') ? s.slice(1, -1) : s;
  if (literal.includes(':')) {
    const v6 = parseIpv6(literal);
    return v6 === null ? Either.left(scError('invalid-encoding', 'bad IPv6 literal')) : Either.right({ ipv6: v6 });
  }
  const dns = s.toLowerCase().replace(/\.$/, '');
  return isCanonicalDnsHost(dns)
    ? Either.right({ dns })
    : Either.left(scError('invalid-encoding', 'backend host is neither an IP literal nor a DNS name'));
};

/**
 * Turn one entry of A's local declaration source (plain JSON-like data) into a wire Declaration (M6-22):
 * - keys requiring Host/SNI, a public domain or a gateway/tunnel role → `unsupported-field` (never dropped);
 * - any other unknown key → `unsupported-field`;
 * - protocol "http"/"https" → TCP backend semantics only.
 */
export const declarationFromLocal = (
  input: Readonly<Record<string, unknown>>,
): Either.Either<Declaration, ServiceControlError> => {
  for (const k of Object.keys(input)) {
    if ((UNSUPPORTED_BEHAVIOUR as readonly string[]).includes(k))
      return Either.left(scError('unsupported-field', `declaration requires unsupported behaviour: ${k}`));
    if (!(KNOWN_LOCAL_KEYS as readonly string[]).includes(k))
      return Either.left(scError('unsupported-field', `unknown declaration field: ${k}`));
  }
  const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  const key = str(input['key']);
  if (key === null) return Either.left(scError('invalid-encoding', 'key must be text'));
  const rawProtocols = input['protocols'];
  if (!Array.isArray(rawProtocols)) return Either.left(scError('invalid-encoding', 'protocols must be a list'));
  const protocols = new Set<Protocol>();
  for (const p of rawProtocols) {
    if (p === 'tcp' || p === 'http' || p === 'https') protocols.add('tcp');
    else if (p === 'udp') protocols.add('udp');
    else return Either.left(scError('unsupported-field', `unsupported protocol: ${String(p)}`));
  }
  const hostText = str(input['backend_host']);
  if (hostText === null) return Either.left(scError('invalid-encoding', 'backend_host must be text'));
  const host = parseBackendHost(hostText);
  if (Either.isLeft(host)) return Either.left(host.left);
  const int = (v: unknown): bigint | null =>
    typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : typeof v === 'bigint' ? v : null;
  const backendPort = int(input['backend_port']);
  if (backendPort === null) return Either.left(scError('invalid-encoding', 'backend_port must be an integer'));
  const mode = input['port_mode'] ?? 'auto';
  if (mode !== 'fixed' && mode !== 'auto') return Either.left(scError('invalid-encoding', 'port_mode is fixed|auto'));
  const rp = input['requested_port'];
  const requestedPort = rp === undefined || rp === null ? null : int(rp);
  if (rp !== undefined && rp !== null && requestedPort === null)
    return Either.left(scError('invalid-encoding', 'requested_port must be an integer'));
  const enabled = input['enabled'] ?? true;
  if (typeof enabled !== 'boolean') return Either.left(scError('invalid-encoding', 'enabled must be a boolean'));
  return validateDeclaration({
    declarationKey: key,
    displayName: str(input['display_name']),
    description: str(input['description']),
    enabled,
    protocols: [...protocols].sort(),
    backendHost: host.right,
    backendPort,
    portMode: mode,
    requestedPort,
  });
};

/** Declarations of a report are sorted by the UTF-8 bytes of the key, without duplicates. */
export const sortDeclarations = (
  ds: readonly Declaration[],
): Either.Either<readonly Declaration[], ServiceControlError> => {
  const sorted = [...ds].sort((a, b) => Buffer.compare(Buffer.from(a.declarationKey), Buffer.from(b.declarationKey)));
  for (let i = 1; i < sorted.length; i++)
    if ((sorted[i] as Declaration).declarationKey === (sorted[i - 1] as Declaration).declarationKey)
      return Either.left(scError('invalid-encoding', 'duplicate declaration_key'));
  return Either.right(sorted);
};

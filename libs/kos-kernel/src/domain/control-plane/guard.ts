// Pure rules that decide whether a request may reach the control plane at all (issue 17, first section; decision
// 0200): writes carry `Content-Type: application/json` (a browser cannot send that cross-site without a CORS
// preflight, which this API never grants); the `Host` header names this server (DNS rebinding); a present `Origin`
// is the API's own. No I/O: the accepted names and the port are parameters.

/** `application/json`, optionally with parameters (`; charset=utf-8`); case-insensitive. Nothing else. */
export const isJsonContentType = (value: string | undefined): boolean => {
  if (value === undefined) return false;
  const essence = (value.split(';')[0] ?? '').trim().toLowerCase();
  return essence === 'application/json';
};

/** Who this server is: the host names (lower case; IPv6 in brackets) and the port a request may address. */
export interface HostPolicy {
  readonly names: ReadonlyArray<string>;
  readonly port: number;
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'] as const;

export const isLoopbackAddress = (host: string): boolean => {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
};

const bracketed = (host: string): string => {
  const h = host.toLowerCase();
  return h.includes(':') && !h.startsWith('[') ? `[${h}]` : h;
};

/**
 * The names a request may use: the configured host and the bound address; when bound to loopback also the loopback
 * names (`localhost`, `127.0.0.1`, `[::1]`). A wildcard (`0.0.0.0`, `::`) is never a name a client may use.
 */
export const hostPolicyFor = (input: {
  readonly configuredHost: string;
  readonly boundAddress: string;
  readonly port: number;
}): HostPolicy => {
  const names = new Set<string>();
  for (const h of [input.configuredHost, input.boundAddress]) {
    const b = bracketed(h);
    if (b !== '0.0.0.0' && b !== '[::]' && b !== '') names.add(b);
  }
  if (isLoopbackAddress(input.boundAddress)) for (const n of LOOPBACK_NAMES) names.add(n);
  return { names: [...names], port: input.port };
};

/** `name[:port]` or `[v6][:port]` → lower-case name (IPv6 bracketed) and port (80 when absent: plain HTTP). */
export const parseHostHeader = (value: string): { readonly name: string; readonly port: number } | undefined => {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([0-9]{1,5}))?$/i.exec(value.trim());
  if (m === null) return undefined;
  const port = m[2] === undefined ? 80 : Number(m[2]);
  if (port > 65535) return undefined;
  return { name: (m[1] as string).toLowerCase(), port };
};

/** Why the `Host` header does not address this server (DNS rebinding), or undefined when it does. */
export const hostProblem = (host: string | undefined, policy: HostPolicy): string | undefined => {
  if (host === undefined || host.trim() === '') return 'the request names no Host';
  const parsed = parseHostHeader(host);
  if (parsed === undefined) return `the Host "${host}" is not a host name`;
  if (!policy.names.includes(parsed.name) || parsed.port !== policy.port)
    return `this server does not serve the Host "${host}" (it answers to ${policy.names.map((n) => `${n}:${policy.port}`).join(', ')})`;
  return undefined;
};

/** The origins of this API: `http://<name>:<port>` for each accepted name. */
export const ownOrigins = (policy: HostPolicy): ReadonlyArray<string> =>
  policy.names.map((n) => `http://${n}${policy.port === 80 ? '' : `:${policy.port}`}`);

/**
 * Why a browser request from another origin is refused, or undefined. A present `Origin` must be one of the API's
 * own (`null` — sandboxed frames, files — is not); `Sec-Fetch-Site: cross-site|same-site` is refused as well (a page on
 * another port of the same host is same-site but another origin).
 */
export const originProblem = (
  origin: string | undefined,
  secFetchSite: string | undefined,
  policy: HostPolicy,
): string | undefined => {
  if (origin !== undefined) {
    const own = ownOrigins(policy);
    let normalised: string | undefined;
    try {
      const u = new URL(origin);
      normalised = u.origin === 'null' ? undefined : u.origin;
    } catch {
      normalised = undefined;
    }
    if (normalised === undefined || !own.includes(normalised))
      return `requests from the origin "${origin}" are refused: this API serves only its own origin and grants no CORS`;
  }
  const site = secFetchSite?.trim().toLowerCase();
  if (site === 'cross-site' || site === 'same-site')
    return `a ${site} browser request is refused: this API serves only its own origin and grants no CORS`;
  return undefined;
};

// The address rule of the Instance endpoint's `hostaddr`: a single IPv4 or IPv6 address, the way the Kubernetes
// CEL function `isIP` accepts it (Go `netip.ParseAddr`, then no zone and no IPv4-mapped IPv6 form). Pure: no DNS,
// no sockets. `localhost`, `fe80::1%eth0`, `::ffff:192.0.2.1` and `192.0.2.010` are all rejected.

const V4_OCTET = /^(0|[1-9]\d{0,2})$/;

const parseV4 = (s: string): ReadonlyArray<number> | undefined => {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  const out: number[] = [];
  for (const p of parts) {
    if (!V4_OCTET.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out.push(n);
  }
  return out;
};

/** 8 hextets, or undefined. Accepts an embedded dotted IPv4 tail as Go's parser does. */
const parseV6 = (s: string): ReadonlyArray<number> | undefined => {
  if (s.length === 0 || s.includes('%')) return undefined;
  let tail: number[] = [];
  let body = s;
  const lastColon = s.lastIndexOf(':');
  if (lastColon >= 0 && s.slice(lastColon + 1).includes('.')) {
    const v4 = parseV4(s.slice(lastColon + 1));
    if (!v4) return undefined;
    const [a = 0, b = 0, c = 0, d = 0] = v4;
    tail = [(a << 8) | b, (c << 8) | d];
    body = s.slice(0, lastColon + 1);
    if (!body.endsWith('::')) body = body.slice(0, -1);
  }
  const want = 8 - tail.length;
  const hextet = /^[0-9a-fA-F]{1,4}$/;
  const parseGroup = (g: string): number[] | undefined => {
    if (g === '') return [];
    const items = g.split(':');
    const out: number[] = [];
    for (const it of items) {
      if (!hextet.test(it)) return undefined;
      out.push(parseInt(it, 16));
    }
    return out;
  };
  const double = body.indexOf('::');
  let groups: number[];
  if (double >= 0) {
    if (body.indexOf('::', double + 1) >= 0) return undefined;
    const head = parseGroup(body.slice(0, double));
    const rest = parseGroup(body.slice(double + 2));
    if (!head || !rest) return undefined;
    const missing = want - head.length - rest.length;
    if (missing < 1) return undefined;
    groups = [...head, ...new Array<number>(missing).fill(0), ...rest];
  } else {
    const all = parseGroup(body);
    if (!all || all.length !== want) return undefined;
    groups = all;
  }
  return [...groups, ...tail];
};

export type IpFamily = 4 | 6;

/** The family of a valid `hostaddr`, or undefined when Kubernetes' `isIP` would reject it. */
export const ipFamily = (value: string): IpFamily | undefined => {
  if (parseV4(value)) return 4;
  const v6 = parseV6(value);
  if (!v6) return undefined;
  const isV4Mapped = v6.slice(0, 5).every((h) => h === 0) && v6[5] === 0xffff;
  return isV4Mapped ? undefined : 6;
};

export const isSingleIpAddress = (value: string): boolean => ipFamily(value) !== undefined;

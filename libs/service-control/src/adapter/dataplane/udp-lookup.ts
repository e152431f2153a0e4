// The name lookup of a forwarder's listening UDP socket (decision 0490). node:dgram resolves the address of every
// unconnected `send` through its socket's lookup — by default `dns.lookup`, which answers an IP literal on the next
// tick: one `process.nextTick`, its closures and an async-id scope per datagram. A listening socket only ever sends to
// the address a datagram came from (an IP literal from `rinfo`), so this lookup answers an IP literal at once (the
// datagram goes out inside `send`) and hands anything else to `dns.lookup` unchanged. The address and its family are
// what `dns.lookup` answers for a literal too (it, too, ignores the requested family for a literal).
import { lookup as dnsLookup, type LookupOneOptions } from 'node:dns';
import { isIP } from 'node:net';

export const literalFirstLookup = (
  hostname: string,
  options: LookupOneOptions | number,
  callback: (err: NodeJS.ErrnoException | null, address: string, family: number) => void,
): void => {
  const family = isIP(hostname);
  if (family !== 0) return callback(null, hostname, family);
  dnsLookup(hostname, options as LookupOneOptions, callback);
};

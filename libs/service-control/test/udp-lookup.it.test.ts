// literalFirstLookup (decision 0490): the listening UDP socket's lookup answers an IP literal inside the call (the
// reply datagram leaves inside `send`, no tick later) and leaves names to dns.lookup.
import { createSocket } from 'node:dgram';
import { describe, expect, it } from 'vitest';
import { literalFirstLookup } from '../src/adapter/dataplane/udp-lookup.js';

const ask = (host: string, family: number) => {
  const got: { err: unknown; address: string; family: number }[] = [];
  const done = new Promise<void>((ok) =>
    literalFirstLookup(host, family, (err, address, fam) => (got.push({ err, address, family: fam }), ok())),
  );
  return { sync: [...got], got, done };
};

describe('literalFirstLookup (decision 0490)', () => {
  it('0490 an IP literal is answered within the call, with its own family', () => {
    expect(ask('169.254.30.2', 4).sync).toEqual([{ err: null, address: '169.254.30.2', family: 4 }]);
    expect(ask('fd00::1', 4).sync).toEqual([{ err: null, address: 'fd00::1', family: 6 }]);
  });

  it('0490 a name is resolved by dns.lookup, after the call', async () => {
    const a = ask('localhost', 4);
    expect(a.sync).toEqual([]);
    await a.done;
    expect(a.got).toEqual([{ err: null, address: '127.0.0.1', family: 4 }]);
  });

  it('0490 a dgram socket with it binds and echoes to rinfo literals', async () => {
    const server = createSocket({ type: 'udp4', lookup: literalFirstLookup });
    server.on('message', (m, r) => server.send(m, r.port, r.address));
    await new Promise<void>((ok) => server.bind({ address: '127.0.0.1', port: 0 }, ok));
    const client = createSocket('udp4');
    const reply = new Promise<string>((ok) => client.once('message', (m) => ok(m.toString())));
    client.send('nonce-0490', server.address().port, '127.0.0.1');
    expect(await reply).toBe('nonce-0490');
    client.close();
    server.close();
  });
});

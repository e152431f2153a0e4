// Decision 0411's 256 KiB high-water mark, observed on the real sockets of a live flow (decision 0462): a consumer
// data plane and a publisher data plane joined by N6 on loopback (the component rig of n6-dataplane.it), one TCP flow
// through both, and the readable/writable high-water marks Node reports for every socket of that flow at both ends —
// the plain accepted client and the N6 TLS client stream over its raw socket (consumer), the N6 TLS server stream
// over its accepted raw socket and the plain backend dial (publisher). No timing: the sizes are what the sockets hold.
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { FLOW_HIGH_WATER_MARK, type SocketForwarder } from '../src/adapter/dataplane/socket-forwarder.js';
import { n6Consumer, n6Node, n6Publisher, useN6Cleanup } from './n6-fixtures.js';
import { HOST, backend, eventually, nonce } from './socket-fixtures.js';

const cleanup = useN6Cleanup();
const rigOf = { n: 12, protocols: ['tcp'] as const, cleanup };
const KiB256 = 256 * 1024;

/** The flow's one live TCP flow on `fw` and the high-water marks of its sockets. */
const buffersOfOnlyFlow = (fw: SocketForwarder) => {
  const ids = fw.liveFlowIds();
  expect(ids).toHaveLength(1);
  return fw.flowStreamBuffers(ids[0] as number);
};

describe('0411 flow sockets and N6 streams hold 256 KiB (component test, loopback)', () => {
  it('0411 0462 every socket of a TCP flow over N6 reports a 256 KiB readable and writable high-water mark at both ends', async () => {
    const be = await backend();
    cleanup.push(async () => {
      for (const c of be.conns) c.destroy();
      be.udp.close();
      await new Promise<void>((ok) => be.tcp.close(() => ok()));
    });
    const pubNode = n6Node();
    const conNode = n6Node();
    const pub = await n6Publisher(rigOf, pubNode, [conNode], { host: HOST, port: be.port });
    const con = await n6Consumer(rigOf, pubNode, conNode, pub.port);

    const client = connect({ host: HOST, port: con.port });
    cleanup.push(() => void client.destroy());
    client.on('error', () => undefined);
    const got: string[] = [];
    client.on('data', (d) => got.push(d.toString()));
    const n = nonce();
    client.write(n);
    await eventually(() => got.join('') === n, 'the nonce echoed through both data planes');

    const both = { readable: KiB256, writable: KiB256 };
    // consumer: the local client (plain: stream and socket are one), the N6 TLS stream it dialled and the TCP under it
    expect(buffersOfOnlyFlow(con.fw)).toEqual({ client: both, clientRaw: both, upstream: both, upstreamRaw: both });
    // publisher: the N6 TLS stream it accepted and the TCP under it, the backend connection (plain)
    expect(buffersOfOnlyFlow(pub.fw)).toEqual({ client: both, clientRaw: both, upstream: both, upstreamRaw: both });
    // the client's own socket is Node's default: the sizes above are the forwarder's, not the machine's
    expect(client.writableHighWaterMark).toBeLessThan(KiB256);
    expect(FLOW_HIGH_WATER_MARK).toBe(KiB256);
  });
});

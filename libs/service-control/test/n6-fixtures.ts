// The two-data-plane rig of the N6 component tests (n6-dataplane.it, n6-udp.it): Ed25519 nodes with N6
// credentials, a publisher data plane (an N6 endpoint whose permit names its backend and whose source Grants name the
// granted nodes) and a consumer data plane (its own engine and consumer permit, dialling the publisher over N6 and
// pinning its key), and the cleanup list both tests share — a cleanup that does not finish is a socket left open.
import { type KeyObject, generateKeyPairSync } from 'node:crypto';
import { afterEach, expect } from 'vitest';
import { type N6Credentials, n6Credentials } from '../src/adapter/dataplane/n6-transport.js';
import { type ForwarderOptions, SocketForwarder } from '../src/adapter/dataplane/socket-forwarder.js';
import { type Bytes, toHex } from '../src/domain/bytes.js';
import type { FlowProtocol } from '../src/permit/types.js';
import { consKey, grant, owner, pubKey, rig, setSources } from './permit-fixtures.js';
import { HOST } from './socket-fixtures.js';

export interface N6Node {
  readonly identity: Bytes;
  readonly creds: N6Credentials;
}

const rawKey = (k: KeyObject): Bytes =>
  new Uint8Array(Buffer.from(k.export({ format: 'jwk' }).x as string, 'base64url'));

/** A node: a fresh Ed25519 identity and the N6 certificate made from it. */
export const n6Node = (): N6Node => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const identity = rawKey(privateKey);
  return { identity, creds: n6Credentials(privateKey, toHex(identity)) };
};

/**
 * The test file's cleanups, run in reverse after each test. Each gets 5 s: one that does not finish (a socket left
 * open holds its server's close forever) fails the test instead of hanging the run.
 */
export const useN6Cleanup = (): (() => Promise<void> | void)[] => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    const leaks: number[] = [];
    for (const [i, c] of cleanup.splice(0).reverse().entries()) {
      const done = await Promise.race([
        Promise.resolve(c()).then(() => true),
        new Promise<false>((r) => setTimeout(() => r(false), 5_000).unref()),
      ]);
      if (!done) leaks.push(i);
    }
    expect(leaks, 'cleanups that did not finish (sockets left open)').toEqual([]);
  });
  return cleanup;
};

export interface N6RigOptions {
  /** The service number of the permit fixtures (`pubKey(n)`, `consKey(n, …)`). */
  readonly n: number;
  readonly protocols: readonly FlowProtocol[];
  readonly cleanup: (() => Promise<void> | void)[];
  /** Test-only forwarder options (e.g. the N6 UDP counter start, decision 0273). */
  readonly forwarder?: ForwarderOptions;
}

/** The publisher data plane: an N6 endpoint on `me`'s credentials, its permit's backend `backend`, sources `granted`. */
export const n6Publisher = async (
  o: N6RigOptions,
  me: N6Node,
  granted: readonly N6Node[],
  backend: { readonly host: string; readonly port: number },
) => {
  const r = rig();
  const key = pubKey(o.n);
  r.engine.setEndpointOwners('n6-pub', [owner(key)]);
  setSources(
    r,
    o.n,
    granted.map((g) => g.identity),
  );
  expect(grant(r, key, 30_000, { backend }).outcome).toBe('accepted');
  const fw = new SocketForwarder(r.engine, o.forwarder);
  const port = await fw.listen({
    endpoint: 'n6-pub',
    host: HOST,
    port: 0,
    protocols: o.protocols,
    n6Server: me.creds,
    // the flow's peer is exactly the key the handshake proved; the permit decides whether it may open a flow
    peerOf: (_a, _p, _proto, authenticated) => authenticated,
    upstream: (f) => f.backend,
  });
  o.cleanup.push(() => fw.close());
  return { fw, port, r, key };
};

/** The consumer data plane: its own engine and consumer permit for `pubNode`'s service, upstream N6 at `to`. */
export const n6Consumer = async (o: N6RigOptions, pubNode: N6Node, conNode: N6Node, to: number) => {
  const r = rig();
  const key = consKey(o.n, conNode.identity);
  r.engine.setEndpointOwners('n6-vip', [{ key, publisherIdentity: pubNode.identity }]);
  expect(grant(r, key).outcome).toBe('accepted');
  const fw = new SocketForwarder(r.engine, o.forwarder);
  const port = await fw.listen({
    endpoint: 'n6-vip',
    host: HOST,
    port: 0,
    protocols: o.protocols,
    peerOf: () => pubNode.identity,
    upstream: () => ({ host: HOST, port: to }),
    n6Client: { credentials: conNode.creds, expect: () => pubNode.identity },
  });
  o.cleanup.push(() => fw.close());
  return { fw, port, r, key };
};

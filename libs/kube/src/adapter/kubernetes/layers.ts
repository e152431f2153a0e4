// Layers that provide KubeClient: from a kubeconfig file, from the in-cluster service account, or from explicit
// server/token/CA values (the test bed, or any bearer-token setup).
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { Effect, Layer, Stream } from 'effect';
import { KubeClient } from '../../application/kube-client.js';
import { InvalidRequest, type Unavailable } from '../../domain/errors.js';
import { makeClient, type ClientOptions } from './client.js';
import { makeTransport, type Transport } from './transport.js';

export interface LayerOptions extends ClientOptions {
  /** Keep-alive sockets per client (default 32). */
  readonly maxSockets?: number;
  /** User-Agent; the API server also uses it as the default field manager of writes without one. */
  readonly userAgent?: string;
  /**
   * Called with every answer exactly as the server sent it (the body of each request, each line of each watch),
   * before any decoding: for audits and for tests that must prove what the server did or did not send (e.g. that a
   * metadata-only watch never carried a Secret's `data`). Keep it cheap; it must not throw.
   */
  readonly onAnswer?: (answer: ReceivedAnswer) => void;
}

export interface ReceivedAnswer {
  readonly method: string;
  /** Path and query as requested. */
  readonly path: string;
  readonly accept: string | undefined;
  /** 'body' for a whole answer (with its status), 'line' for one watch event (JSON text). */
  readonly kind: 'body' | 'line';
  readonly status?: number;
  readonly text: string;
}

const observed = (t: Transport, onAnswer: (a: ReceivedAnswer) => void): Transport => ({
  ...t,
  request: (req) =>
    Effect.tap(t.request(req), (a) =>
      Effect.sync(() =>
        onAnswer({
          method: req.method,
          path: req.path,
          accept: req.accept,
          kind: 'body',
          status: a.status,
          text: a.body,
        }),
      ),
    ),
  lines: (req) =>
    Stream.tap(t.lines(req), (v) =>
      Effect.sync(() =>
        onAnswer({ method: req.method, path: req.path, accept: req.accept, kind: 'line', text: JSON.stringify(v) }),
      ),
    ),
});

const configError = (message: string) => new InvalidRequest({ message, target: { verb: 'configure', path: '' } });

/** KubeClient from an already loaded KubeConfig (its current context). */
export const layerFromKubeConfig = (
  load: () => KubeConfig,
  options: LayerOptions = {},
): Layer.Layer<KubeClient, InvalidRequest | Unavailable> =>
  Layer.scoped(
    KubeClient,
    Effect.gen(function* () {
      const kc = yield* Effect.try({
        try: load,
        catch: (e) => configError(`loading kube config: ${(e as Error).message}`),
      });
      const transport = yield* Effect.acquireRelease(makeTransport(kc, options), (t) => t.close);
      return yield* makeClient(options.onAnswer ? observed(transport, options.onAnswer) : transport, options);
    }),
  );

/** From a kubeconfig file (optionally a named context). */
export const layerFromKubeconfigFile = (
  file: string,
  options: LayerOptions & { readonly context?: string } = {},
): Layer.Layer<KubeClient, InvalidRequest | Unavailable> =>
  layerFromKubeConfig(() => {
    const kc = new KubeConfig();
    kc.loadFromFile(file);
    if (options.context) kc.setCurrentContext(options.context);
    return kc;
  }, options);

/**
 * From the pod's service account: KUBERNETES_SERVICE_HOST/PORT, the CA and the (rotating) token under
 * /var/run/secrets/kubernetes.io/serviceaccount. `pathPrefix` relocates that directory (tests).
 */
export const layerInCluster = (
  options: LayerOptions & { readonly pathPrefix?: string } = {},
): Layer.Layer<KubeClient, InvalidRequest | Unavailable> =>
  layerFromKubeConfig(() => {
    if (!process.env['KUBERNETES_SERVICE_HOST'] || !process.env['KUBERNETES_SERVICE_PORT'])
      throw new Error('not in a cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT are unset');
    const kc = new KubeConfig();
    kc.loadFromCluster(options.pathPrefix);
    return kc;
  }, options);

export interface TokenEndpoint {
  /** https://host:port */
  readonly server: string;
  readonly token: string;
  /** PEM of the CA that signed the server certificate. */
  readonly caCert: string;
}

/** From explicit values (the test bed's `kube` block has exactly these fields). */
export const layerFromToken = (
  endpoint: TokenEndpoint,
  options: LayerOptions = {},
): Layer.Layer<KubeClient, InvalidRequest | Unavailable> =>
  layerFromKubeConfig(() => {
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser(
      {
        name: 'cluster',
        server: endpoint.server,
        caData: Buffer.from(endpoint.caCert).toString('base64'),
        skipTLSVerify: false,
      },
      { name: 'user', token: endpoint.token },
    );
    return kc;
  }, options);

/**
 * From a running test bed's state file (`.testbed/state.json`, or $HOMELAB_TESTBED_STATE): reads its `kube`
 * block. Only the file format is shared with tools/testbed; this library does not import it.
 */
export const layerFromTestbedState = (
  file: string | undefined = process.env['HOMELAB_TESTBED_STATE'],
  options: LayerOptions = {},
): Layer.Layer<KubeClient, InvalidRequest | Unavailable> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      if (!file) return yield* configError('no test bed state file: pass a path or set HOMELAB_TESTBED_STATE');
      const state = yield* Effect.try({
        try: () => JSON.parse(readFileSync(file, 'utf8')) as { kube?: Partial<TokenEndpoint> },
        catch: (e) => configError(`reading test bed state ${file}: ${(e as Error).message}`),
      });
      const kube = state.kube;
      if (!kube?.server || !kube.token || !kube.caCert)
        return yield* configError(`test bed state ${file} has no kube server/token/caCert`);
      return layerFromToken({ server: kube.server, token: kube.token, caCert: kube.caCert }, options);
    }),
  );

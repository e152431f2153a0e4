// `npm run bench -w @homelab/controller`: listing 5,000 Applications page by page through the control plane against
// listing them directly from the API server with the same KubeClient, in the same run (goal ≤ 1.5×), and
// single-object GET latency p50/p99 through the API against a direct GET. Needs the test bed (`npm run testbed -- up`).
import { readFileSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { join } from 'node:path';
import { Effect, ManagedRuntime } from 'effect';
import { KubeClient, layerFromToken } from '@homelab/kube';
import { kosCrds } from '@homelab/kos-kernel';
import { parseConfig, startController } from '../src/index.js';

const N = Number(process.env['BENCH_OBJECTS'] ?? 5000);
const PAGE = Number(process.env['BENCH_PAGE'] ?? 500);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const GETS = Number(process.env['BENCH_GETS'] ?? 500);

const state = JSON.parse(
  readFileSync(
    process.env['HOMELAB_TESTBED_STATE'] ?? join(import.meta.dirname, '../../../.testbed/state.json'),
    'utf8',
  ),
) as {
  kube: { server: string; token: string; caCert: string };
};
const kubeLayer = layerFromToken(state.kube, { maxSockets: 64 });
const rt = ManagedRuntime.make(kubeLayer);
const kube = <A>(f: (k: KubeClient['Type']) => Effect.Effect<A, unknown>) =>
  rt.runPromise(Effect.flatMap(KubeClient, f));

// node:http with keep-alive for the control-plane side, like the KubeClient's own transport on the direct side
// (undici's fetch alone costs more than the control plane's work for 300 kB pages).
const agent = new Agent({ keepAlive: true, maxSockets: 8 });
const getText = (url: string): Promise<string> =>
  new Promise((resolve, reject) => {
    get(url, { agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    }).on('error', reject);
  });

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))] as number;

const main = async () => {
  const ns = `bench-${Date.now().toString(36)}`;
  console.log(`bench: ${N} Applications in namespace ${ns}, pages of ${PAGE}, ${ROUNDS} rounds`);
  for (const crd of kosCrds()) await kube((k) => k.apply(crd as never, { fieldManager: 'kos-bench', force: true }));
  await kube((k) => k.discovery.invalidate);
  await kube((k) => k.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }));
  const t0 = performance.now();
  await kube((k) =>
    Effect.forEach(
      Array.from({ length: N }, (_, i) => i),
      (i) =>
        k.create({
          apiVersion: 'kos.tsic.top/v1beta1',
          kind: 'Application',
          metadata: { name: `app-${i}`, namespace: ns },
          spec: { replicas: 1, owner: 'bench', config: { index: i } },
        }),
      { concurrency: 32, discard: true },
    ),
  );
  console.log(`created ${N} objects in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const cp = await startController(
    { ...parseConfig(['--port', '0'], {}), discoveryIntervalMs: 3_600_000 },
    { kube: kubeLayer, log: () => undefined },
  );
  try {
    const direct = async () => {
      let count = 0;
      let token: string | undefined;
      do {
        const page = await kube((k) =>
          k.list(
            { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns },
            { limit: PAGE, ...(token ? { continue: token } : {}) },
          ),
        );
        count += page.items.length;
        token = page.metadata.continue || undefined;
      } while (token !== undefined);
      return count;
    };
    const viaApi = async () => {
      let count = 0;
      let token: string | undefined;
      do {
        const body = JSON.parse(
          await getText(
            `${cp.url}/api/v1/resources/Application?namespace=${ns}&limit=${PAGE}${token ? `&continue=${encodeURIComponent(token)}` : ''}`,
          ),
        ) as { items: unknown[]; continue?: string };
        count += body.items.length;
        token = body.continue;
      } while (token !== undefined);
      return count;
    };
    await direct();
    await viaApi(); // warm both paths
    const d: number[] = [];
    const a: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      let s = performance.now();
      if ((await direct()) !== N) throw new Error('direct listing incomplete');
      d.push(performance.now() - s);
      s = performance.now();
      if ((await viaApi()) !== N) throw new Error('control-plane listing incomplete');
      a.push(performance.now() - s);
    }
    console.log(
      `list ${N} (pages of ${PAGE}): direct median ${median(d).toFixed(0)} ms, control plane median ${median(a).toFixed(0)} ms, ratio ${(median(a) / median(d)).toFixed(2)}x (goal <= 1.5x)`,
    );

    const gd: number[] = [];
    const ga: number[] = [];
    for (let i = 0; i < GETS; i++) {
      const name = `app-${(i * 7919) % N}`;
      let s = performance.now();
      await kube((k) => k.get({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns, name }));
      gd.push(performance.now() - s);
      s = performance.now();
      JSON.parse(await getText(`${cp.url}/api/v1/resources/Application/${name}?namespace=${ns}`));
      ga.push(performance.now() - s);
    }
    console.log(
      `GET one object (${GETS}x): direct p50 ${pct(gd, 50).toFixed(2)} ms p99 ${pct(gd, 99).toFixed(2)} ms; control plane p50 ${pct(ga, 50).toFixed(2)} ms p99 ${pct(ga, 99).toFixed(2)} ms; p50 ratio ${(pct(ga, 50) / pct(gd, 50)).toFixed(2)}x`,
    );
  } finally {
    agent.destroy();
    await cp.close();
    await kube((k) =>
      k
        .listAll({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns }, { limit: 500 })
        .pipe(
          Effect.flatMap((l) =>
            Effect.forEach(
              l.items,
              (o) => k.delete({ apiVersion: o.apiVersion, kind: o.kind, namespace: ns, name: o.metadata.name ?? '' }),
              { concurrency: 32, discard: true },
            ),
          ),
        ),
    );
    await kube((k) => k.delete({ apiVersion: 'v1', kind: 'Namespace', name: ns }));
    await rt.dispose();
  }
};

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

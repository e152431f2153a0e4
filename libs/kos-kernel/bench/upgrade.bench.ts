// kos-kernel upgrade preflight bench (issue 22 "Performance"; needs the test bed: HOMELAB_TESTBED_STATE or
// .testbed/state.json). BENCH_UPGRADE_APPS (10) apps of a definition rendering 50 ConfigMaps are installed, then
// pointed at a second definition that changes every object. Measured in the same run, one app after the other:
//   KOS  — the reconciler round that runs the preflight (Application read, records listed, target definition read,
//          render, config/render diff against the stored baseline, volume facts, `status.upgrade` written);
//   peer — one server-side dry-run apply (`dryRun=All`) of the same 50 target objects, one request per object, over
//          a keep-alive HTTPS agent.
// Goal: KOS ≤ 2× the peer. Prints both totals and the ratio.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { join } from 'node:path';
import { Effect, Either, Layer, ManagedRuntime } from 'effect';
import { KubeClient, type KubeClientService, type KubeObject, layerFromToken } from '@homelab/kube';
import { AppLifecycleConfig, CapabilitySource, kosCrds, reconcileApplication, render } from '../src/index.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);
const printError = (...parts: ReadonlyArray<unknown>): void =>
  void process.stderr.write(
    `${parts.map((p) => (p instanceof Error ? (p.stack ?? p.message) : String(p))).join(' ')}\n`,
  );

const N = Number(process.env['BENCH_UPGRADE_APPS'] ?? 10);
const OBJECTS = 50;
const API = 'kos.tsic.top/v1beta1';
const state = JSON.parse(
  readFileSync(
    process.env['HOMELAB_TESTBED_STATE'] ?? join(import.meta.dirname, '../../../.testbed/state.json'),
    'utf8',
  ),
) as { kube: { server: string; token: string; caCert: string } };

const rt = ManagedRuntime.make(
  Layer.mergeAll(
    layerFromToken(state.kube),
    Layer.succeed(CapabilitySource, { available: Effect.succeed([]) }),
    Layer.succeed(AppLifecycleConfig, { systemNamespace: 'kos-system' }),
  ),
);
const run = <A, E>(e: Effect.Effect<A, E, unknown>) => rt.runPromise(e as Effect.Effect<A, E, never>);
const kube = <A, E>(f: (k: KubeClientService) => Effect.Effect<A, E>) => run(Effect.flatMap(KubeClient, f));

const agent = new Agent({ keepAlive: true, ca: state.kube.caCert });
const dryRunApply = (o: KubeObject) =>
  new Promise<void>((resolve, reject) => {
    const body = JSON.stringify(o);
    const path = `/api/v1/namespaces/${o.metadata.namespace}/configmaps/${o.metadata.name}?dryRun=All&fieldManager=bench-peer&force=true`;
    const req = request(
      new URL(path, state.kube.server),
      {
        method: 'PATCH',
        agent,
        headers: {
          authorization: `Bearer ${state.kube.token}`,
          'content-type': 'application/apply-patch+yaml',
          'content-length': String(Buffer.byteLength(body)),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          res.statusCode === 200 || res.statusCode === 201 ? resolve() : reject(new Error(`dry-run ${res.statusCode}`)),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });

const definitionSpec = (version: string) => ({
  package: { name: 'fifty', version, dataFormat: 'fifty-1' },
  config: { fields: { greeting: { type: 'string', default: 'hello' } } },
  template: {
    documents: Array.from({ length: OBJECTS }, (_, i) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `{{app.name}}-part-${i}`, labels: { 'app.kubernetes.io/instance': '{{app.name}}' } },
      data: { greeting: '{{config.greeting}}', version, index: String(i) },
    })),
  },
});

const s = (ms: number) => `${(ms / 1000).toFixed(3)} s`;

const main = async () => {
  const tag = Date.now().toString(36);
  const ns = `bench-upg-${tag}`;
  const v1 = `bench-upg-${tag}-v1`;
  const v2 = `bench-upg-${tag}-v2`;
  print(`upgrade preflight bench: ${N} apps × ${OBJECTS} rendered objects; namespace ${ns}`);
  for (const crd of kosCrds()) await kube((k) => k.apply(crd as never, { fieldManager: 'kos-bench', force: true }));
  await kube((k) => k.discovery.invalidate);
  for (const n of ['kos-system', ns])
    await kube((k) =>
      k
        .create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: n } } as KubeObject)
        .pipe(Effect.catchTag('AlreadyExists', () => Effect.void)),
    );
  for (const [name, version] of [
    [v1, '1'],
    [v2, '2'],
  ] as const)
    await kube((k) =>
      k.create({
        apiVersion: API,
        kind: 'ApplicationDefinition',
        metadata: { name },
        spec: definitionSpec(version),
      } as unknown as KubeObject),
    );
  const apps = Array.from({ length: N }, (_, i) => `app-${i}`);
  try {
    for (const a of apps) {
      await kube((k) =>
        k.create({
          apiVersion: API,
          kind: 'Application',
          metadata: { name: a, namespace: ns },
          spec: { definitionRef: { name: v1 }, namespace: ns, config: { greeting: 'hello' } },
        } as unknown as KubeObject),
      );
      for (let r = 0; r < 3; r++) await run(reconcileApplication({ namespace: ns, name: a }));
      const phase = (
        (await kube((k) => k.get({ apiVersion: API, kind: 'Application', namespace: ns, name: a })))['status'] as {
          phase?: string;
        }
      ).phase;
      if (phase !== 'Ready') throw new Error(`${a} is ${phase}, not Ready`);
      await kube((k) =>
        k.patch(
          { apiVersion: API, kind: 'Application', namespace: ns, name: a },
          { type: 'merge', patch: { spec: { definitionRef: { name: v2 } } } },
        ),
      );
    }
    // Warm both paths once (connections, discovery), on an app that is then not measured.
    const targets = apps.map((a) => {
      const r = render(definitionSpec('2'), {
        appName: a,
        namespace: ns,
        config: { greeting: 'hello' },
        volumes: {},
      });
      if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left));
      return r.right.objects as unknown as KubeObject[];
    });
    for (const o of targets[0] ?? []) await dryRunApply(o);
    await run(reconcileApplication({ namespace: ns, name: apps[0] as string }));

    const measured = apps.slice(1);
    const k0 = performance.now();
    for (const a of measured) await run(reconcileApplication({ namespace: ns, name: a }));
    const kosMs = performance.now() - k0;
    for (const a of measured) {
      const u = (
        (await kube((k) => k.get({ apiVersion: API, kind: 'Application', namespace: ns, name: a })))['status'] as {
          upgrade?: { state?: string; render?: unknown[] };
        }
      ).upgrade;
      if (u?.state !== 'Preflighted' || u.render?.length !== OBJECTS)
        throw new Error(`${a}: preflight not stored (${u?.state}, ${u?.render?.length} object changes)`);
    }
    const p0 = performance.now();
    for (const objects of targets.slice(1)) for (const o of objects) await dryRunApply(o);
    const peerMs = performance.now() - p0;
    const ratio = kosMs / peerMs;
    print(
      `preflight (one reconciler round, ${OBJECTS} objects) × ${measured.length}: ${s(kosMs)}; server-side dry-run apply of the same objects: ${s(peerMs)}; ratio ${ratio.toFixed(2)}× (goal ≤ 2×: ${ratio <= 2 ? 'met' : 'missed'})`,
    );
  } finally {
    for (const a of apps)
      await kube((k) =>
        k
          .patch(
            { apiVersion: API, kind: 'Application', namespace: ns, name: a },
            { type: 'merge', patch: { metadata: { finalizers: null } } },
          )
          .pipe(Effect.ignore),
      );
    await kube((k) => k.delete({ apiVersion: 'v1', kind: 'Namespace', name: ns }).pipe(Effect.ignore));
    for (const d of [v1, v2])
      await kube((k) => k.delete({ apiVersion: API, kind: 'ApplicationDefinition', name: d }).pipe(Effect.ignore));
    agent.destroy();
    await rt.dispose();
  }
};

main().catch((e) => {
  printError(e);
  process.exit(1);
});

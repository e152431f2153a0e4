// kos-kernel application bench (issue 19 "Performance"; needs the test bed: HOMELAB_TESTBED_STATE or .testbed/state.json).
// 1. Install BENCH_APPS (200) apps of the built-in `static-web` through the control plane (createResource) and the
//    application reconciler (Pending → Installing → render/write → Ready), against its peer measured in the same run:
//    the same rendered objects (ConfigMap, Deployment, Service per app) server-side applied directly into another
//    namespace. Both sides write the Deployments' available status the way the tests do (no kubelet) and run with the
//    same concurrency. Goal: KOS ≤ 1.5× the peer.
// 2. A no-op resync of the 200 Ready apps: every request the reconciler sends is counted through a counting KubeClient
//    (goal: 0 writes), and the process CPU of the resync per app (goal ≤ 5 ms), against its peer: the same reads the
//    round makes per app (Application, definition, namespace, the 3 rendered objects) done directly.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Effect, Either, Layer, ManagedRuntime } from 'effect';
import { KubeClient, type KubeClientService, type KubeObject, layerFromToken } from '@homelab/kube';
import {
  AppLifecycleConfig,
  APPLICATION_WORKERS,
  BUILTIN_DEFINITIONS,
  CapabilitySource,
  ControlPlaneConfigLive,
  createResource,
  DiscoveryIndexLive,
  installBuiltinDefinitions,
  kosCrds,
  LoopbackOwnerAuthorizerLive,
  MemoryAuditorLive,
  reconcileApplication,
  render,
  SerialGateLive,
} from '../src/index.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const N = Number(process.env['BENCH_APPS'] ?? 200);
// Both sides run as many requests at once as the Application controller has workers (like with like).
const C = Number(process.env['BENCH_CONCURRENCY'] ?? APPLICATION_WORKERS);
const API = 'kos.tsic.top/v1beta1';
const state = JSON.parse(
  readFileSync(
    process.env['HOMELAB_TESTBED_STATE'] ?? join(import.meta.dirname, '../../../.testbed/state.json'),
    'utf8',
  ),
) as { kube: { server: string; token: string; caCert: string } };

// Every call the code under test makes to the API server, by method and resource (`apply Application/status`).
const calls = new Map<string, number>();
let counting = false;
const resourceOf = (args: ReadonlyArray<unknown>): string => {
  const target = args[0] as { kind?: string } | undefined;
  const options = args.find((a, i) => i > 0 && typeof a === 'object' && a !== null && 'subresource' in a) as
    { subresource?: string } | undefined;
  return `${target?.kind ?? '?'}${options?.subresource !== undefined ? `/${options.subresource}` : ''}`;
};
const countingClient = Layer.effect(
  KubeClient,
  Effect.map(KubeClient, (c): KubeClientService => {
    const wrap = <F extends (...args: never[]) => unknown>(name: string, f: F): F =>
      // Counted when the request runs (an effect built and never run sends nothing).
      ((...args: never[]) =>
        Effect.zipRight(
          Effect.sync(() => {
            if (counting) {
              const key = `${name} ${resourceOf(args)}`;
              calls.set(key, (calls.get(key) ?? 0) + 1);
            }
          }),
          f(...args) as Effect.Effect<unknown, unknown>,
        )) as unknown as F;
    return {
      ...c,
      get: wrap('get', c.get),
      list: wrap('list', c.list),
      listAll: wrap('listAll', c.listAll),
      create: wrap('create', c.create),
      update: wrap('update', c.update),
      updateStatus: wrap('updateStatus', c.updateStatus),
      apply: wrap('apply', c.apply),
      patch: wrap('patch', c.patch),
      delete: wrap('delete', c.delete),
    };
  }),
).pipe(Layer.provide(layerFromToken(state.kube, { maxSockets: 64 })));

const rt = ManagedRuntime.make(
  Layer.mergeAll(
    countingClient,
    SerialGateLive,
    LoopbackOwnerAuthorizerLive,
    MemoryAuditorLive(),
    DiscoveryIndexLive,
    ControlPlaneConfigLive({ continueKey: new Uint8Array(32).fill(7) }),
    Layer.succeed(CapabilitySource, { available: Effect.succeed([]) }),
    Layer.succeed(AppLifecycleConfig, { systemNamespace: 'kos-system' }),
  ),
);
const run = <A, E>(e: Effect.Effect<A, E, unknown>) => rt.runPromise(e as Effect.Effect<A, E, never>);
const kube = <A, E>(f: (k: KubeClientService) => Effect.Effect<A, E>) => run(Effect.flatMap(KubeClient, f));
const each = <A>(n: number, f: (i: number) => Promise<A>) =>
  run(
    Effect.forEach(
      Array.from({ length: n }, (_, i) => i),
      (i) => Effect.promise(() => f(i)),
      { concurrency: C },
    ),
  );
const name = (i: number) => `app-${i}`;

const markAvailable = (namespace: string, deployment: string) =>
  kube((k) =>
    k.patch(
      { apiVersion: 'apps/v1', kind: 'Deployment', namespace, name: deployment },
      {
        type: 'merge',
        patch: {
          status: { observedGeneration: 1, replicas: 1, readyReplicas: 1, availableReplicas: 1, updatedReplicas: 1 },
        },
      },
      { subresource: 'status' },
    ),
  );
const ensureNamespace = (n: string) =>
  kube((k) =>
    k
      .create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: n } } as KubeObject)
      .pipe(Effect.catchTag('AlreadyExists', () => Effect.void)),
  );
const phaseOf = async (namespace: string, app: string) =>
  (
    (await kube((k) => k.get({ apiVersion: API, kind: 'Application', namespace, name: app })))['status'] as
      { phase?: string } | undefined
  )?.phase;
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
/** The counted requests per app, by method (e.g. `get 2, apply 1`). */
const perApp = (counted: ReadonlyMap<string, number>) =>
  [...counted]
    .sort()
    .map(([m, n]) => `${m} ${+(n / N).toFixed(2)}`)
    .join(', ');

const main = async () => {
  const tag = Date.now().toString(36);
  const kosNs = `bench-apps-${tag}`;
  const directNs = `bench-direct-${tag}`;
  print(`apps bench: ${N} static-web apps, concurrency ${C}; namespaces ${kosNs} (KOS), ${directNs} (direct)`);
  for (const crd of kosCrds()) await kube((k) => k.apply(crd as never, { fieldManager: 'kos-bench', force: true }));
  await kube((k) => k.discovery.invalidate);
  await ensureNamespace('kos-system');
  await run(installBuiltinDefinitions);
  await ensureNamespace(kosNs);
  await ensureNamespace(directNs);
  const def = BUILTIN_DEFINITIONS.find((d) => d.metadata.name === 'static-web');
  if (def === undefined) throw new Error('static-web is built in');
  const config = { title: 'My homelab', workerProcesses: 1 };

  try {
    // --- the peer: the same rendered objects, server-side applied directly, then the Deployments made available ---
    const directCpu0 = process.cpuUsage();
    const direct0 = performance.now();
    await each(N, async (i) => {
      const r = render(def.spec, { appName: name(i), namespace: directNs, config, volumes: {} });
      if (Either.isLeft(r)) throw new Error(JSON.stringify(r.left));
      for (const o of r.right.objects)
        await kube((k) => k.apply(o as unknown as KubeObject, { fieldManager: 'bench-direct', force: true }));
      await markAvailable(directNs, name(i));
    });
    const directMs = performance.now() - direct0;
    const directCpu = process.cpuUsage(directCpu0);
    // The test bed's service range is a /24: free the peer's Service IPs before KOS allocates its own.
    const services = await kube((k) => k.list({ apiVersion: 'v1', kind: 'Service', namespace: directNs }));
    await each(services.items.length, (i) =>
      kube((k) =>
        k
          .delete({
            apiVersion: 'v1',
            kind: 'Service',
            namespace: directNs,
            name: services.items[i]?.metadata.name ?? '',
          })
          .pipe(Effect.ignore),
      ),
    );

    // --- KOS: create through the control plane, then the reconciler's rounds until Ready ---
    const kosCpu0 = process.cpuUsage();
    const kos0 = performance.now();
    const phases: Array<[string, number, Map<string, number>, NodeJS.CpuUsage]> = [];
    const phase = async (label: string, f: (i: number) => Promise<unknown>) => {
      calls.clear();
      counting = true;
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await each(N, f);
      phases.push([label, performance.now() - t0, new Map(calls), process.cpuUsage(c0)]);
      counting = false;
    };
    await phase('create through the control plane', async (i) => {
      const created = await run(
        Effect.either(
          createResource({
            kind: 'Application',
            namespace: kosNs,
            body: {
              apiVersion: API,
              kind: 'Application',
              metadata: { name: name(i), namespace: kosNs },
              spec: { definitionRef: 'static-web', namespace: kosNs },
            },
          }),
        ),
      );
      if (Either.isLeft(created)) throw new Error(JSON.stringify(created.left));
    });
    await phase('round 1: finalizer, Installing', (i) =>
      run(reconcileApplication({ namespace: kosNs, name: name(i) })),
    );
    await phase('round 2: render and write', (i) => run(reconcileApplication({ namespace: kosNs, name: name(i) })));
    // No kubelet: the bench writes the available status, as the peer does.
    await phase('Deployments made available', (i) => markAvailable(kosNs, name(i)));
    await phase('round 3: observe, Ready', (i) => run(reconcileApplication({ namespace: kosNs, name: name(i) })));
    const kosMs = performance.now() - kos0;
    const kosCpu = process.cpuUsage(kosCpu0);
    const notReady = (await each(N, (i) => phaseOf(kosNs, name(i)))).filter((p) => p !== 'Ready').length;
    if (notReady > 0) {
      const first = (await each(N, (i) => phaseOf(kosNs, name(i)))).findIndex((p) => p !== 'Ready');
      const a = await kube((k) => k.get({ apiVersion: API, kind: 'Application', namespace: kosNs, name: name(first) }));
      throw new Error(`${notReady} apps are not Ready, e.g. ${name(first)}: ${JSON.stringify(a['status'])}`);
    }
    print(`install to Ready: KOS ${s(kosMs)}, direct server-side apply ${s(directMs)}`);
    print(`  ratio KOS / direct          ${(kosMs / directMs).toFixed(2)}x  (goal ≤ 1.5x)`);
    const cpuPerApp = (c: NodeJS.CpuUsage) => `${((c.user + c.system) / 1000 / N).toFixed(2)} ms`;
    print(`  this process's CPU per app    KOS ${cpuPerApp(kosCpu)}, direct ${cpuPerApp(directCpu)}`);
    const total = phases.reduce((n, [, , c]) => n + [...c.values()].reduce((m, x) => m + x, 0), 0) / N;
    print(`  requests per app (control plane + reconciler + status writes): ${+total.toFixed(2)}  (direct: 4)`);
    for (const [label, ms, c, cpu] of phases)
      print(`    ${label.padEnd(34)} ${s(ms)}, CPU ${cpuPerApp(cpu)}/app   per app: ${perApp(c)}`);

    // --- no-op resync of the Ready apps ---
    for (let round = 0; round < 2; round++)
      await each(N, (i) => run(reconcileApplication({ namespace: kosNs, name: name(i) })));
    calls.clear();
    counting = true;
    const cpu0 = process.cpuUsage();
    const wall0 = performance.now();
    await each(N, (i) => run(reconcileApplication({ namespace: kosNs, name: name(i) })));
    const wallMs = performance.now() - wall0;
    const cpu = process.cpuUsage(cpu0);
    counting = false;
    const kosCpuMs = (cpu.user + cpu.system) / 1000;
    const byMethod = Object.fromEntries([...calls].sort());
    const writes = [...calls]
      .filter(([key]) => !['get', 'list', 'listAll'].includes(key.split(' ')[0] ?? ''))
      .reduce((n, [, count]) => n + count, 0);
    const peerCpu0 = process.cpuUsage();
    const peerWall0 = performance.now();
    await each(N, async (i) => {
      await kube((k) => k.get({ apiVersion: API, kind: 'Application', namespace: kosNs, name: name(i) }));
      await kube((k) => k.get({ apiVersion: API, kind: 'ApplicationDefinition', name: 'static-web' }));
      await kube((k) => k.get({ apiVersion: 'v1', kind: 'Namespace', name: kosNs }));
      for (const [apiVersion, kind, n] of [
        ['v1', 'ConfigMap', `${name(i)}-content`],
        ['apps/v1', 'Deployment', name(i)],
        ['v1', 'Service', name(i)],
      ] as const)
        await kube((k) => k.get({ apiVersion, kind, namespace: kosNs, name: n }));
    });
    const peerWallMs = performance.now() - peerWall0;
    const peerCpu = process.cpuUsage(peerCpu0);
    const peerCpuMs = (peerCpu.user + peerCpu.system) / 1000;
    print(
      `no-op resync of ${N} Ready apps: ${writes} writes; requests by method and resource ${JSON.stringify(byMethod)}`,
    );
    print(
      `  controller CPU per app      ${(kosCpuMs / N).toFixed(2)} ms  (goal ≤ 5 ms; wall ${s(wallMs)} for all ${N})`,
    );
    print(
      `  peer: the same 6 reads/app   ${(peerCpuMs / N).toFixed(2)} ms CPU per app (wall ${s(peerWallMs)}); ratio ${(kosCpuMs / peerCpuMs).toFixed(2)}x`,
    );
    if (writes > 0) process.exitCode = 1;
  } finally {
    for (const n of [kosNs, directNs]) {
      // The apps' finalizers would hold the namespace: drop them, then delete it.
      await each(N, (i) =>
        n === kosNs
          ? kube((k) =>
              k
                .patch(
                  { apiVersion: API, kind: 'Application', namespace: n, name: name(i) },
                  { type: 'merge', patch: { metadata: { finalizers: null } } },
                )
                .pipe(Effect.ignore),
            )
          : Promise.resolve(),
      );
      await kube((k) => k.delete({ apiVersion: 'v1', kind: 'Namespace', name: n }).pipe(Effect.ignore));
    }
    await rt.dispose();
  }
};

await main();

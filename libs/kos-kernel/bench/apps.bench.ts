// kos-kernel application bench (issue 19 "Performance"; needs the test bed: HOMELAB_TESTBED_STATE or .testbed/state.json).
// 1. Install BENCH_APPS (200) apps of the built-in `static-web` through the control plane (createResource) and the
//    application reconciler (Pending → Installing → render/write → Ready), against its peer measured in the same run:
//    the same rendered objects (ConfigMap, Deployment, Service per app) server-side applied directly into another
//    namespace. Both sides write the Deployments' available status the way the tests do (no kubelet) and run with the
//    same concurrency. Goal: KOS ≤ 1.5× the peer. KOS runs twice in the same run: with direct reads (before decision
//    0350) and with the application reconciler's watch-fed caches (definitions, action records, LimitRanges), as the
//    controller runs it; the caches' three long-lived watches are not per-app requests and are not counted.
// 2. A no-op resync of the 200 Ready apps: every request the reconciler sends is counted through a counting KubeClient
//    (goal: 0 writes), and the process CPU of the resync per app (goal ≤ 5 ms), against its peer: the same reads the
//    round makes per app (Application, definition, namespace, the 3 rendered objects) done directly.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Effect, Either, Layer, ManagedRuntime } from 'effect';
import { KubeClient, type KubeClientService, type KubeObject, layerFromToken } from '@homelab/kube';
import {
  AppLifecycleCacheLive,
  AppLifecycleConfig,
  AppLifecycleReads,
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

const services = Layer.mergeAll(
  countingClient,
  SerialGateLive,
  LoopbackOwnerAuthorizerLive,
  MemoryAuditorLive(),
  DiscoveryIndexLive,
  ControlPlaneConfigLive({ continueKey: new Uint8Array(32).fill(7) }),
  Layer.succeed(CapabilitySource, { available: Effect.succeed([]) }),
  Layer.succeed(AppLifecycleConfig, { systemNamespace: 'kos-system' }),
);
const rt = ManagedRuntime.make(services);
// The same services plus the application reconciler's watch-fed caches (decision 0350), as the controller runs it.
const rtCached = ManagedRuntime.make(Layer.provideMerge(AppLifecycleCacheLive(), services));
const run = <A, E>(e: Effect.Effect<A, E, unknown>) => rt.runPromise(e as Effect.Effect<A, E, never>);
/** The reconciler's and control plane's calls: without caches (before 0350) or with them. */
let variantRt: typeof rt | typeof rtCached = rt;
const runVariant = <A, E>(e: Effect.Effect<A, E, unknown>) =>
  (variantRt as typeof rt).runPromise(e as Effect.Effect<A, E, never>);
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

const freeServices = async (namespace: string) => {
  const listed = await kube((k) => k.list({ apiVersion: 'v1', kind: 'Service', namespace }));
  await each(listed.items.length, (i) =>
    kube((k) =>
      k
        .delete({ apiVersion: 'v1', kind: 'Service', namespace, name: listed.items[i]?.metadata.name ?? '' })
        .pipe(Effect.ignore),
    ),
  );
};
const cpuPerApp = (c: NodeJS.CpuUsage) => `${((c.user + c.system) / 1000 / N).toFixed(2)} ms`;
const writesIn = (counted: ReadonlyMap<string, number>) =>
  [...counted]
    .filter(([key]) => !['get', 'list', 'listAll'].includes(key.split(' ')[0] ?? ''))
    .reduce((n, [, count]) => n + count, 0);

interface KosRun {
  readonly label: string;
  readonly ms: number;
  readonly cpu: NodeJS.CpuUsage;
  readonly requestsPerApp: number;
  readonly writesPerApp: number;
  readonly resyncCpuMsPerApp: number;
  readonly resyncRequests: Readonly<Record<string, number>>;
  readonly resyncWrites: number;
}

/** Install N apps through the control plane and the reconciler's rounds, then a no-op resync; prints per phase. */
const installKos = async (label: string, namespace: string): Promise<KosRun> => {
  const reconcile = (i: number) => runVariant(reconcileApplication({ namespace, name: name(i) }));
  const kosCpu0 = process.cpuUsage();
  const kos0 = performance.now();
  const phases: Array<[string, number, Map<string, number>, NodeJS.CpuUsage]> = [];
  const phase = async (phaseLabel: string, f: (i: number) => Promise<unknown>) => {
    calls.clear();
    counting = true;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await each(N, f);
    phases.push([phaseLabel, performance.now() - t0, new Map(calls), process.cpuUsage(c0)]);
    counting = false;
  };
  await phase('create through the control plane', async (i) => {
    const created = await runVariant(
      Effect.either(
        createResource({
          kind: 'Application',
          namespace,
          body: {
            apiVersion: API,
            kind: 'Application',
            metadata: { name: name(i), namespace },
            spec: { definitionRef: 'static-web', namespace },
          },
        }),
      ),
    );
    if (Either.isLeft(created)) throw new Error(JSON.stringify(created.left));
  });
  await phase('round 1: finalizer, Installing', reconcile);
  await phase('round 2: render and write', reconcile);
  // No kubelet: the bench writes the available status, as the peer does.
  await phase('Deployments made available', (i) => markAvailable(namespace, name(i)));
  await phase('round 3: observe, Ready', reconcile);
  const ms = performance.now() - kos0;
  const cpu = process.cpuUsage(kosCpu0);
  // A round that found its cached definition behind a fresh read ends without writing (0350): run rounds until
  // every app is Ready, and count those extra rounds in the install.
  for (let extra = 0; extra < 5; extra++) {
    const phasesNow = await each(N, (i) => phaseOf(namespace, name(i)));
    const late = phasesNow.map((p, i) => (p === 'Ready' ? -1 : i)).filter((i) => i >= 0);
    if (late.length === 0) break;
    print(`  ${label}: ${late.length} apps not Ready after round 3; another round for them`);
    await run(Effect.forEach(late, (i) => Effect.promise(() => reconcile(i)), { concurrency: C }));
  }
  const notReady = (await each(N, (i) => phaseOf(namespace, name(i)))).filter((p) => p !== 'Ready').length;
  if (notReady > 0) {
    const first = (await each(N, (i) => phaseOf(namespace, name(i)))).findIndex((p) => p !== 'Ready');
    const a = await kube((k) => k.get({ apiVersion: API, kind: 'Application', namespace, name: name(first) }));
    throw new Error(`${label}: ${notReady} apps are not Ready, e.g. ${name(first)}: ${JSON.stringify(a['status'])}`);
  }
  const requestsPerApp = phases.reduce((n, [, , c]) => n + [...c.values()].reduce((m, x) => m + x, 0), 0) / N;
  const writesPerApp = phases.reduce((n, [, , c]) => n + writesIn(c), 0) / N;
  print(`KOS with ${label}: install to Ready ${s(ms)}, this process's CPU per app ${cpuPerApp(cpu)}`);
  print(
    `  requests per app (control plane + reconciler + status writes): ${+requestsPerApp.toFixed(2)}, writes ${+writesPerApp.toFixed(2)}  (direct: 4, 4)`,
  );
  for (const [phaseLabel, phaseMs, c, phaseCpu] of phases)
    print(`    ${phaseLabel.padEnd(34)} ${s(phaseMs)}, CPU ${cpuPerApp(phaseCpu)}/app   per app: ${perApp(c)}`);

  // --- no-op resync of the Ready apps ---
  for (let round = 0; round < 2; round++) await each(N, reconcile);
  calls.clear();
  counting = true;
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  await each(N, reconcile);
  const wallMs = performance.now() - wall0;
  const resyncCpu = process.cpuUsage(cpu0);
  counting = false;
  const resyncCpuMsPerApp = (resyncCpu.user + resyncCpu.system) / 1000 / N;
  const resyncRequests = Object.fromEntries([...calls].sort());
  const resyncWrites = writesIn(calls);
  print(`  no-op resync of ${N} Ready apps: ${resyncWrites} writes; requests ${JSON.stringify(resyncRequests)}`);
  print(
    `  controller CPU per app      ${resyncCpuMsPerApp.toFixed(2)} ms  (goal ≤ 5 ms; wall ${s(wallMs)} for all ${N})`,
  );
  return { label, ms, cpu, requestsPerApp, writesPerApp, resyncCpuMsPerApp, resyncRequests, resyncWrites };
};

const main = async () => {
  const tag = Date.now().toString(36);
  const kosNs = `bench-apps-${tag}`;
  const cachedNs = `bench-apps-cached-${tag}`;
  const directNs = `bench-direct-${tag}`;
  print(
    `apps bench: ${N} static-web apps, concurrency ${C}; namespaces ${kosNs} (KOS, direct reads), ${cachedNs} (KOS, watch-fed caches), ${directNs} (peer)`,
  );
  const load0 = (await import('node:os')).loadavg();
  for (const crd of kosCrds()) await kube((k) => k.apply(crd as never, { fieldManager: 'kos-bench', force: true }));
  await kube((k) => k.discovery.invalidate);
  await ensureNamespace('kos-system');
  await run(installBuiltinDefinitions);
  await ensureNamespace(kosNs);
  await ensureNamespace(cachedNs);
  await ensureNamespace(directNs);
  const def = BUILTIN_DEFINITIONS.find((d) => d.metadata.name === 'static-web');
  if (def === undefined) throw new Error('static-web is built in');
  const config = { title: 'My homelab', workerProcesses: 1 };
  // the caches list once and start watching before anything is measured
  await rtCached.runPromise(Effect.flatMap(AppLifecycleReads, (r) => r.limitRanges(kosNs)));

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
    print(`peer (direct server-side apply): ${s(directMs)}, this process's CPU per app ${cpuPerApp(directCpu)}`);
    // The test bed's service range is a /24: free the peer's Service IPs before KOS allocates its own.
    await freeServices(directNs);

    // BENCH_CACHED_FIRST=1 runs the cached variant first (the machine's load drifts during a run)
    const cachedFirst = process.env['BENCH_CACHED_FIRST'] === '1';
    const runDirect = async () => {
      variantRt = rt;
      const r = await installKos('direct reads', kosNs);
      if (!cachedFirst) await freeServices(kosNs); // the next install needs the Service IPs
      return r;
    };
    const runCached = async () => {
      variantRt = rtCached;
      const r = await installKos('watch-fed caches', cachedNs);
      if (cachedFirst) await freeServices(cachedNs);
      return r;
    };
    const after = cachedFirst ? await runCached() : undefined;
    const before = await runDirect();
    const afterResult = after ?? (await runCached());

    // --- the resync's peer: the same reads the round made before 0350, done directly (in the namespace installed last) ---
    const peerNs = cachedFirst ? kosNs : cachedNs;
    const peerCpu0 = process.cpuUsage();
    const peerWall0 = performance.now();
    await each(N, async (i) => {
      await kube((k) => k.get({ apiVersion: API, kind: 'Application', namespace: peerNs, name: name(i) }));
      await kube((k) => k.get({ apiVersion: API, kind: 'ApplicationDefinition', name: 'static-web' }));
      await kube((k) => k.get({ apiVersion: 'v1', kind: 'Namespace', name: peerNs }));
      for (const [apiVersion, kind, n] of [
        ['v1', 'ConfigMap', `${name(i)}-content`],
        ['apps/v1', 'Deployment', name(i)],
        ['v1', 'Service', name(i)],
      ] as const)
        await kube((k) => k.get({ apiVersion, kind, namespace: peerNs, name: n }));
    });
    const peerWallMs = performance.now() - peerWall0;
    const peerCpu = process.cpuUsage(peerCpu0);
    const peerCpuMs = (peerCpu.user + peerCpu.system) / 1000 / N;
    const load1 = (await import('node:os')).loadavg();

    print('');
    print(
      `summary (load average at start ${load0.map((x) => x.toFixed(1)).join(' ')}, at end ${load1.map((x) => x.toFixed(1)).join(' ')})`,
    );
    print(`  peer: direct server-side apply     ${s(directMs)}`);
    for (const r of [before, afterResult])
      print(
        `  KOS, ${r.label.padEnd(18)}        ${s(r.ms)}  ratio ${(r.ms / directMs).toFixed(2)}x (goal ≤ 1.5x)  requests/app ${+r.requestsPerApp.toFixed(2)} (writes ${+r.writesPerApp.toFixed(2)})  CPU/app ${cpuPerApp(r.cpu)}`,
      );
    print(
      `  caches vs direct reads: time ${(afterResult.ms / before.ms).toFixed(2)}x, requests ${(afterResult.requestsPerApp / before.requestsPerApp).toFixed(2)}x`,
    );
    print(
      `  no-op resync CPU per app: direct reads ${before.resyncCpuMsPerApp.toFixed(2)} ms, caches ${afterResult.resyncCpuMsPerApp.toFixed(2)} ms (goal ≤ 5 ms); peer's 6 plain reads ${peerCpuMs.toFixed(2)} ms (wall ${s(peerWallMs)})`,
    );
    if (before.resyncWrites + afterResult.resyncWrites > 0) process.exitCode = 1;
  } finally {
    for (const n of [kosNs, cachedNs, directNs]) {
      // The apps' finalizers would hold the namespace: drop them, then delete it.
      await each(N, (i) =>
        n !== directNs
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
    await rtCached.dispose();
    await rt.dispose();
  }
};

await main();

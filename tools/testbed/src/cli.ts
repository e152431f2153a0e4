// testbed up [--foreground] [--node] | down | env [--json] | status | build [--node] | images import TAR…
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Effect, Exit, Scope } from 'effect';
import { parseAllDocuments } from 'yaml';
import { ensureBinary, ensureNodePackages, nodeBinaryNames } from './binaries.js';
import { cleanLeftoverNode, importImages } from './node.js';
import { installCrdsOn, type CrdManifest } from './kube-api.js';
import { TestbedError } from './errors.js';
import { httpCall } from './net.js';
import {
  defaultStateFile,
  isAlive,
  readState,
  readStatePid,
  removeState,
  shellExports,
  writeState,
  type TestbedState,
} from './state.js';
import { netnsCommand } from './netns.js';
import { reapOrphanedScramClusters, scramHealth } from './scram-postgres.js';
import { startTestbed } from './testbed.js';
import { binaryPaths, versions } from './versions.js';

const say = (line: string) => process.stderr.write(`testbed: ${line}\n`);
const stateFile = defaultStateFile();

const usage = `usage: testbed <command>
  up [--foreground] [--node]
                     start etcd + kube-apiserver + kube-controller-manager + OpenBao (and check PostgreSQL); print the exports.
                     --node: also a real node (containerd, kubelet, kube-scheduler, workload controllers; root, one per machine)
  down               stop the running test bed (and remove everything its node wrote, also a crashed run's,
                     and the SCRAM PostgreSQL clusters of test beds that are gone)
  images import TAR… import OCI/Docker image tarballs into the running node (pods use imagePullPolicy: Never)
  env [--json]       print the exports (or the state) of the running test bed
  status             exit 0 if a test bed is running; prints each service's health
  install-crds PATH… apply the CustomResourceDefinitions in these YAML files/folders and wait until served
  netns up|down [--nodes N] [--prefix P]  node network namespaces on a link-local bridge (root; see src/netns.ts)
  build [--node]     build the binaries into the cache; --node also kubelet, kube-scheduler, containerd (+ apt packages) (${dirname(dirname(binaryPaths().etcd))})`;

const scramLine = (state: TestbedState): string =>
  state.scramPostgres === undefined
    ? 'not in this state (an older test bed)'
    : state.scramPostgres.available
      ? `${state.scramPostgres.version}  ${state.scramPostgres.hostaddr}:${state.scramPostgres.port} (host ${state.scramPostgres.host}, superuser ${state.scramPostgres.superuser}, the CA in the state file)`
      : `UNAVAILABLE: ${state.scramPostgres.reason}`;

const howToUse = (state: TestbedState) => `
The test bed is running (pid ${state.pid}); Ctrl-C stops it and removes its data.
  kube-apiserver ${state.kube.version}  ${state.kube.server}   (etcd ${state.kube.etcd})
  kube-controller-manager  pid ${state.controllerManager.pid}, ${state.controllerManager.healthz}   (${state.controllerManager.controllers.join(', ')})
  PostgreSQL ${state.postgres.version}  ${state.postgres.host}:${state.postgres.port} user ${state.postgres.user}
  OpenBao        ${state.openbao.available ? `${state.openbao.version}  ${state.openbao.addr} (KV v2 at ${state.openbao.kvMount}/)` : `UNAVAILABLE: ${state.openbao.reason}`}
  PostgreSQL (scram-sha-256, TLS only)  ${scramLine(state)}${
    state.node
      ? `
  node ${state.node.name}  kubelet pid ${state.node.kubelet.pid}, containerd ${state.node.containerd.version}, pods on ${state.node.podSubnet}
                 images: ${state.node.images.busybox}, ${state.node.images.pause} (imagePullPolicy: Never)`
      : ''
  }
In another shell:
  eval "$(npm run -s testbed -- env)"     # KUBECONFIG, PGHOST/PGPORT/PGUSER, BAO_ADDR/BAO_TOKEN
  kubectl get ns   # any kubeconfig client
  psql -c 'select 1'
  curl -H "X-Vault-Token: $BAO_TOKEN" $BAO_ADDR/v1/sys/health
  npm test                                 # reuses this test bed
`;

const foreground = (node: boolean) =>
  Effect.gen(function* () {
    const existing = yield* Effect.either(readState(stateFile));
    if (existing._tag === 'Right' && isAlive(existing.right.pid)) {
      say(`already running (pid ${existing.right.pid}); \`npm run testbed -- down\` stops it`);
      process.stdout.write(`${shellExports(existing.right, stateFile)}\n`);
      return;
    }
    yield* olderRunning(stateFile);
    const scope = yield* Scope.make();
    const started = Date.now();
    // A start that fails stops what it had started (otherwise those children keep this process, and `up`, waiting).
    const state = yield* startTestbed({ progress: say, node }).pipe(
      Scope.extend(scope),
      Effect.tapError(() => Scope.close(scope, Exit.void)),
    );
    writeState(stateFile, state);
    say(`ready in ${Date.now() - started} ms; state in ${stateFile}`);
    process.stdout.write(`${shellExports(state, stateFile)}\n`);
    if (process.stdout.isTTY || process.env['npm_lifecycle_event'] === 'start') process.stderr.write(howToUse(state));
    yield* Effect.async<void>((resume) => {
      const stop = (signal: string) => {
        say(`${signal}: stopping`);
        resume(Effect.void);
      };
      process.once('SIGINT', () => stop('SIGINT'));
      process.once('SIGTERM', () => stop('SIGTERM'));
    });
    removeState(stateFile);
    yield* Scope.close(scope, Exit.void);
    say('stopped');
  });

/** Starts `up --foreground` detached, waits for its state file, prints the exports. */
const detached = (node: boolean) =>
  Effect.gen(function* () {
    const existing = yield* Effect.either(readState(stateFile));
    if (existing._tag === 'Right' && isAlive(existing.right.pid)) {
      say(`already running (pid ${existing.right.pid}${existing.right.node ? ', with a node' : ''})`);
      if (node && !existing.right.node)
        return yield* new TestbedError({
          component: 'state',
          reason: `the running test bed (pid ${existing.right.pid}) has no node; \`testbed down\`, then \`testbed up --node\``,
        });
      process.stdout.write(`${shellExports(existing.right, stateFile)}\n`);
      return;
    }
    yield* olderRunning(stateFile);
    removeState(stateFile);
    mkdirSync(dirname(stateFile), { recursive: true });
    const logFile = join(dirname(stateFile), 'testbed.log');
    const fd = openSync(logFile, 'w');
    const args = [...process.execArgv, process.argv[1] as string, 'up', '--foreground', ...(node ? ['--node'] : [])];
    const child = spawn(process.execPath, args, {
      detached: true,
      stdio: ['ignore', 'ignore', fd],
      env: process.env,
    });
    closeSync(fd);
    child.unref();
    say(`starting in the background (pid ${child.pid}, log ${logFile})`);
    const deadline = Date.now() + 30 * 60_000; // a cold start includes building the binaries
    for (;;) {
      const state = yield* Effect.either(readState(stateFile));
      if (state._tag === 'Right' && state.right.pid === child.pid) {
        process.stdout.write(`${shellExports(state.right, stateFile)}\n`);
        return;
      }
      if (child.pid === undefined || !isAlive(child.pid) || Date.now() > deadline) {
        const { logTail } = yield* Effect.promise(() => import('./process.js'));
        return yield* new TestbedError({
          component: 'state',
          reason: `test bed failed to start:\n${logTail(logFile, 40)}`,
          logFile,
        });
      }
      yield* Effect.sleep('250 millis');
    }
  });

// The owning process stops its services in reverse start order (controller manager and OpenBao, then the API
// server, then etcd) when its scope closes on SIGTERM.
const down = Effect.gen(function* () {
  const pid = readStatePid(stateFile);
  if (pid === undefined || !isAlive(pid)) {
    removeState(stateFile);
    say('not running');
    reapOrphanedScramClusters(say);
    yield* cleanLeftoverNode(say);
    return;
  }
  process.kill(pid, 'SIGTERM');
  // A node's stop (kubelet, every container, containerd, the cleanup) takes longer than the services alone.
  for (let i = 0; i < 600 && isAlive(pid); i++) yield* Effect.sleep('100 millis');
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  removeState(stateFile);
  say(`stopped (pid ${pid})`);
  reapOrphanedScramClusters(say); // its own, when it had to be SIGKILLed; any other dead test bed's
  yield* cleanLeftoverNode(say);
});

const status = Effect.gen(function* () {
  const pid = readStatePid(stateFile);
  if (pid === undefined || !isAlive(pid)) return yield* new TestbedError({ component: 'state', reason: 'not running' });
  const state = yield* Effect.either(readState(stateFile));
  if (state._tag === 'Left') {
    return yield* new TestbedError({
      component: 'state',
      reason: `running (pid ${pid}) but its state is not this version's (${state.left.reason}); restart it with down + up`,
    });
  }
  const s = state.right;
  say(`running (pid ${s.pid}, since ${s.startedAt})`);
  const api = yield* Effect.promise(() =>
    httpCall(`${s.kube.server}/readyz`, {
      headers: { authorization: `Bearer ${s.kube.token}` },
      ca: s.kube.caCert,
    }).catch((e: unknown) => ({ status: 0, body: String(e) })),
  );
  say(
    `kube-apiserver ${s.kube.version} ${s.kube.server}: ${api.status === 200 ? 'ready' : `NOT READY (${api.status})`}`,
  );
  const cm = s.controllerManager;
  const cmHealth = yield* Effect.promise(() =>
    httpCall(cm.healthz, { ca: s.kube.caCert }).catch((e: unknown) => ({ status: 0, body: String(e) })),
  );
  const cmOk = isAlive(cm.pid) && cmHealth.status === 200;
  say(
    `kube-controller-manager ${cm.version} pid ${cm.pid} port ${cm.port} (${cm.controllers.join(', ')}): ${cmOk ? 'healthy' : `NOT HEALTHY (${isAlive(cm.pid) ? `healthz ${cmHealth.status}` : 'process gone'})`}`,
  );
  say(
    `openbao: ${s.openbao.available ? `${s.openbao.version} ${s.openbao.addr}` : `UNAVAILABLE: ${s.openbao.reason}`}`,
  );
  say(`postgresql ${s.postgres.version} ${s.postgres.host}:${s.postgres.port}`);
  const scram = s.scramPostgres;
  const scramHealthy = scram?.available === true ? yield* Effect.promise(() => scramHealth(scram)) : undefined;
  say(
    `postgresql (scram-sha-256, TLS only): ${scramLine(s)}${scramHealthy === undefined ? '' : scramHealthy.ready ? ': ready' : `: NOT READY (${scramHealthy.reason})`}`,
  );
  if (s.node) {
    const n = s.node;
    const kubelet = yield* Effect.promise(() =>
      httpCall(n.kubelet.healthz).catch((e: unknown) => ({ status: 0, body: String(e) })),
    );
    say(
      `node ${n.name}: kubelet ${n.kubelet.version} pid ${n.kubelet.pid} ${kubelet.status === 200 ? 'healthy' : `NOT HEALTHY (${kubelet.status})`}; containerd ${n.containerd.version} pid ${n.containerd.pid} ${isAlive(n.containerd.pid) ? 'running' : 'GONE'}; kube-scheduler pid ${n.scheduler.pid} ${isAlive(n.scheduler.pid) ? 'running' : 'GONE'}`,
    );
  }
  // Still exit 0: scripts read a non-zero status as "not running" and would start (and later stop) a second one.
});

/** A live test bed whose state file this version cannot decode (written before a field was added): stop, don't orphan it. */
const olderRunning = (file: string): Effect.Effect<void, TestbedError> => {
  const pid = readStatePid(file);
  return pid !== undefined && isAlive(pid)
    ? new TestbedError({
        component: 'state',
        reason: `a test bed from an older version of this tool is running (pid ${pid}); stop it with \`testbed down\` first`,
      })
    : Effect.void;
};

const env = (json: boolean) =>
  Effect.gen(function* () {
    const state = yield* readState(stateFile);
    if (!isAlive(state.pid))
      return yield* new TestbedError({
        component: 'state',
        reason: `stale state file ${stateFile} (pid ${state.pid} is gone)`,
      });
    process.stdout.write(json ? `${JSON.stringify(state, null, 2)}\n` : `${shellExports(state, stateFile)}\n`);
  });

const build = (node: boolean) =>
  Effect.gen(function* () {
    for (const name of [
      'etcd',
      'kube-apiserver',
      'kube-controller-manager',
      'bao',
      'kustomize',
      'actionlint',
    ] as const) {
      const path = yield* ensureBinary(name);
      say(`${name}: ${path}`);
    }
    if (node) {
      yield* ensureNodePackages();
      for (const name of nodeBinaryNames) {
        const path = yield* ensureBinary(name);
        say(`${name}: ${path}`);
      }
    }
    say(
      `versions: kubernetes ${versions.kubernetes}, etcd ${versions.etcd}, openbao ${versions.openbaoRelease}${node ? `, containerd ${versions.containerd}` : ''}`,
    );
  });

const imagesCommand = (args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const [sub, ...tarballs] = args;
    if (sub !== 'import' || tarballs.length === 0)
      return yield* new TestbedError({ component: 'state', reason: 'usage: testbed images import TAR…' });
    const state = yield* readState(stateFile);
    if (!state.node)
      return yield* new TestbedError({
        component: 'node',
        reason: 'the running test bed has no node; start it with `testbed up --node`',
      });
    const names = yield* importImages(state.node.containerd, tarballs);
    say(`imported into node ${state.node.name}: ${names.join(', ')}`);
  });

/** Reads every CustomResourceDefinition document from YAML files (folders: their *.yaml files). */
const readCrds = (paths: ReadonlyArray<string>): CrdManifest[] => {
  const files = paths.flatMap((p) =>
    statSync(p).isDirectory()
      ? readdirSync(p)
          .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
          .sort()
          .map((f) => join(p, f))
      : [p],
  );
  return files.flatMap((f) =>
    parseAllDocuments(readFileSync(f, 'utf8'))
      .map((d) => d.toJS() as { kind?: string } | null)
      .filter((d): d is CrdManifest & { kind: string } => d?.kind === 'CustomResourceDefinition'),
  );
};

const installCrdsCommand = (paths: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    if (paths.length === 0)
      return yield* new TestbedError({
        component: 'state',
        reason: 'install-crds needs at least one YAML file or folder',
      });
    const state = yield* readState(stateFile);
    const crds = yield* Effect.try({
      try: () => readCrds(paths),
      catch: (e) => new TestbedError({ component: 'state', reason: `reading CRDs: ${String(e)}` }),
    });
    const started = Date.now();
    yield* Effect.tryPromise({
      try: () => installCrdsOn(state.kube, crds),
      catch: (e) => new TestbedError({ component: 'kube-apiserver', reason: String(e) }),
    });
    say(
      `${crds.length} CRDs installed and served (${Date.now() - started} ms): ${crds.map((c) => c.metadata.name).join(', ')}`,
    );
  });

const [command, ...flags] = process.argv.slice(2);
const program: Effect.Effect<void, TestbedError> =
  command === 'up'
    ? flags.includes('--foreground')
      ? foreground(flags.includes('--node'))
      : detached(flags.includes('--node'))
    : command === 'down'
      ? down
      : command === 'env'
        ? env(flags.includes('--json'))
        : command === 'status'
          ? status
          : command === 'build'
            ? build(flags.includes('--node'))
            : command === 'images'
              ? imagesCommand(flags)
              : command === 'install-crds'
                ? installCrdsCommand(flags)
                : command === 'netns'
                  ? Effect.sync(() => netnsCommand(flags))
                  : Effect.sync(() => {
                      process.stderr.write(`${usage}\n`);
                      process.exitCode = command === undefined || command === 'help' || command === '--help' ? 0 : 2;
                    });

Effect.runPromiseExit(program).then((exit) => {
  if (Exit.isFailure(exit)) {
    const failure = exit.cause._tag === 'Fail' ? exit.cause.error.message : String(exit.cause);
    say(`error: ${failure}`);
    process.exitCode = 1;
  }
});

// `testbed up --node`: a real node on this machine — containerd v2 (runc, CRI), the bridge CNI on a link-local range
// of our own, a kubelet joined as system:node:localhost, and kube-scheduler. Everything the node writes outside the
// test bed's data directory is listed in a ledger before it is written, so `down` — or the next `up` after a crashed
// run — removes exactly that and restores the kernel settings the kubelet changes.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { Effect, Schema } from 'effect';
import { ensureBinary, ensureNodePackages } from './binaries.js';
import { TestbedError } from './errors.js';
import { buildNodeImages, type NodeImages } from './images.js';
import { kubeCall } from './kube-api.js';
import { freePort, httpCall } from './net.js';
import { runCommand, spawnScoped, spawnSupervised, waitReady, type ManagedProcess } from './process.js';
import { nodeName, writeKubeconfig, type KubeEndpoint, type NodeAccess, type Progress } from './services.js';
import { isAlive } from './state.js';
import { binaryPaths, cacheRoot, versions } from './versions.js';

/** The bridge the pods' veths hang on, and the pods' own link-local range (no default route, no forwarding, no NAT). */
export const nodeNetwork = {
  bridge: 'hltb0',
  subnet: '169.254.80.0/24',
  gateway: '169.254.80.1',
  cniName: 'homelab-testbed',
} as const;

/**
 * Where the kubelet, containerd and the CNI plugins write outside the data directory on their own (hard-coded paths),
 * checked on this machine; whichever of them did not exist before `up` is removed by `down`.
 */
export const outsidePaths = [
  '/var/lib/kubelet',
  '/usr/libexec/kubernetes',
  '/var/log/containers',
  '/var/log/pods',
  '/run/netns',
  '/var/lib/cni',
  '/run/containerd',
  '/var/lib/containerd',
  '/opt/containerd',
  '/run/nri',
  '/etc/cni',
  // kube-controller-manager's host-path provisioner (--enable-hostpath-provisioner) makes its PV folders here.
  '/tmp/hostpath_pv',
] as const;

/** The kernel settings the kubelet sets at start (its KernelTunableModify behaviour) and ip_forward: restored by down. */
export const trackedSysctls = [
  'vm.overcommit_memory',
  'vm.panic_on_oom',
  'kernel.panic',
  'kernel.panic_on_oops',
  'kernel.keys.root_maxkeys',
  'kernel.keys.root_maxbytes',
  'net.ipv4.ip_forward',
] as const;

/** What `down` needs to undo the node, written before the node touches the machine. */
export const NodeLedger = Schema.Struct({
  ownerPid: Schema.Number,
  dataDir: Schema.String,
  /** Paths of {@link outsidePaths} that did not exist before this node started. */
  absentBefore: Schema.Array(Schema.String),
  /** `<cgroup hierarchy>/kubepods` folders that did not exist before. */
  cgroupsAbsentBefore: Schema.Array(Schema.String),
  sysctls: Schema.Record({ key: Schema.String, value: Schema.String }),
  /** The node's long-running processes, by pid and executable (a pid is only signalled while it still runs that). */
  processes: Schema.Array(Schema.Struct({ pid: Schema.Number, exe: Schema.String })),
});
export type NodeLedger = typeof NodeLedger.Type;

export const ledgerFile = (): string => join(cacheRoot(), 'node', 'ledger.json');

const readLedger = (): NodeLedger | undefined => {
  try {
    return Schema.decodeUnknownSync(NodeLedger)(JSON.parse(readFileSync(ledgerFile(), 'utf8')));
  } catch {
    return undefined;
  }
};

const writeLedger = (ledger: NodeLedger): void => {
  mkdirSync(dirname(ledgerFile()), { recursive: true });
  writeFileSync(ledgerFile(), JSON.stringify(ledger, null, 2));
};

const sysctlPath = (name: string) => join('/proc/sys', ...name.split('.'));
const readSysctl = (name: string): string | undefined => {
  try {
    return readFileSync(sysctlPath(name), 'utf8').trim();
  } catch {
    return undefined;
  }
};

/** The mounted cgroup hierarchies (v1 controllers, the named systemd one and the cgroup2 mount beside them). */
const cgroupHierarchies = (): string[] =>
  readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[2] === 'cgroup' || f[2] === 'cgroup2')
    .map((f) => f[1] as string);

const unescapeMount = (p: string) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** Mount points at or below one of `roots`, deepest first. */
const mountsBelow = (roots: ReadonlyArray<string>): string[] =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => p !== undefined)
    .map(unescapeMount)
    .filter((p) => roots.some((r) => p === r || p.startsWith(`${r}/`)))
    .sort((a, b) => b.split('/').length - a.split('/').length || b.length - a.length);

const exeOf = (pid: number): string | undefined => {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return undefined;
  }
};

const killPid = (pid: number) => {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    /* already gone */
  }
};

/** Every pid in a cgroup folder and its children. */
const cgroupPids = (dir: string): number[] => {
  if (!existsSync(dir)) return [];
  const here = (() => {
    try {
      return readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  })();
  const children = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => cgroupPids(join(dir, e.name)));
  return [...here, ...children];
};

/** Removes a cgroup folder tree, children first (cgroup folders are removed with rmdir, never unlinked). */
const removeCgroupTree = (dir: string): void => {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeCgroupTree(join(dir, e.name));
  rmdirSync(dir);
};

const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

const linkExists = (name: string): boolean => {
  try {
    execFileSync('ip', ['link', 'show', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

/**
 * Undoes a node from its ledger: kills what is left of it (its processes, the containers in its kubepods cgroups,
 * the runc shims of this build), unmounts everything below its data directory and the outside paths it created,
 * removes those paths, its kubepods cgroups and the bridge, restores the kernel settings, and deletes the ledger.
 * Idempotent, synchronous (it also runs for a crashed run's leftovers); returns what it did, one line per step.
 */
export const cleanNode = (ledger: NodeLedger): string[] => {
  const done: string[] = [];
  const shim = binaryPaths().containerdShim;
  for (const p of ledger.processes) {
    if (isAlive(p.pid) && exeOf(p.pid) === p.exe) {
      killPid(p.pid);
      done.push(`killed ${p.exe} (pid ${p.pid})`);
    }
  }
  const kubepods = [...ledger.cgroupsAbsentBefore];
  for (let round = 0; round < 50; round++) {
    const shims = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .filter((pid) => exeOf(pid) === shim);
    const pods = [...new Set(kubepods.flatMap(cgroupPids))];
    if (shims.length === 0 && pods.length === 0) break;
    if (round === 0) done.push(`killed ${pods.length} container processes and ${shims.length} shims`);
    for (const pid of [...pods, ...shims]) killPid(pid);
    sleepSync(100);
  }
  const roots = [ledger.dataDir, ...ledger.absentBefore];
  for (const m of mountsBelow(roots)) {
    try {
      execFileSync('umount', [m], { stdio: 'ignore' });
    } catch {
      try {
        execFileSync('umount', ['-l', m], { stdio: 'ignore' });
      } catch {
        /* already gone with its parent */
      }
    }
  }
  if (mountsBelow(roots).length > 0) done.push(`STILL MOUNTED: ${mountsBelow(roots).join(', ')}`);
  for (const cg of kubepods) {
    for (let i = 0; i < 30 && existsSync(cg); i++) {
      try {
        removeCgroupTree(cg);
      } catch {
        sleepSync(100);
      }
    }
    if (existsSync(cg)) done.push(`COULD NOT REMOVE cgroup ${cg}`);
  }
  if (linkExists(nodeNetwork.bridge)) {
    execFileSync('ip', ['link', 'del', nodeNetwork.bridge]);
    done.push(`deleted bridge ${nodeNetwork.bridge}`);
  }
  for (const p of [...ledger.absentBefore, ledger.dataDir]) {
    if (existsSync(p)) {
      rmSync(p, { recursive: true, force: true });
      if (p !== ledger.dataDir) done.push(`removed ${p}`);
    }
  }
  for (const [name, value] of Object.entries(ledger.sysctls)) {
    if (readSysctl(name) !== value) {
      writeFileSync(sysctlPath(name), value);
      done.push(`restored ${name}=${value}`);
    }
  }
  rmSync(ledgerFile(), { force: true });
  return done;
};

/**
 * The leftovers of a node whose test bed is gone (crashed, SIGKILLed): cleaned, with a line per step. A node whose
 * owner still runs is an error: one node per machine (the kubelet's cgroups, the bridge and port names are shared).
 */
export const cleanLeftoverNode = (progress: Progress): Effect.Effect<void, TestbedError> =>
  Effect.gen(function* () {
    const ledger = readLedger();
    if (ledger === undefined) return;
    if (ledger.ownerPid !== process.pid && isAlive(ledger.ownerPid)) {
      return yield* new TestbedError({
        component: 'node',
        reason: `a test bed with a node is already running on this machine (pid ${ledger.ownerPid}); one node per machine — stop it with \`testbed down\` first`,
      });
    }
    const done = cleanNode(ledger);
    progress(
      `cleaned the node left by a test bed that is gone (pid ${ledger.ownerPid}): ${done.join('; ') || 'nothing left'}`,
    );
  });

/** The node part of the state file. */
export interface NodeState {
  readonly name: string;
  readonly podSubnet: string;
  readonly images: NodeImages;
  readonly kubelet: { readonly pid: number; readonly port: number; readonly healthz: string; readonly version: string };
  readonly containerd: {
    readonly pid: number;
    readonly socket: string;
    readonly version: string;
    readonly ctr: string;
  };
  readonly scheduler: {
    readonly pid: number;
    readonly port: number;
    readonly healthz: string;
    readonly version: string;
  };
}

const containerdConfig = (dir: string, cniConfDir: string, pause: string) => `version = 3
root = '${dir}/root'
state = '${dir}/state'

[grpc]
  address = '${dir}/containerd.sock'

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = '${dir}/opt'
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '${pause}'
  [plugins.'io.containerd.cri.v1.runtime']
    # root here lacks CAP_SYS_RESOURCE: without this every sandbox fails with
    # "runc create failed: ... can't get final child's PID from pipe: EOF"
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '/usr/sbin/runc'
          Root = '${dir}/state/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['/usr/lib/cni']
      conf_dir = '${cniConfDir}'
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
`;

/** bridge + host-local: the pods' veths on our bridge, addresses from our link-local range, no gateway or NAT. */
const cniConflist = (ipamDir: string) =>
  JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: nodeNetwork.cniName,
      plugins: [
        {
          type: 'bridge',
          bridge: nodeNetwork.bridge,
          isGateway: false,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            dataDir: ipamDir,
            ranges: [[{ subnet: nodeNetwork.subnet, rangeStart: '169.254.80.10', rangeEnd: '169.254.80.250' }]],
          },
        },
      ],
    },
    null,
    2,
  );

const ctrArgs = (socket: string, ...args: string[]) => ['--address', socket, '--namespace', 'k8s.io', ...args];

/** Kills and removes every CRI container and sandbox through ctr while containerd still runs (the node's down). */
const removeAllContainers = (ctr: string, socket: string): Effect.Effect<void> =>
  Effect.gen(function* () {
    const list = yield* Effect.either(runCommand('containerd', ctr, ctrArgs(socket, 'containers', 'ls', '-q')));
    if (list._tag === 'Left') return;
    const ids = list.right.split('\n').filter(Boolean);
    for (const id of ids) {
      yield* Effect.either(runCommand('containerd', ctr, ctrArgs(socket, 'tasks', 'kill', '--signal', 'SIGKILL', id)));
    }
    for (const id of ids) {
      for (let i = 0; i < 50; i++) {
        const r = yield* Effect.either(
          runCommand('containerd', ctr, ctrArgs(socket, 'tasks', 'delete', '--force', id)),
        );
        if (r._tag === 'Right' || /not found/.test(r.left.reason)) break;
        yield* Effect.sleep('100 millis');
      }
      yield* Effect.either(runCommand('containerd', ctr, ctrArgs(socket, 'containers', 'delete', id)));
    }
  });

/**
 * Starts the node inside the caller's scope: packages and binaries (built on first use), the ledger, the bridge, the
 * CNI config, containerd, the two images, the kubelet, and kube-scheduler; done when the Node is Ready and untainted.
 * Closing the scope stops the kubelet, removes every container, stops containerd and the scheduler, then undoes the
 * rest from the ledger.
 */
export const startNode = (dataDir: string, kube: KubeEndpoint, access: NodeAccess, progress: Progress) =>
  Effect.gen(function* () {
    const started = Date.now();
    yield* ensureNodePackages();
    const kubeletBin = yield* ensureBinary('kubelet');
    const schedulerBin = yield* ensureBinary('kube-scheduler');
    const containerdBin = yield* ensureBinary('containerd');
    const { ctr, containerdShim } = binaryPaths();
    yield* cleanLeftoverNode(progress);

    const nodeDir = join(dataDir, 'node');
    const ledgerRef: { current: NodeLedger } = {
      current: {
        ownerPid: process.pid,
        dataDir,
        absentBefore: outsidePaths.filter((p) => !existsSync(p)),
        cgroupsAbsentBefore: cgroupHierarchies()
          .map((h) => join(h, 'kubepods'))
          .filter((p) => !existsSync(p)),
        sysctls: Object.fromEntries(
          trackedSysctls.flatMap((s) => {
            const v = readSysctl(s);
            return v === undefined ? [] : [[s, v]];
          }),
        ),
        processes: [],
      },
    };
    const remember = (pid: number | undefined, exe: string) => {
      if (pid === undefined) return;
      ledgerRef.current = { ...ledgerRef.current, processes: [...ledgerRef.current.processes, { pid, exe }] };
      writeLedger(ledgerRef.current);
    };
    yield* Effect.acquireRelease(
      Effect.sync(() => writeLedger(ledgerRef.current)),
      () =>
        Effect.sync(() => {
          const done = cleanNode(ledgerRef.current);
          progress(`node removed${done.length > 0 ? `: ${done.join('; ')}` : ''}`);
        }),
    );

    // The bridge carries the gateway address itself, so the bridge plugin needs no isGateway (which would turn on
    // ip_forward for the whole machine).
    yield* Effect.try({
      try: () => {
        mkdirSync(nodeDir, { recursive: true });
        execFileSync('ip', ['link', 'add', nodeNetwork.bridge, 'type', 'bridge']);
        execFileSync('ip', ['addr', 'add', `${nodeNetwork.gateway}/24`, 'dev', nodeNetwork.bridge]);
        execFileSync('ip', ['link', 'set', nodeNetwork.bridge, 'up']);
      },
      catch: (e) =>
        new TestbedError({ component: 'node', reason: `creating bridge ${nodeNetwork.bridge}: ${String(e)}` }),
    });
    const cniConfDir = join(nodeDir, 'cni', 'net.d');
    mkdirSync(cniConfDir, { recursive: true });
    writeFileSync(join(cniConfDir, '10-testbed.conflist'), cniConflist(join(nodeDir, 'cni', 'ipam')));

    const imageDir = join(nodeDir, 'images');
    mkdirSync(imageDir, { recursive: true });
    const { images, tarballs } = yield* buildNodeImages(imageDir);

    const containerdDir = join(nodeDir, 'containerd');
    mkdirSync(containerdDir, { recursive: true });
    const containerdConf = join(containerdDir, 'config.toml');
    writeFileSync(containerdConf, containerdConfig(containerdDir, cniConfDir, images.pause));
    const socket = join(containerdDir, 'containerd.sock');
    // containerd and the kubelet are supervised as systemd does on a node (Restart=always): killed, they come back.
    const restarted = (what: string, exe: string) => (next: ManagedProcess, previous: ManagedProcess['exited']) => {
      remember(next.child.pid, exe);
      progress(
        `${what} exited (code ${previous?.code ?? '?'}, signal ${previous?.signal ?? 'none'}); restarted as pid ${next.child.pid}`,
      );
    };
    const containerd = yield* spawnSupervised(
      {
        component: 'containerd',
        command: containerdBin,
        args: ['--config', containerdConf, '--log-level', 'info'],
        logFile: join(dataDir, 'containerd.log'),
        // The runc shim is found on PATH, next to containerd in the cache.
        env: { PATH: `${dirname(containerdShim)}:${process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin'}` },
      },
      restarted('containerd', containerdBin),
    );
    remember(containerd.current.child.pid, containerdBin);
    yield* waitReady(
      'containerd',
      containerd.current,
      () =>
        Effect.runPromise(
          Effect.either(runCommand('containerd', ctr, ctrArgs(socket, 'version'))).pipe(
            Effect.map((r) => r._tag === 'Right'),
          ),
        ),
      '60 seconds',
    );
    yield* Effect.addFinalizer(() => removeAllContainers(ctr, socket));
    for (const tarball of tarballs) yield* runCommand('containerd', ctr, ctrArgs(socket, 'images', 'import', tarball));
    progress(`containerd ${versions.containerd} ready at ${socket}; imported ${images.pause} and ${images.busybox}`);

    // The kubelet: token of system:node:localhost, serving certificate for localhost, the API server's client
    // certificate accepted through the CA, everything else (authorization) asked of the API server.
    const kubeletDir = join(nodeDir, 'kubelet');
    mkdirSync(kubeletDir, { recursive: true });
    const kubeletKubeconfig = join(nodeDir, 'kubelet.kubeconfig');
    writeKubeconfig(kubeletKubeconfig, kube.server, kube.caCert, `system:node:${nodeName}`, access.kubeletToken);
    const kubeletPort = yield* freePort();
    const kubeletHealthzPort = yield* freePort();
    const kubeletConfig = join(nodeDir, 'kubelet-config.json');
    writeFileSync(
      kubeletConfig,
      JSON.stringify(
        {
          apiVersion: 'kubelet.config.k8s.io/v1beta1',
          kind: 'KubeletConfiguration',
          // This machine's hybrid cgroups count as v1; without this the kubelet refuses to start.
          failCgroupV1: false,
          address: '127.0.0.1',
          port: kubeletPort,
          readOnlyPort: 0,
          healthzBindAddress: '127.0.0.1',
          healthzPort: kubeletHealthzPort,
          tlsCertFile: access.kubeletServing.certFile,
          tlsPrivateKeyFile: access.kubeletServing.keyFile,
          authentication: {
            anonymous: { enabled: false },
            webhook: { enabled: true },
            x509: { clientCAFile: access.pki.caCertFile },
          },
          authorization: { mode: 'Webhook' },
          containerRuntimeEndpoint: `unix://${socket}`,
          cgroupDriver: 'cgroupfs',
          podLogsDir: join(nodeDir, 'pod-logs'),
          volumePluginDir: join(nodeDir, 'volume-plugins'),
          // Nothing can be pulled here: keep the imported images however full the disk gets.
          imageGCHighThresholdPercent: 100,
          imageGCLowThresholdPercent: 99,
          evictionHard: { 'memory.available': '100Mi' },
          rotateCertificates: false,
          serverTLSBootstrap: false,
        },
        null,
        2,
      ),
    );
    yield* Effect.tryPromise({
      try: () => Promise.all([grantKubeletApiAccess(kube), createDefaultStorageClass(kube)]),
      catch: (e) => new TestbedError({ component: 'kubelet', reason: String(e) }),
    });
    const kubelet = yield* spawnSupervised(
      {
        component: 'kubelet',
        command: kubeletBin,
        args: [
          `--config=${kubeletConfig}`,
          `--kubeconfig=${kubeletKubeconfig}`,
          `--root-dir=${kubeletDir}`,
          `--cert-dir=${join(kubeletDir, 'pki')}`,
          `--hostname-override=${nodeName}`,
          '--v=1',
        ],
        logFile: join(dataDir, 'kubelet.log'),
      },
      restarted('kubelet', kubeletBin),
    );
    remember(kubelet.current.child.pid, kubeletBin);

    const scheduler = yield* startScheduler(dataDir, kube, access, schedulerBin, progress);
    remember(scheduler.pid, schedulerBin);

    yield* waitReady('kubelet', kubelet.current, () => nodeReady(kube), '120 seconds');
    progress(
      `node ${nodeName} Ready (kubelet ${versions.kubernetes}, ${Date.now() - started} ms after the node's start)`,
    );
    const state: NodeState = {
      name: nodeName,
      podSubnet: nodeNetwork.subnet,
      images,
      kubelet: {
        pid: kubelet.current.child.pid ?? -1,
        port: kubeletPort,
        healthz: `http://127.0.0.1:${kubeletHealthzPort}/healthz`,
        version: versions.kubernetes,
      },
      containerd: { pid: containerd.current.child.pid ?? -1, socket, version: versions.containerd, ctr },
      scheduler,
    };
    return state;
  });

/** The Node is Ready and the node lifecycle controller has lifted its not-ready taint, so pods can be scheduled. */
const nodeReady = async (kube: KubeEndpoint): Promise<boolean> => {
  const r = await kubeCall(kube, 'GET', `/api/v1/nodes/${nodeName}`);
  if (r.status !== 200) return false;
  const node = r.json() as {
    spec?: { taints?: Array<{ key: string }> };
    status?: { conditions?: Array<{ type: string; status: string }> };
  };
  const ready = node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
  const notReadyTaint = (node.spec?.taints ?? []).some((t) => t.key.startsWith('node.kubernetes.io/'));
  return ready && !notReadyTaint;
};

/** The API server's kubelet client (kube-apiserver-kubelet-client) may call the kubelet API, as kubeadm grants it. */
const grantKubeletApiAccess = async (kube: KubeEndpoint): Promise<void> => {
  const r = await kubeCall(kube, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'testbed:kube-apiserver-kubelet-client' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:kubelet-api-admin' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'kube-apiserver-kubelet-client' }],
  });
  if (r.status !== 201 && r.status !== 409) throw new Error(`binding system:kubelet-api-admin: ${r.status} ${r.body}`);
};

/**
 * The default StorageClass of a test bed with a node: kube-controller-manager's in-tree host-path provisioner (a
 * folder /tmp/hostpath_pv/<uuid> per claim, removed when the claim goes: reclaimPolicy Delete), bound at once. A claim
 * without a class gets it through the DefaultStorageClass admission.
 */
export const hostPathStorageClass = 'testbed-hostpath';

const createDefaultStorageClass = async (kube: KubeEndpoint): Promise<void> => {
  const r = await kubeCall(kube, 'POST', '/apis/storage.k8s.io/v1/storageclasses', {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: {
      name: hostPathStorageClass,
      annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' },
    },
    provisioner: 'kubernetes.io/host-path',
    reclaimPolicy: 'Delete',
    volumeBindingMode: 'Immediate',
  });
  if (r.status !== 201 && r.status !== 409)
    throw new Error(`StorageClass ${hostPathStorageClass}: ${r.status} ${r.body}`);
};

/** The pids running `exe` now (the node's daemons are one per machine; a supervised one changes pid on restart). */
export const pidsOf = (exe: string): number[] =>
  readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => exeOf(pid) === exe);

/** kube-scheduler as system:kube-scheduler (its bootstrap role), loopback only, no leader election. */
const startScheduler = (dataDir: string, kube: KubeEndpoint, access: NodeAccess, bin: string, progress: Progress) =>
  Effect.gen(function* () {
    const kubeconfig = join(dataDir, 'pki', 'kube-scheduler.kubeconfig');
    writeKubeconfig(kubeconfig, kube.server, kube.caCert, 'system:kube-scheduler', access.schedulerToken);
    const port = yield* freePort();
    const healthz = `https://127.0.0.1:${port}/healthz`;
    const started = Date.now();
    const proc = yield* spawnScoped({
      component: 'kube-scheduler',
      command: bin,
      args: [
        `--kubeconfig=${kubeconfig}`,
        '--leader-elect=false',
        '--bind-address=127.0.0.1',
        `--secure-port=${port}`,
        `--tls-cert-file=${access.pki.servingCertFile}`,
        `--tls-private-key-file=${access.pki.servingKeyFile}`,
        '--v=1',
      ],
      logFile: join(dataDir, 'kube-scheduler.log'),
    });
    yield* waitReady(
      'kube-scheduler',
      proc,
      async () => (await httpCall(healthz, { ca: kube.caCert })).status === 200,
      '60 seconds',
    );
    progress(`kube-scheduler ${versions.kubernetes} ready at ${healthz} (${Date.now() - started} ms)`);
    return { pid: proc.child.pid ?? -1, port, healthz, version: versions.kubernetes };
  });

/** What a machine shows of a node: the outside paths, kubepods cgroups, the bridge and the ledger that exist now. */
export const nodeTraces = (): string[] => [
  ...outsidePaths.filter((p) => existsSync(p)),
  ...cgroupHierarchies()
    .map((h) => join(h, 'kubepods'))
    .filter((p) => existsSync(p)),
  ...(linkExists(nodeNetwork.bridge) ? [`link ${nodeNetwork.bridge}`] : []),
  ...(existsSync(ledgerFile()) ? [ledgerFile()] : []),
  ...readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      const exe = exeOf(Number(d));
      const b = binaryPaths();
      return exe !== undefined && [b.containerd, b.containerdShim, b.kubelet, b.kubeScheduler].includes(exe);
    })
    .map((d) => `process ${d} ${exeOf(Number(d))}`),
];

/** A reference as containerd's CRI stores it: a Docker Hub short name gets `docker.io/` (and `library/`). */
export const normalizeImageName = (name: string): string => {
  const first = name.split('/')[0] ?? '';
  const hasRegistry = name.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasRegistry) return name;
  return name.includes('/') ? `docker.io/${name}` : `docker.io/library/${name}`;
};

/**
 * The image names a tarball declares: an OCI layout's `index.json` (`io.containerd.image.name`, as containerd and
 * Docker ≥ 25 write it) or a `docker save` tarball's `manifest.json` RepoTags; normalized.
 */
export const namesInTarball = (tarball: string): string[] => {
  const member = (name: string): string | undefined => {
    try {
      return execFileSync('tar', ['-xOf', tarball, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return undefined;
    }
  };
  const names: string[] = [];
  const index = member('index.json');
  if (index !== undefined) {
    const parsed = JSON.parse(index) as { manifests?: Array<{ annotations?: Record<string, string> }> };
    for (const m of parsed.manifests ?? []) {
      const n = m.annotations?.['io.containerd.image.name'];
      if (n !== undefined) names.push(n);
    }
  }
  const manifest = member('manifest.json');
  if (manifest !== undefined) {
    const parsed = JSON.parse(manifest) as Array<{ RepoTags?: string[] | null }>;
    for (const m of parsed) names.push(...(m.RepoTags ?? []));
  }
  return [...new Set(names.map(normalizeImageName))];
};

/**
 * Imports image tarballs (OCI layout or `docker save`) into the node's containerd, in the CRI namespace, and returns
 * the image names it now holds from them: the names the tarball declares, each checked in containerd's image list
 * afterwards (ctr's own progress table is for people: it wraps long names). Pods that name them run them without a
 * pull (`imagePullPolicy: Never`, or `IfNotPresent` — the default for a tagged reference).
 */
export const importImages = (
  containerd: NodeState['containerd'],
  tarballs: ReadonlyArray<string>,
): Effect.Effect<string[], TestbedError> =>
  Effect.gen(function* () {
    const names: string[] = [];
    for (const tarball of tarballs) {
      if (!existsSync(tarball))
        return yield* new TestbedError({ component: 'node', reason: `image tarball ${tarball} does not exist` });
      const declared = namesInTarball(tarball);
      if (declared.length === 0)
        return yield* new TestbedError({
          component: 'node',
          reason: `${tarball} names no image (an OCI layout with io.containerd.image.name or a \`docker save\` tarball with RepoTags is expected)`,
        });
      yield* runCommand('containerd', containerd.ctr, ctrArgs(containerd.socket, 'images', 'import', tarball));
      const held = (yield* runCommand('containerd', containerd.ctr, ctrArgs(containerd.socket, 'images', 'ls', '-q')))
        .split('\n')
        .map((l) => l.trim());
      const missing = declared.filter((n) => !held.includes(n));
      if (missing.length > 0)
        return yield* new TestbedError({
          component: 'node',
          reason: `${tarball}: containerd does not hold ${missing.join(', ')} after the import`,
        });
      names.push(...declared);
    }
    return names;
  });

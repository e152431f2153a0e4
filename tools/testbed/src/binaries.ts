import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { Effect } from 'effect';
import { TestbedError } from './errors.js';
import { runCommand } from './process.js';
import { binaryPaths, cacheRoot, versions, workspaceRoot } from './versions.js';

/** `node` names what only `testbed up --node` needs; they are built only when asked for (`build --node`). */
export type BinaryName =
  | 'etcd'
  | 'kube-apiserver'
  | 'kube-controller-manager'
  | 'bao'
  | 'kustomize'
  | 'actionlint'
  | 'kubelet'
  | 'kube-scheduler'
  | 'containerd';

export const nodeBinaryNames = ['kubelet', 'kube-scheduler', 'containerd'] as const;

/** The files one build target produces (containerd: the daemon, its runc shim and ctr). */
const filesOf = (name: BinaryName): ReadonlyArray<string> => {
  const paths = binaryPaths();
  return name === 'containerd' ? [paths.containerd, paths.containerdShim, paths.ctr] : [pathOf(name)];
};

const pathOf = (name: BinaryName): string => {
  const paths = binaryPaths();
  switch (name) {
    case 'kubelet':
      return paths.kubelet;
    case 'kube-scheduler':
      return paths.kubeScheduler;
    case 'containerd':
      return paths.containerd;
    case 'etcd':
      return paths.etcd;
    case 'kube-apiserver':
      return paths.kubeApiserver;
    case 'kube-controller-manager':
      return paths.kubeControllerManager;
    case 'bao':
      return paths.bao;
    case 'kustomize':
      return paths.kustomize;
    case 'actionlint':
      return paths.actionlint;
  }
};

const isExecutable = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/**
 * Returns the cached binary, building it from the Go module proxy first when it is missing
 * (scripts/build-binaries.sh; progress on stderr, the build log's tail in the error on failure).
 */
export const ensureBinary = (name: BinaryName): Effect.Effect<string, TestbedError> =>
  Effect.gen(function* () {
    const path = pathOf(name);
    if (filesOf(name).every(isExecutable)) return path;
    const script = join(workspaceRoot(), 'tools/testbed/scripts/build-binaries.sh');
    yield* runCommand('binaries', 'bash', [script, name], {
      inheritStderr: true,
      env: {
        K8S_VERSION: versions.kubernetes,
        ETCD_VERSION: versions.etcd,
        BAO_VERSION: versions.openbaoModule,
        BAO_RELEASE: versions.openbaoRelease,
        CONTAINERD_VERSION: versions.containerd,
        KUSTOMIZE_VERSION: versions.kustomize,
        ACTIONLINT_VERSION: versions.actionlint,
        TESTBED_CACHE_DIR: cacheRoot(),
      },
    });
    const missing = filesOf(name).filter((f) => !isExecutable(f));
    if (missing.length > 0) {
      return yield* new TestbedError({
        component: 'binaries',
        reason: `build of ${name} reported success but ${missing.join(', ')} is missing`,
      });
    }
    return path;
  });

/**
 * Debian's runc, containernetworking-plugins and busybox-static, installed with apt when missing (root); the node
 * cannot run without them (scripts/build-binaries.sh node-packages).
 */
export const ensureNodePackages = (): Effect.Effect<void, TestbedError> =>
  Effect.gen(function* () {
    if (
      [
        '/usr/sbin/runc',
        '/usr/lib/cni/bridge',
        '/usr/lib/cni/host-local',
        '/usr/lib/cni/loopback',
        '/bin/busybox',
      ].every(isExecutable)
    )
      return;
    const script = join(workspaceRoot(), 'tools/testbed/scripts/build-binaries.sh');
    yield* runCommand('binaries', 'bash', [script, 'node-packages'], {
      inheritStderr: true,
      env: { TESTBED_CACHE_DIR: cacheRoot() },
    });
  });

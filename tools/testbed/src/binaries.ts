import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { Effect } from 'effect';
import { TestbedError } from './errors.js';
import { runCommand } from './process.js';
import { binaryPaths, cacheRoot, versions, workspaceRoot } from './versions.js';

export type BinaryName = 'etcd' | 'kube-apiserver' | 'kube-controller-manager' | 'bao';

const pathOf = (name: BinaryName): string => {
  const paths = binaryPaths();
  switch (name) {
    case 'etcd':
      return paths.etcd;
    case 'kube-apiserver':
      return paths.kubeApiserver;
    case 'kube-controller-manager':
      return paths.kubeControllerManager;
    case 'bao':
      return paths.bao;
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
    if (isExecutable(path)) return path;
    const script = join(workspaceRoot(), 'tools/testbed/scripts/build-binaries.sh');
    yield* runCommand('binaries', 'bash', [script, name], {
      inheritStderr: true,
      env: {
        K8S_VERSION: versions.kubernetes,
        ETCD_VERSION: versions.etcd,
        BAO_VERSION: versions.openbaoModule,
        BAO_RELEASE: versions.openbaoRelease,
        TESTBED_CACHE_DIR: cacheRoot(),
      },
    });
    if (!isExecutable(path)) {
      return yield* new TestbedError({
        component: 'binaries',
        reason: `build of ${name} reported success but ${path} is missing`,
      });
    }
    return path;
  });

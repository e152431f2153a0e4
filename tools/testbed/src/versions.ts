import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * The pinned versions of the real services. Changing one rebuilds that binary into a new cache folder
 * (the cache is keyed by version); docs/decisions/0003-testbed-recipe.md records why these.
 */
export const versions = {
  kubernetes: 'v1.36.3',
  etcd: 'v3.6.16',
  /** OpenBao's root module has no /v2 path: this exact pseudo-version is the v2.4.x release commit. */
  openbaoModule: 'v0.0.0-20250828202315-f9407a27fbee',
  openbaoRelease: 'v2.4.0',
  /** containerd v2 (daemon, runc shim, ctr) for the node; Debian's 1.6 loses kubelet support in 1.37. */
  containerd: 'v2.4.2',
  /** Renders deploy/ (decision 0283); built like the others, not a test-bed service. v5.8.3 needs Go 1.27. */
  kustomize: 'v5.8.2',
  /** Checks .github/workflows in `npm test` (decision 0285); built like kustomize, not a test-bed service. */
  actionlint: 'v1.7.12',
} as const;

export const cacheRoot = (): string =>
  process.env['TESTBED_CACHE_DIR'] ??
  join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'homelab-testbed');

export const binaryPaths = () => {
  const root = cacheRoot();
  return {
    etcd: join(root, `etcd-${versions.etcd}`, 'etcd'),
    kubeApiserver: join(root, `kubernetes-${versions.kubernetes}`, 'kube-apiserver'),
    kubeControllerManager: join(root, `kubernetes-${versions.kubernetes}`, 'kube-controller-manager'),
    bao: join(root, `openbao-${versions.openbaoModule}`, 'bao'),
    kubelet: join(root, `kubernetes-${versions.kubernetes}`, 'kubelet'),
    kubeScheduler: join(root, `kubernetes-${versions.kubernetes}`, 'kube-scheduler'),
    containerd: join(root, `containerd-${versions.containerd}`, 'containerd'),
    containerdShim: join(root, `containerd-${versions.containerd}`, 'containerd-shim-runc-v2'),
    ctr: join(root, `containerd-${versions.containerd}`, 'ctr'),
    kustomize: join(root, `kustomize-${versions.kustomize}`, 'kustomize'),
    actionlint: join(root, `actionlint-${versions.actionlint}`, 'actionlint'),
  } as const;
};

/** The repository root, found from this file's location (tools/testbed/src). */
export const workspaceRoot = (): string => join(import.meta.dirname, '..', '..', '..');

export * from './cluster.js';
/** The transport a test may wrap (KubernetesClusterLive's `wrap`), re-exported so callers need not depend on kube. */
export type { Transport } from '@homelab/kube';

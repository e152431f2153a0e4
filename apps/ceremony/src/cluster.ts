// The only CLI module that loads Kubernetes code (the adapter on @homelab/kube and @kubernetes/client-node).
// run.ts imports it dynamically, and only for the commands that talk to a cluster.
import { KubernetesClusterLive, type Transport } from '@homelab/deployment-ceremony/kubernetes';
import type { ClientMode, HeadRef } from '@homelab/deployment-ceremony';

export const clusterLayer = (
  kubeconfig: string,
  head: HeadRef,
  mode: ClientMode,
  /** Tests only (their own entry point, decision 0253): a wrapper around the transport, e.g. to crash the process. */
  wrapTransport?: (t: Transport) => Transport,
) => KubernetesClusterLive(kubeconfig, { mode, head }, wrapTransport === undefined ? {} : { wrap: wrapTransport });

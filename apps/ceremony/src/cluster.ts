// The only CLI module that loads Kubernetes code (the adapter on @homelab/kube and @kubernetes/client-node).
// run.ts imports it dynamically, and only for the commands that talk to a cluster.
import { KubernetesClusterLive } from '@homelab/deployment-ceremony/kubernetes';
import type { ClientMode, HeadRef } from '@homelab/deployment-ceremony';

export const clusterLive = (
  kubeconfig: string,
  head: HeadRef,
  mode: ClientMode,
  /** Test-only fault injection (decision 0075): SIGKILL this process after a real DELETE was answered. */
  killAfterDelete: ((message: string) => void) | undefined,
) =>
  KubernetesClusterLive(kubeconfig, {
    mode,
    head,
    ...(killAfterDelete === undefined
      ? {}
      : {
          afterDeleteAnswered: () => {
            killAfterDelete('! fault injection: SIGKILL after the DELETE was answered, before the Head commit');
            process.kill(process.pid, 'SIGKILL');
          },
        }),
  });

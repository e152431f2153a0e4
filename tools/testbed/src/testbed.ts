import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect } from 'effect';
import {
  ensurePostgres,
  startEtcd,
  startKubeApiserver,
  startKubeControllerManager,
  startOpenBao,
  type Progress,
} from './services.js';
import { startNode } from './node.js';
import { startScramPostgres } from './scram-postgres.js';
import type { TestbedState } from './state.js';
import { versions } from './versions.js';

export interface StartOptions {
  readonly progress?: Progress;
  /** Keep the data directory (logs, etcd data) after stopping, for debugging. */
  readonly keepData?: boolean;
  /**
   * Also a real node (`up --node`): containerd, the kubelet and kube-scheduler, and the controller manager's workload
   * controllers; the start waits until the Node is Ready. Root only; one per machine.
   */
  readonly node?: boolean;
}

/**
 * Starts the whole test bed inside the caller's scope: etcd, then kube-apiserver, then kube-controller-manager and
 * OpenBao and the password-checking PostgreSQL cluster (decision 0382) side by side, and checks the machine's
 * PostgreSQL. Closing the scope stops every process in the reverse order (the
 * controller manager and OpenBao before the API server, the API server before etcd) and removes the data directory.
 * OpenBao that cannot be built or started is reported as unavailable (with the reason), not faked; a controller
 * manager that does not become healthy fails the start.
 */
export const startTestbed = (options: StartOptions = {}) =>
  Effect.gen(function* () {
    const progress = options.progress ?? (() => undefined);
    const dataDir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), 'homelab-testbed-'))),
      (dir) => Effect.sync(() => (options.keepData ? undefined : rmSync(dir, { recursive: true, force: true }))),
    );
    progress(`data directory ${dataDir}`);
    const postgres = yield* ensurePostgres(progress);
    const etcd = yield* startEtcd(dataDir, progress);
    const node = options.node === true;
    const kube = yield* startKubeApiserver(dataDir, etcd.url, progress, node);
    const nodeAccess = kube.nodeAccess;
    const [controllerManager, openbao, scramPostgres, nodeState] = yield* Effect.all(
      [
        startKubeControllerManager(dataDir, kube.endpoint, kube.controllerManager, progress, node),
        startOpenBao(dataDir, progress).pipe(
          Effect.map((b) => ({ available: true as const, ...b, version: versions.openbaoRelease })),
          Effect.catchTag('TestbedError', (e) => {
            progress(`openbao UNAVAILABLE: ${e.message}`);
            return Effect.succeed({ available: false as const, reason: e.message });
          }),
        ),
        startScramPostgres(join(dataDir, 'pki'), kube.endpoint.caCert, progress).pipe(
          Effect.map((c) => ({ available: true as const, ...c })),
          Effect.catchTag('TestbedError', (e) => {
            progress(`postgresql (scram) UNAVAILABLE: ${e.message}`);
            return Effect.succeed({ available: false as const, reason: e.message });
          }),
        ),
        nodeAccess === undefined ? Effect.succeed(undefined) : startNode(dataDir, kube.endpoint, nodeAccess, progress),
      ],
      { concurrency: 'unbounded' },
    );
    const state: TestbedState = {
      pid: process.pid,
      startedAt: new Date().toISOString(),
      dataDir,
      kube: { ...kube.endpoint, version: versions.kubernetes, etcd: versions.etcd },
      controllerManager,
      postgres,
      openbao,
      scramPostgres,
      ...(nodeState === undefined ? {} : { node: nodeState }),
    };
    return state;
  });

// The operator machine: lstat of the one named kubeconfig (a symlink is not a regular file) and the caller's uid.
import { lstatSync } from 'node:fs';
import { Effect, Layer } from 'effect';
import { OperatorHost } from '../../application/ports.js';
import { GuardFailed } from '../../domain/errors.js';
import type { FileStat } from '../../domain/guards.js';

export const statKubeconfig = (
  path: string,
): Effect.Effect<{ readonly path: string; readonly stat: FileStat }, GuardFailed> =>
  Effect.try({
    try: () => {
      const st = lstatSync(path);
      return { path, stat: { isFile: st.isFile(), uid: st.uid, mode: st.mode & 0o7777 } };
    },
    catch: (e) =>
      new GuardFailed({
        code: 'KUBECONFIG_NOT_PRIVATE',
        check: 'kubeconfig',
        message: `${path}: ${(e as Error).message}`,
      }),
  });

export const callerUid = (): number => (typeof process.getuid === 'function' ? process.getuid() : -1);

export const OperatorHostLive = (kubeconfigPath: string): Layer.Layer<OperatorHost> =>
  Layer.succeed(
    OperatorHost,
    OperatorHost.of({ kubeconfig: statKubeconfig(kubeconfigPath), callerUid: Effect.sync(callerUid) }),
  );

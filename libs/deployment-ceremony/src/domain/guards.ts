import { Either } from 'effect';
import type { HeadVersion } from '../api/head.js';
import type { LockedManifest } from '../api/manifest.js';
import { digestOf } from './canonical-json.js';
import { GuardFailed, HeadRejected } from './errors.js';

/** What `stat` says about the kubeconfig (as an adapter reads it with lstat: a symlink is not a regular file). */
export interface FileStat {
  readonly isFile: boolean;
  readonly uid: number;
  /** st_mode permission and special bits (`mode & 0o7777`). */
  readonly mode: number;
}

/**
 * The owner-private kubeconfig: a regular file, owned by the calling user, mode 0600 or stricter — no group or
 * other bits, no owner execute, no setuid/setgid/sticky.
 */
export const checkKubeconfigPrivate = (
  path: string,
  stat: FileStat,
  callerUid: number,
): Either.Either<void, GuardFailed> => {
  const fail = (message: string) =>
    Either.left(
      new GuardFailed({ code: 'KUBECONFIG_NOT_PRIVATE', check: 'kubeconfig', message: `${path}: ${message}` }),
    );
  if (!stat.isFile) return fail('not a regular file');
  if (stat.uid !== callerUid) return fail(`owned by uid ${stat.uid}, not by the caller (uid ${callerUid})`);
  const disallowed = stat.mode & 0o7177;
  if (disallowed !== 0)
    return fail(`mode ${(stat.mode & 0o7777).toString(8).padStart(4, '0')} is not 0600 or stricter`);
  return Either.void;
};

/** The cluster is the recorded one: namespace kube-system has the recorded UID. */
export const checkClusterUid = (observed: string, recorded: string): Either.Either<void, GuardFailed> =>
  observed === recorded
    ? Either.void
    : Either.left(
        new GuardFailed({
          code: 'CLUSTER_UID_MISMATCH',
          check: 'cluster-uid',
          message: `kube-system has UID ${observed}; the deployment records ${recorded}`,
        }),
      );

/** The manifest's canonical digest and catalogue are exactly its lock. */
export const checkLock = (locked: LockedManifest): Either.Either<void, GuardFailed> => {
  const digest = digestOf(locked.manifest);
  if (digest !== locked.lock.manifestDigest) {
    return Either.left(
      new GuardFailed({
        code: 'LOCK_MISMATCH',
        check: 'lock',
        message: `manifest digest ${digest} is not the locked ${locked.lock.manifestDigest}`,
      }),
    );
  }
  if (locked.manifest.catalogue !== locked.lock.catalogue) {
    return Either.left(
      new GuardFailed({
        code: 'LOCK_MISMATCH',
        check: 'lock',
        message: `manifest catalogue ${locked.manifest.catalogue} is not the locked ${locked.lock.catalogue}`,
      }),
    );
  }
  return Either.void;
};

/** The Head is exactly the expected one: generation and opaque resourceVersion (equality only). */
export const checkExpectedHead = (observed: HeadVersion, expected: HeadVersion): Either.Either<void, HeadRejected> =>
  observed.generation === expected.generation && observed.resourceVersion === expected.resourceVersion
    ? Either.void
    : Either.left(
        new HeadRejected({
          code: 'HEAD_MISMATCH',
          message: `Head is generation ${observed.generation} at resourceVersion ${observed.resourceVersion}; expected generation ${expected.generation} at ${expected.resourceVersion}`,
        }),
      );

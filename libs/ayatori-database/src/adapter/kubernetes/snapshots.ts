// The objects this process last read from (or wrote to) the API server, per client (decision 0380).
//
// Invariants, before mechanisms:
// - Only objects that came from the API server directly (an uncached GET, or the answer of our own write) are kept,
//   one per object key — never a watch cache. A decision is still taken on an uncached read (§3.8, seed "读取绑定判断
//   使用 APIReader").
// - `at(kind, key, uid, resourceVersion)` answers an object only when it is exactly the snapshot the use case decided
//   on (same UID and resourceVersion). A resourceVersion names one stored state of one object, so that object is what
//   the seed's re-read would have returned if nothing changed since; if something did change, the write we send
//   carries the snapshot's resourceVersion (and UID) and the API server refuses it with 409 — the fence is the
//   server's own compare-and-swap, atomically, instead of a GET followed by a write that can still race.
// - `ownWrite(object)` is true when the object is at the resourceVersion that one of our writes produced: a watch
//   event for it carries nothing the writing round did not already continue from.
import type { KubeClientService, KubeObject } from '@homelab/kube';

export interface Snapshots {
  /** Keep what the API server answered (a direct read or the answer of a write). */
  readonly remember: (kind: string, object: KubeObject, written?: boolean) => KubeObject;
  /** The object is gone (NotFound or deleted by us). */
  readonly forget: (kind: string, name: string, namespace?: string) => void;
  /** The kept object when it is exactly at `uid`/`revision`; otherwise `undefined` (re-read then). */
  readonly at: (
    kind: string,
    name: string,
    uid: string,
    revision: string,
    namespace?: string,
  ) => KubeObject | undefined;
  /** The object is at a resourceVersion our own write produced. */
  readonly ownWrite: (kind: string, object: KubeObject) => boolean;
}

const keyOf = (kind: string, name: string, namespace?: string) => `${kind}/${namespace ?? ''}/${name}`;

export const makeSnapshots = (): Snapshots => {
  const objects = new Map<string, KubeObject>();
  const written = new Map<string, string>();
  return {
    remember: (kind, object, wrote = false) => {
      const key = keyOf(kind, object.metadata.name ?? '', object.metadata.namespace);
      objects.set(key, object);
      if (wrote && object.metadata.resourceVersion !== undefined) written.set(key, object.metadata.resourceVersion);
      return object;
    },
    forget: (kind, name, namespace) => {
      const key = keyOf(kind, name, namespace);
      objects.delete(key);
      written.delete(key);
    },
    at: (kind, name, uid, revision, namespace) => {
      const o = objects.get(keyOf(kind, name, namespace));
      return o !== undefined && o.metadata.uid === uid && o.metadata.resourceVersion === revision ? o : undefined;
    },
    ownWrite: (kind, object) => {
      const rv = written.get(keyOf(kind, object.metadata.name ?? '', object.metadata.namespace));
      return rv !== undefined && rv === object.metadata.resourceVersion;
    },
  };
};

const perClient = new WeakMap<KubeClientService, Snapshots>();

/** One store per client: the binding, provisioning and instance adapters and the controllers share it. */
export const snapshotsFor = (kube: KubeClientService): Snapshots => {
  const found = perClient.get(kube);
  if (found !== undefined) return found;
  const made = makeSnapshots();
  perClient.set(kube, made);
  return made;
};

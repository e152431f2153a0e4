// The digest that binds an apply to the plan the user reviewed (TC-35; issue 17 hole 7; decision 0200). It covers
// what the plan was computed from — the caller, the desired objects, the prune scope, and the resourceVersion (or
// absence) of every object the plan read — and the plan itself. Equal digests ⇒ the apply computes the same steps
// bound to the same versions; any change in the cluster or the request changes it. HMAC-SHA256 under the control
// plane's key: the digest reveals nothing of the (possibly sensitive) values it covers and cannot be forged. Pure.
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';

export interface PlanBasis {
  readonly actor: string;
  /** The desired objects as the plan compares them (owner set, masks resolved). */
  readonly objects: ReadonlyArray<unknown>;
  readonly prune?: unknown;
  /** `kind/namespace/name` → the resourceVersion the plan read, or null when the object was absent. */
  readonly reads: ReadonlyArray<readonly [string, string | null]>;
  /** The plan as answered (differences, summary, warnings), without its digest. */
  readonly result: unknown;
}

const canonical = (v: unknown): unknown =>
  v !== null && typeof v === 'object'
    ? Array.isArray(v)
      ? v.map(canonical)
      : Object.fromEntries(
          Object.keys(v as object)
            .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
            .sort()
            .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
        )
    : v;

export const planDigest = (key: Uint8Array, basis: PlanBasis): string => {
  const reads = [...basis.reads].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const text = JSON.stringify(canonical({ v: 1, ...basis, reads }));
  return `hmac-sha256:${Buffer.from(hmac(sha256, key, new TextEncoder().encode(text))).toString('hex')}`;
};

// Volume `spec.size` on the real API server (seed 000 §6.4, §5.7; decision 0240): the claim requests the Volume's
// size (absent: 1Gi); a malformed or zero size and a smaller size than the volume has are refused at write time as
// `invalid_field` naming `spec.size`, with nothing written; a larger size is asked of the API server, whose refusal
// (the test bed has no storage class and no provisioner, so no claim here is ever bound) is the Volume's Reconciled
// reason `ExpansionRefused`; a smaller size written past the control plane is never applied (`ShrinkRefused`).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Either } from 'effect';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { API, type AppRuntime, harness, makeAppRuntime, releaseKosGates } from './app-support.js';
import { installKosCrds } from './support.js';

const ns = useNamespace('volsize');
let rt: AppRuntime;
let h: ReturnType<typeof harness>;

beforeAll(async () => {
  await installKosCrds();
  rt = makeAppRuntime();
  h = harness(rt);
});
afterAll(async () => {
  await releaseKosGates(ns.name);
  await rt.dispose();
});

const volume = (name: string, spec: Record<string, unknown>, resourceVersion?: string) => ({
  apiVersion: API,
  kind: 'Volume',
  metadata: { name, namespace: ns.name, ...(resourceVersion !== undefined ? { resourceVersion } : {}) },
  spec,
});
const claimSize = async (name: string) =>
  (
    (await h.get({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ns.name, name }))?.['spec'] as
      { resources?: { requests?: { storage?: string } } } | undefined
  )?.resources?.requests?.storage;
const volumeOf = (name: string) => h.get({ apiVersion: API, kind: 'Volume', namespace: ns.name, name });
const reconciled = async (name: string) =>
  (
    ((await volumeOf(name))?.['status'] as { conditions?: Array<{ type: string; reason: string; message: string }> })
      ?.conditions ?? []
  ).find((c) => c.type === 'Reconciled');
const fieldsOfLeft = (r: Either.Either<unknown, unknown>) =>
  Either.isLeft(r) ? (r.left as { code: string; causes?: Array<{ field: string }> }) : undefined;

describe('Volume spec.size (decision 0240)', () => {
  it('the claim requests the Volume size; a Volume without one gets 1Gi', async () => {
    expect(Either.isRight(await h.create(ns.name, 'Volume', volume('sized', { size: '5Gi' })))).toBe(true);
    expect(Either.isRight(await h.create(ns.name, 'Volume', volume('plain', {})))).toBe(true);
    await h.volumeRound(ns.name, 'sized');
    await h.volumeRound(ns.name, 'plain');
    expect(await claimSize('sized')).toBe('5Gi');
    expect(await claimSize('plain')).toBe('1Gi');
    expect((await reconciled('sized'))?.reason).toBe('ClaimNotBound');
  });

  it('a malformed, zero or too large size is invalid_field spec.size and nothing is stored', async () => {
    for (const size of ['abc', '0', '5 Gi', '9Ei']) {
      const e = fieldsOfLeft(await h.create(ns.name, 'Volume', volume('bad', { size })));
      expect(e?.code, size).toBe('invalid_field');
      expect(
        e?.causes?.map((c) => c.field),
        size,
      ).toContain('spec.size');
    }
    expect(await volumeOf('bad')).toBeUndefined();
  });

  it('a smaller size is refused at write time naming spec.size; the Volume and its claim keep theirs', async () => {
    await h.create(ns.name, 'Volume', volume('shrink', { size: '2Gi' }));
    await h.volumeRound(ns.name, 'shrink');
    const before = await volumeOf('shrink');
    const e = fieldsOfLeft(
      await h.update(
        ns.name,
        'Volume',
        'shrink',
        volume('shrink', { size: '1024Mi' }, before?.metadata.resourceVersion),
      ),
    );
    expect(e?.code).toBe('invalid_field');
    expect(e?.causes?.map((c) => c.field)).toEqual(['spec.size']);
    expect((await volumeOf('shrink'))?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion);
    expect(await claimSize('shrink')).toBe('2Gi');
    // The same size spelled differently is not a shrink.
    const same = await h.update(
      ns.name,
      'Volume',
      'shrink',
      volume('shrink', { size: '2048Mi' }, before?.metadata.resourceVersion),
    );
    expect(Either.isRight(same)).toBe(true);
  });

  it('a claim left behind (after an uninstall) also bounds a new Volume of the same name from below', async () => {
    await h.create(ns.name, 'Volume', volume('kept', { size: '3Gi' }));
    await h.volumeRound(ns.name, 'kept');
    await kubeRequest('DELETE', `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/volumes/kept`);
    await h.volumeRound(ns.name, 'kept'); // nothing references it: the deletion gate opens (decision 0395)
    expect(await claimSize('kept')).toBe('3Gi');
    const e = fieldsOfLeft(await h.create(ns.name, 'Volume', volume('kept', { size: '1Gi' })));
    expect(e?.causes?.map((c) => c.field)).toEqual(['spec.size']);
    expect(await volumeOf('kept')).toBeUndefined();
  });

  it('growing an unbound claim is refused by the API server: Reconciled ExpansionRefused, the claim keeps its size', async () => {
    await h.create(ns.name, 'Volume', volume('grow', { size: '1Gi' }));
    await h.volumeRound(ns.name, 'grow');
    const v = await volumeOf('grow');
    expect(
      Either.isRight(
        await h.update(ns.name, 'Volume', 'grow', volume('grow', { size: '4Gi' }, v?.metadata.resourceVersion)),
      ),
    ).toBe(true);
    expect(await h.volumeRound(ns.name, 'grow')).toEqual({ state: 'active' });
    const c = await reconciled('grow');
    expect(c?.reason).toBe('ExpansionRefused');
    expect(c?.message).toContain('4Gi');
    expect(await claimSize('grow')).toBe('1Gi');
  });

  it('a smaller size written past the control plane is never applied: Reconciled ShrinkRefused', async () => {
    await h.create(ns.name, 'Volume', volume('direct', { size: '2Gi' }));
    await h.volumeRound(ns.name, 'direct');
    const r = await kubeRequest(
      'PATCH',
      `/apis/kos.tsic.top/v1beta1/namespaces/${ns.name}/volumes/direct`,
      { spec: { size: '1Gi' } },
      'application/merge-patch+json',
    );
    expect(r.status).toBe(200);
    await h.volumeRound(ns.name, 'direct');
    expect((await reconciled('direct'))?.reason).toBe('ShrinkRefused');
    expect(await claimSize('direct')).toBe('2Gi');
  });
});

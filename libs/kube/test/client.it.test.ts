// KubeClient against the real kube-apiserver of the test bed: CRUD, optimistic concurrency, status subresource,
// server-side apply, patches, preconditioned / dry-run / finalizer deletes, typed errors, discovery, watch.
import { useNamespace } from '@homelab/testbed/vitest';
import { Chunk, Effect, Stream } from 'effect';
import { describe, expect, it, vi } from 'vitest';
import { KubeClient, type KubeObject } from '../src/index.js';
import { configMap, useKube, useWidgetCrd } from './support.js';

const ns = useNamespace('kube-client');
const { run, fail, failWith } = useKube();
const crd = useWidgetCrd(run);
const K = KubeClient;

const widget = (name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: crd.apiVersion,
  kind: 'Widget',
  metadata: { name, namespace: ns.name },
  spec,
});
const cmRef = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name, name });

describe('discovery', () => {
  it('resolves kind → plural, scope and preferred version', async () => {
    const [cm, deploy, byPlural, lease, ns0] = await run(
      Effect.flatMap(K, (c) =>
        Effect.all([
          c.discovery.resolve({ kind: 'ConfigMap' }),
          c.discovery.resolve({ kind: 'Deployment' }),
          c.discovery.resolve({ kind: 'deployments' }),
          c.discovery.resolve({ kind: 'Lease' }),
          c.discovery.resolve({ kind: 'Namespace' }),
        ]),
      ),
    );
    expect(cm).toMatchObject({ group: '', version: 'v1', plural: 'configmaps', namespaced: true, preferred: true });
    expect(deploy).toMatchObject({ group: 'apps', version: 'v1', plural: 'deployments', namespaced: true });
    expect(deploy.subresources).toContain('status');
    expect(byPlural.kind).toBe('Deployment');
    expect(lease).toMatchObject({ group: 'coordination.k8s.io', plural: 'leases', preferred: true });
    expect(ns0).toMatchObject({ plural: 'namespaces', namespaced: false });
  });

  it('a kind served by two groups is ambiguous unless the group is named', async () => {
    // Event is served by the core group and by events.k8s.io.
    const e = await failWith(
      'AmbiguousKind',
      Effect.flatMap(K, (c) => c.discovery.resolve({ kind: 'Event' })),
    );
    expect(e.candidates).toEqual(['Event.core', 'Event.events.k8s.io']);
    const core = await run(Effect.flatMap(K, (c) => c.discovery.resolve({ kind: 'Event', group: '' })));
    expect(core).toMatchObject({ group: '', plural: 'events' });
  });

  it('an unknown kind is NoKindMatch; a freshly installed CRD is found', async () => {
    const e = await fail(
      Effect.flatMap(K, (c) => c.get({ apiVersion: 'nope.example.com/v1', kind: 'Nope', name: 'x' })),
    );
    expect(e).toMatchObject({ _tag: 'NoKindMatch', kind: 'Nope' });
    const w = await run(Effect.flatMap(K, (c) => c.discovery.resolve({ kind: 'Widget', group: crd.group })));
    expect(w).toMatchObject({ plural: 'widgets', version: 'v1', namespaced: true });
    expect(w.subresources).toContain('status');
  });
});

describe('create / get / list', () => {
  it('creates, reads back, and lists by label and field selector', async () => {
    await run(
      Effect.flatMap(K, (c) =>
        Effect.forEach(['a', 'b', 'c'], (n) =>
          c.create(configMap(ns.name, `sel-${n}`, { n }, { tier: n === 'c' ? 'back' : 'front' })),
        ),
      ),
    );
    const got = await run(Effect.flatMap(K, (c) => c.get(cmRef('sel-a'))));
    expect(got).toMatchObject({ kind: 'ConfigMap', data: { n: 'a' } });
    expect(got.metadata.uid).toMatch(/[0-9a-f-]{36}/);
    const front = await run(
      Effect.flatMap(K, (c) =>
        c.list({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name }, { labelSelector: 'tier=front' }),
      ),
    );
    expect(front.items.map((i) => i.metadata.name).sort()).toEqual(['sel-a', 'sel-b']);
    expect(front.items[0]).toMatchObject({ apiVersion: 'v1', kind: 'ConfigMap' });
    const byName = await run(
      Effect.flatMap(K, (c) =>
        c.list({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name }, { fieldSelector: 'metadata.name=sel-c' }),
      ),
    );
    expect(byName.items.map((i) => i.metadata.name)).toEqual(['sel-c']);
  });

  it('pages with limit/continue, and listAll follows the continue tokens', async () => {
    await run(
      Effect.flatMap(K, (c) =>
        Effect.forEach([1, 2, 3, 4, 5], (i) => c.create(configMap(ns.name, `page-${i}`, {}, { paged: 'yes' }))),
      ),
    );
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name };
    const first = await run(Effect.flatMap(K, (c) => c.list(ref, { labelSelector: 'paged=yes', limit: 2 })));
    expect(first.items).toHaveLength(2);
    expect(first.metadata.continue).toBeTruthy();
    const second = await run(
      Effect.flatMap(K, (c) =>
        c.list(ref, { labelSelector: 'paged=yes', limit: 2, continue: first.metadata.continue ?? '' }),
      ),
    );
    expect(second.items).toHaveLength(2);
    expect(second.items[0]?.metadata.name).not.toBe(first.items[0]?.metadata.name);
    const all = await run(Effect.flatMap(K, (c) => c.listAll(ref, { labelSelector: 'paged=yes', limit: 2 })));
    expect(all.items.map((i) => i.metadata.name).sort()).toEqual(['page-1', 'page-2', 'page-3', 'page-4', 'page-5']);
    expect(all.metadata.continue).toBeUndefined();
  });

  it('create of a taken name is AlreadyExists; get of a missing one is NotFound', async () => {
    await run(Effect.flatMap(K, (c) => c.create(configMap(ns.name, 'dup'))));
    expect(await fail(Effect.flatMap(K, (c) => c.create(configMap(ns.name, 'dup'))))).toMatchObject({
      _tag: 'AlreadyExists',
    });
    const nf = await fail(Effect.flatMap(K, (c) => c.get(cmRef('does-not-exist'))));
    expect(nf).toMatchObject({ _tag: 'NotFound', target: { verb: 'get', name: 'does-not-exist' } });
  });

  it('a namespaced kind addressed without a namespace is refused before any request', async () => {
    const e = await failWith(
      'InvalidRequest',
      Effect.flatMap(K, (c) => c.get({ apiVersion: 'v1', kind: 'ConfigMap', name: 'x' })),
    );
    expect(e.message).toContain('namespaced');
  });

  it('an invalid object is Invalid with field causes', async () => {
    const e = await failWith(
      'Invalid',
      Effect.flatMap(K, (c) => c.create(configMap(ns.name, 'Bad_Name'))),
    );
    expect(e.causes.map((c) => c.field)).toContain('metadata.name');
  });

  it('a CEL validation rule of a CRD rejects a bad object with its message', async () => {
    const e = await failWith(
      'Invalid',
      Effect.flatMap(K, (c) => c.create(widget('too-big', { size: 101 }))),
    );
    expect(e.causes.map((c) => c.message).join(' ')).toContain('size must be at most 100');
  });
});

describe('update (optimistic) and status', () => {
  it('a stale resourceVersion is Conflict carrying the current object', async () => {
    const created = await run(Effect.flatMap(K, (c) => c.create(configMap(ns.name, 'occ', { v: '1' }))));
    const second = await run(Effect.flatMap(K, (c) => c.update({ ...created, data: { v: '2' } })));
    expect(second.metadata.resourceVersion).not.toBe(created.metadata.resourceVersion);
    const e = await failWith(
      'Conflict',
      Effect.flatMap(K, (c) => c.update({ ...created, data: { v: 'stale' } })),
    );
    const current = e.current;
    expect(current?.metadata.resourceVersion).toBe(second.metadata.resourceVersion);
    expect(current?.['data']).toEqual({ v: '2' });
  });

  it('update without resourceVersion is refused before any request', async () => {
    const e = await fail(Effect.flatMap(K, (c) => c.update(configMap(ns.name, 'occ', { v: 'blind' }))));
    expect(e).toMatchObject({ _tag: 'InvalidRequest' });
  });

  it('status goes through the status subresource only', async () => {
    const w = await run(Effect.flatMap(K, (c) => c.create(widget('st', { size: 1 }))));
    // The main resource ignores status; the status subresource ignores spec.
    const viaMain = await run(Effect.flatMap(K, (c) => c.update({ ...w, status: { phase: 'ignored' } })));
    expect(viaMain['status']).toBeUndefined();
    const viaStatus = await run(
      Effect.flatMap(K, (c) => c.updateStatus({ ...viaMain, spec: { size: 99 }, status: { phase: 'Ready' } })),
    );
    expect(viaStatus['status']).toEqual({ phase: 'Ready' });
    expect(viaStatus['spec']).toEqual({ size: 1 });
    expect(viaStatus.metadata.generation).toBe(viaMain.metadata.generation);
    const stale = await fail(Effect.flatMap(K, (c) => c.updateStatus({ ...viaMain, status: { phase: 'stale' } })));
    expect(stale).toMatchObject({ _tag: 'Conflict' });
  });
});

describe('server-side apply and patches', () => {
  it('conflicting field managers → typed Conflict naming the field; force takes ownership', async () => {
    const obj = (v: string) => configMap(ns.name, 'ssa', { owner: v });
    const a = await run(Effect.flatMap(K, (c) => c.apply(obj('alice'), { fieldManager: 'alice' })));
    expect(a['data']).toEqual({ owner: 'alice' });
    const e = await failWith(
      'Conflict',
      Effect.flatMap(K, (c) => c.apply(obj('bob'), { fieldManager: 'bob' })),
    );
    const causes = e.causes;
    expect(causes[0]).toMatchObject({ reason: 'FieldManagerConflict', field: '.data.owner' });
    expect(causes[0]?.message).toContain('alice');
    expect(e.current?.['data']).toEqual({ owner: 'alice' });
    const forced = await run(Effect.flatMap(K, (c) => c.apply(obj('bob'), { fieldManager: 'bob', force: true })));
    expect(forced['data']).toEqual({ owner: 'bob' });
    const managers = (forced.metadata.managedFields as Array<{ manager: string }>).map((m) => m.manager);
    expect(managers).toContain('bob');
    expect(managers).not.toContain('alice');
  });

  it('apply to the status subresource, and dry-run apply persists nothing', async () => {
    await run(
      Effect.flatMap(K, (c) =>
        c.create({
          apiVersion: crd.apiVersion,
          kind: 'Widget',
          metadata: { name: 'ssa-st', namespace: ns.name },
          spec: { size: 2 },
        }),
      ),
    );
    const st = await run(
      Effect.flatMap(K, (c) =>
        c.apply(
          {
            apiVersion: crd.apiVersion,
            kind: 'Widget',
            metadata: { name: 'ssa-st', namespace: ns.name },
            status: { ok: true },
          },
          { fieldManager: 'ctl', subresource: 'status' },
        ),
      ),
    );
    expect(st['status']).toEqual({ ok: true });
    const before = await run(
      Effect.flatMap(K, (c) =>
        c.get({ apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name, name: 'ssa-st' }),
      ),
    );
    const dry = await run(
      Effect.flatMap(K, (c) =>
        c.apply(
          {
            apiVersion: crd.apiVersion,
            kind: 'Widget',
            metadata: { name: 'ssa-st', namespace: ns.name },
            spec: { size: 3 },
          },
          { fieldManager: 'ctl', dryRun: true, force: true },
        ),
      ),
    );
    expect(dry['spec']).toMatchObject({ size: 3 });
    const after = await run(
      Effect.flatMap(K, (c) =>
        c.get({ apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name, name: 'ssa-st' }),
      ),
    );
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after['spec']).toEqual({ size: 2 });
  });

  it('JSON merge patch and JSON patch (a failing test op is refused)', async () => {
    await run(Effect.flatMap(K, (c) => c.create(configMap(ns.name, 'patchme', { a: '1', b: '2' }))));
    const merged = await run(
      Effect.flatMap(K, (c) => c.patch(cmRef('patchme'), { type: 'merge', patch: { data: { a: 'x', b: null } } })),
    );
    expect(merged['data']).toEqual({ a: 'x' });
    const jp = await run(
      Effect.flatMap(K, (c) =>
        c.patch(cmRef('patchme'), {
          type: 'json',
          patch: [
            { op: 'test', path: '/data/a', value: 'x' },
            { op: 'add', path: '/data/c', value: '3' },
          ],
        }),
      ),
    );
    expect(jp['data']).toEqual({ a: 'x', c: '3' });
    const bad = await failWith(
      'Invalid',
      Effect.flatMap(K, (c) =>
        c.patch(cmRef('patchme'), { type: 'json', patch: [{ op: 'test', path: '/data/a', value: 'nope' }] }),
      ),
    );
    expect(bad.status?.code).toBe(422);
  });
});

describe('delete', () => {
  it('preconditioned delete on a replaced UID → Conflict; the new object survives', async () => {
    const old = await run(Effect.flatMap(K, (c) => c.create(configMap(ns.name, 'replaced'))));
    await run(Effect.flatMap(K, (c) => c.delete(cmRef('replaced'))));
    const fresh = await run(Effect.flatMap(K, (c) => c.create(configMap(ns.name, 'replaced', { gen: '2' }))));
    expect(fresh.metadata.uid).not.toBe(old.metadata.uid);
    const e = await failWith(
      'Conflict',
      Effect.flatMap(K, (c) => c.delete(cmRef('replaced'), { preconditions: { uid: old.metadata.uid ?? '' } })),
    );
    expect(e.message).toContain('UID in the precondition');
    expect(e.current?.metadata.uid).toBe(fresh.metadata.uid);
    const still = await run(Effect.flatMap(K, (c) => c.get(cmRef('replaced'))));
    expect(still.metadata.uid).toBe(fresh.metadata.uid);
  });

  it('a stale resourceVersion precondition → Conflict; matching preconditions delete', async () => {
    const v1 = await run(Effect.flatMap(K, (c) => c.create(configMap(ns.name, 'rvpre', { v: '1' }))));
    const v2 = await run(Effect.flatMap(K, (c) => c.update({ ...v1, data: { v: '2' } })));
    const e = await fail(
      Effect.flatMap(K, (c) =>
        c.delete(cmRef('rvpre'), { preconditions: { resourceVersion: v1.metadata.resourceVersion ?? '' } }),
      ),
    );
    expect(e).toMatchObject({ _tag: 'Conflict' });
    const ok = await run(
      Effect.flatMap(K, (c) =>
        c.delete(cmRef('rvpre'), {
          preconditions: { uid: v2.metadata.uid ?? '', resourceVersion: v2.metadata.resourceVersion ?? '' },
        }),
      ),
    );
    expect(ok._tag).toBe('Deleted');
    expect(await fail(Effect.flatMap(K, (c) => c.get(cmRef('rvpre'))))).toMatchObject({ _tag: 'NotFound' });
  });

  it('dry-run delete changes nothing', async () => {
    const o = await run(Effect.flatMap(K, (c) => c.create(configMap(ns.name, 'dry'))));
    const r = await run(
      Effect.flatMap(K, (c) => c.delete(cmRef('dry'), { dryRun: ['All'], propagationPolicy: 'Background' })),
    );
    expect(r._tag).toBe('Deleted');
    const after = await run(Effect.flatMap(K, (c) => c.get(cmRef('dry'))));
    expect(after.metadata.resourceVersion).toBe(o.metadata.resourceVersion);
    expect(after.metadata.deletionTimestamp).toBeUndefined();
  });

  it('a finalizer keeps the object Pending until it is removed; Foreground adds foregroundDeletion', async () => {
    await run(
      Effect.flatMap(K, (c) =>
        c.create({
          ...configMap(ns.name, 'fin'),
          metadata: { name: 'fin', namespace: ns.name, finalizers: ['kube.test/hold'] },
        }),
      ),
    );
    const r = await run(Effect.flatMap(K, (c) => c.delete(cmRef('fin'), { propagationPolicy: 'Foreground' })));
    expect(r._tag).toBe('Pending');
    const pending = r._tag === 'Pending' ? r.object : undefined;
    expect(pending?.metadata.deletionTimestamp).toBeTruthy();
    expect(pending?.metadata.finalizers).toEqual(expect.arrayContaining(['kube.test/hold', 'foregroundDeletion']));
    // The test bed's garbage collector removes foregroundDeletion (nothing depends on the object); ours still holds it.
    await vi.waitFor(
      async () =>
        expect((await run(Effect.flatMap(K, (c) => c.get(cmRef('fin'))))).metadata.finalizers).toEqual([
          'kube.test/hold',
        ]),
      {
        timeout: 30_000,
        interval: 100,
      },
    );
    await run(
      Effect.flatMap(K, (c) => c.patch(cmRef('fin'), { type: 'merge', patch: { metadata: { finalizers: null } } })),
    );
    expect(await fail(Effect.flatMap(K, (c) => c.get(cmRef('fin'))))).toMatchObject({ _tag: 'NotFound' });
  });

  it('delete of a missing object is NotFound', async () => {
    expect(await fail(Effect.flatMap(K, (c) => c.delete(cmRef('never-was'))))).toMatchObject({ _tag: 'NotFound' });
  });
});

describe('watch', () => {
  it('streams ADDED / MODIFIED / DELETED from a resourceVersion', async () => {
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name };
    const start = await run(Effect.flatMap(K, (c) => c.list(ref, { limit: 1 })));
    const events = await run(
      Effect.gen(function* () {
        const c = yield* K;
        const collect = yield* c
          .watch(ref, {
            resourceVersion: start.metadata.resourceVersion ?? '',
            fieldSelector: 'metadata.name=watched',
            allowWatchBookmarks: false,
          })
          .pipe(Stream.take(3), Stream.runCollect, Effect.fork);
        const o = yield* c.create(configMap(ns.name, 'watched', { v: '1' }));
        yield* c.update({ ...o, data: { v: '2' } });
        yield* c.delete(cmRef('watched'));
        return Chunk.toArray(yield* collect.await.pipe(Effect.flatten));
      }),
    );
    expect(events.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
    expect(events[1]?.object['data']).toEqual({ v: '2' });
  });

  it('a watch from a resourceVersion older than the history is Gone (410)', async () => {
    const e = await fail(
      Effect.flatMap(K, (c) =>
        c
          .watch(
            { apiVersion: crd.apiVersion, kind: 'Widget', namespace: ns.name },
            { resourceVersion: '1', timeoutSeconds: 5 },
          )
          .pipe(Stream.runDrain),
      ),
    );
    expect(e).toMatchObject({ _tag: 'Gone' });
  });
});

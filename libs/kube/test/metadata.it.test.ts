// Metadata-only reads on the real API server. The client reports (`onAnswer`) every answer body and every watch
// line exactly as the server sent them, so "no `data` is ever received" is checked on the
// wire, not only in the cache: the server itself converts Secrets to PartialObjectMetadata(List), the canary
// values never arrive, and a data-only change still arrives as an Updated event (resourceVersion moves).
import { testbed, useNamespace } from '@homelab/testbed/vitest';
import { Chunk, Context, Effect, Layer, Option, Stream } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  KubeClient,
  type KubeClientService,
  type InformerEvent,
  type KubeObject,
  layerFromToken,
  makeMetadataInformer,
  type PartialObjectMetadata,
} from '../src/index.js';
import { useKube } from './support.js';

const ns = useNamespace('kube-meta');
const other = useNamespace('kube-meta-other');
const { run } = useKube();

interface Received {
  readonly path: string;
  readonly accept: string | undefined;
  readonly body: string;
}

/** A KubeClient (admin token) whose transport reports every answer body and watch line as received. */
const recordingClient = (received: Array<Received>) =>
  Effect.map(
    Layer.build(
      layerFromToken(testbed().kube, {
        onAnswer: (a) => void received.push({ path: a.path, accept: a.accept, body: a.text }),
      }),
    ),
    (ctx) => Context.get(ctx, KubeClient),
  );

const secret = (namespace: string, name: string, password: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, namespace },
  stringData: { username: 'meta-user', password },
});

const eventually = <A>(eff: Effect.Effect<A>, ok: (a: A) => boolean, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200; i++) {
      const a = yield* eff;
      if (ok(a)) return a;
      yield* Effect.sleep('50 millis');
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`);
  });

const canaries = [
  'META-CANARY-PRE-7f3a',
  'META-CANARY-LIVE-19c2',
  'META-CANARY-ROTATED-5d0e',
  'META-CANARY-OTHER-b81f',
] as const;
const leaks = (text: string) =>
  canaries.flatMap((c) => [c, Buffer.from(c).toString('base64')]).filter((c) => text.includes(c));

describe('metadata-only informer (PartialObjectMetadata)', () => {
  it('Secrets of one namespace: the server sends PartialObjectMetadataList / PartialObjectMetadata, no data ever arrives, create / data-only update / delete are seen, the other namespace is not', async () => {
    const received: Array<Received> = [];
    const result = await run(
      Effect.scoped(
        Effect.gen(function* () {
          const admin = yield* KubeClient;
          yield* admin.create(secret(ns.name, 'pre', canaries[0]));
          yield* admin.create(secret(other.name, 'elsewhere', canaries[3]));
          const client = yield* recordingClient(received);
          const events: Array<InformerEvent<PartialObjectMetadata>> = [];
          const inf = yield* makeMetadataInformer({ apiVersion: 'v1', kind: 'Secret', namespace: ns.name }).pipe(
            Effect.provide(Layer.succeed(KubeClient, client)),
          );
          yield* inf.addHandler((e) => Effect.sync(() => void events.push(e)));
          yield* inf.synced;
          const live = yield* admin.create(secret(ns.name, 'live', canaries[1]));
          // a change of data only: nothing in metadata but the resourceVersion moves
          yield* admin.update({
            ...live,
            data: {
              username: Buffer.from('meta-user').toString('base64'),
              password: Buffer.from(canaries[2]).toString('base64'),
            },
          });
          yield* admin.delete({ apiVersion: 'v1', kind: 'Secret', namespace: ns.name, name: 'live' });
          yield* eventually(
            Effect.sync(() => events.length),
            (n) => n >= 4,
            '4 events',
          );
          const cached = yield* inf.list;
          const pre = yield* inf.get(`${ns.name}/pre`);
          return { events, cached, pre, liveRv: live.metadata.resourceVersion };
        }),
      ),
    );

    expect(result.events.map((e) => `${e.type}:${e.object.metadata.name}`)).toEqual([
      'Added:pre',
      'Added:live',
      'Updated:live',
      'Deleted:live',
    ]);
    const updated = result.events[2];
    expect(
      updated?.type === 'Updated' &&
        updated.old.metadata.resourceVersion === result.liveRv &&
        updated.object.metadata.resourceVersion !== result.liveRv,
    ).toBe(true);
    // cache and handlers: the collection's kind, metadata only
    for (const o of [...result.events.map((e) => e.object), ...result.cached]) {
      expect(Object.keys(o).sort()).toEqual(['apiVersion', 'kind', 'metadata']);
      expect([o.apiVersion, o.kind]).toEqual(['v1', 'Secret']);
    }
    expect(result.cached.map((o) => o.metadata.name)).toEqual(['pre']);
    expect(Option.map(result.pre, (o) => o.metadata.namespace)).toEqual(Option.some(ns.name));

    // the wire: the server converted every Secret answer itself; no canary value, no `data`, no other namespace
    const secretTraffic = received.filter((r) => r.path.includes('/secrets'));
    const lists = secretTraffic.filter((r) => !r.path.includes('watch=true'));
    const lines = secretTraffic.filter((r) => r.path.includes('watch=true'));
    expect(lists.length).toBeGreaterThan(0);
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const r of secretTraffic) expect(r.path.startsWith(`/api/v1/namespaces/${ns.name}/secrets`)).toBe(true);
    for (const l of lists) {
      expect(l.accept).toBe('application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json');
      const body = JSON.parse(l.body) as { kind: string; items: Array<Record<string, unknown>> };
      expect(body.kind).toBe('PartialObjectMetadataList');
      for (const item of body.items) expect(item['kind']).toBe('PartialObjectMetadata');
    }
    for (const l of lines) {
      expect(l.accept).toBe('application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json');
      const ev = JSON.parse(l.body) as { type: string; object: Record<string, unknown> };
      expect(ev.object['kind']).toBe('PartialObjectMetadata');
      expect(Object.keys(ev.object).filter((k) => k !== 'kind' && k !== 'apiVersion' && k !== 'metadata')).toEqual([]);
    }
    expect(leaks(received.map((r) => r.body).join('\n'))).toEqual([]);
    expect(received.map((r) => r.body).join('\n')).not.toContain('elsewhere');
  });

  it('getMetadata / listMetadata / watchMetadata: metadata only; a missing object is NotFound; a watch from the list resourceVersion sees only what came after', async () => {
    const received: Array<Received> = [];
    const out = await run(
      Effect.scoped(
        Effect.gen(function* () {
          const admin = yield* KubeClient;
          yield* admin.create(secret(ns.name, 'single', canaries[0]));
          const client: KubeClientService = yield* recordingClient(received);
          const one = yield* client.getMetadata({
            apiVersion: 'v1',
            kind: 'Secret',
            namespace: ns.name,
            name: 'single',
          });
          const page = yield* client.listMetadata(
            { apiVersion: 'v1', kind: 'Secret', namespace: ns.name },
            { limit: 1 },
          );
          const all = yield* client.listAllMetadata(
            { apiVersion: 'v1', kind: 'Secret', namespace: ns.name },
            { limit: 1 },
          );
          const missing = yield* Effect.flip(
            client.getMetadata({ apiVersion: 'v1', kind: 'Secret', namespace: ns.name, name: 'absent' }),
          );
          const firstEvent = yield* client
            .watchMetadata(
              { apiVersion: 'v1', kind: 'Secret', namespace: ns.name },
              { resourceVersion: all.metadata.resourceVersion ?? '', timeoutSeconds: 10 },
            )
            .pipe(
              Stream.filter((e) => e.type !== 'BOOKMARK'),
              Stream.take(1),
              Stream.runCollect,
              Effect.map(Chunk.toReadonlyArray),
              Effect.fork,
            );
          yield* Effect.sleep('300 millis');
          yield* admin.create(secret(ns.name, 'watched', canaries[1]));
          const watched = yield* firstEvent.await;
          return { one, page, all, missing, watched };
        }),
      ),
    );
    expect(out.one).toMatchObject({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'single', namespace: ns.name },
    });
    expect(Object.keys(out.one).sort()).toEqual(['apiVersion', 'kind', 'metadata']);
    expect(out.page.items).toHaveLength(1);
    expect(out.page.metadata.continue).toBeTruthy();
    expect(out.all.items.length).toBeGreaterThanOrEqual(2);
    expect(out.all.items.every((i) => Object.keys(i).sort().join() === 'apiVersion,kind,metadata')).toBe(true);
    expect(out.missing._tag).toBe('NotFound');
    expect(out.watched._tag).toBe('Success');
    if (out.watched._tag === 'Success') {
      expect(out.watched.value.map((e) => `${e.type}:${e.object.metadata.name}`)).toEqual(['ADDED:watched']);
      expect(Object.keys(out.watched.value[0]?.object ?? {}).sort()).toEqual(['apiVersion', 'kind', 'metadata']);
    }
    expect(leaks(received.map((r) => r.body).join('\n'))).toEqual([]);
  });
});

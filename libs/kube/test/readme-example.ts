// The README's controller example, kept here so `typecheck` proves it compiles (not run by the tests).
import { Effect, Layer, Schema } from 'effect';
import {
  ControllerMetrics,
  ControllerMetricsLive,
  KubeClient,
  layerInCluster,
  makeMetadataInformer,
  ObjectMeta,
  runAsLeader,
  serveHealth,
  setCondition,
  startController,
  typedResource,
  updateStatusIfChanged,
  type KubeObject,
  type ObjectRef,
} from '../src/index.js';

const widgets = { apiVersion: 'example.com/v1', kind: 'Widget' };

const controller = startController<KubeObject, unknown, KubeClient>({
  name: 'widget',
  for: widgets,
  concurrency: 4,
  roundBudget: '10 seconds',
  predicate: (e) => e.type !== 'Updated' || e.old.metadata.generation !== e.object.metadata.generation,
  reconcile: (req) =>
    Effect.gen(function* () {
      const kube = yield* KubeClient;
      const w = yield* kube
        .get({ ...widgets, namespace: req.namespace, name: req.name })
        .pipe(Effect.catchTag('NotFound', () => Effect.succeed(undefined)));
      if (!w) return;
      const now = new Date().toISOString();
      const conditions = setCondition(
        undefined,
        { type: 'Ready', status: 'True', reason: 'Mirrored', message: '', observedGeneration: w.metadata.generation },
        now,
      );
      yield* updateStatusIfChanged(w, { ...(w['status'] as object), conditions });
      return { requeueAfter: '5 minutes' };
    }),
});

export const main = Effect.scoped(
  Effect.gen(function* () {
    const metrics = yield* ControllerMetrics;
    yield* serveHealth({ metrics }, { host: '0.0.0.0', port: 8080 });
    yield* runAsLeader(
      { namespace: 'kos-system', name: 'widget-controller', identity: process.env['POD_NAME'] ?? 'local' },
      Effect.zipRight(controller, Effect.never),
    );
  }),
).pipe(Effect.provide(Layer.mergeAll(layerInCluster(), ControllerMetricsLive())));

export const bump = (ref: ObjectRef) =>
  Effect.gen(function* () {
    const kube = yield* KubeClient;
    const cm = yield* kube.get(ref);
    return yield* kube.update({ ...cm, data: { ...(cm['data'] as object), n: '2' } });
  }).pipe(
    Effect.catchTag('Conflict', (e) => Effect.log(`lost the race; now at ${e.current?.metadata.resourceVersion}`)),
  );

const Settings = Schema.Struct({
  apiVersion: Schema.Literal('v1'),
  kind: Schema.Literal('ConfigMap'),
  metadata: ObjectMeta,
  data: Schema.Struct({ replicas: Schema.NumberFromString, mode: Schema.Literal('fast', 'safe') }),
});
const settings = typedResource({ apiVersion: 'v1', kind: 'ConfigMap' }, Settings);
export const scale = Effect.gen(function* () {
  const s = yield* settings.get('app-settings', 'apps');
  yield* settings.update({ ...s, data: { ...s.data, replicas: s.data.replicas + 1 } });
});

// metadata-only reads
export const secretNames = Effect.scoped(
  Effect.gen(function* () {
    const kube = yield* KubeClient;
    const page = yield* kube.listMetadata({ apiVersion: 'v1', kind: 'Secret', namespace: 'apps' }); // no data, ever
    const secrets = yield* makeMetadataInformer({ apiVersion: 'v1', kind: 'Secret', namespace: 'apps' }); // metadata cache
    yield* secrets.addHandler((e) =>
      Effect.log(`${e.type} ${e.object.metadata.name} @${e.object.metadata.resourceVersion}`),
    );
    return page.items.map((i) => i.metadata.name);
  }),
);

// A Schema-typed view of a kind on the real API server: decoded reads, encoded writes, and a server object that
// breaks the Schema surfacing as a DecodeFailure naming the field.
import { useNamespace } from '@homelab/testbed/vitest';
import { Effect, Schema } from 'effect';
import { describe, expect, it } from 'vitest';
import { KubeClient, ObjectMeta, typedResource } from '../src/index.js';
import { useKube } from './support.js';

const ns = useNamespace('kube-typed');
const { run, failWith } = useKube();

const Settings = Schema.Struct({
  apiVersion: Schema.Literal('v1'),
  kind: Schema.Literal('ConfigMap'),
  metadata: ObjectMeta,
  data: Schema.Struct({ replicas: Schema.NumberFromString, mode: Schema.Literal('fast', 'safe') }),
});
const settings = typedResource({ apiVersion: 'v1', kind: 'ConfigMap' }, Settings);

describe('typedResource', () => {
  it('encodes writes and decodes reads through the Schema', async () => {
    const created = await run(
      settings.create({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'typed', namespace: ns.name },
        data: { replicas: 3, mode: 'fast' },
      }),
    );
    expect(created.data.replicas).toBe(3);
    const raw = await run(
      Effect.flatMap(KubeClient, (c) =>
        c.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns.name, name: 'typed' }),
      ),
    );
    expect(raw['data']).toEqual({ replicas: '3', mode: 'fast' });
    const updated = await run(settings.update({ ...created, data: { replicas: 4, mode: 'safe' } }));
    expect(updated.data).toEqual({ replicas: 4, mode: 'safe' });
    expect((await run(settings.list(ns.name))).map((s) => s.data.replicas)).toEqual([4]);
  });

  it('an object that breaks the Schema is a DecodeFailure naming the field', async () => {
    await run(
      Effect.flatMap(KubeClient, (c) =>
        c.create({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'odd', namespace: ns.name },
          data: { replicas: 'many', mode: 'fast' },
        }),
      ),
    );
    const e = await failWith('DecodeFailure', settings.get('odd', ns.name));
    expect(e.message).toContain('replicas');
  });
});

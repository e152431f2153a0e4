// The library's typed client against the real controller: decoded answers, and failures as ControlPlaneError
// carrying the envelope. Also: writes, rejected ones included, leave audit records.
import { Effect, Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useNamespace } from '@homelab/testbed/vitest';
import { AuditLog, makeControlPlaneClient } from '@homelab/kos-kernel';
import type { ControllerHandle } from '../src/index.js';
import { app, prepareCluster, startTestController } from './support.js';

const ns = useNamespace('kos-client');
let cp: ControllerHandle;
beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController();
});
afterAll(async () => cp?.close());

describe('typed client', () => {
  it('create, get, update with the ETag version, list, delete; a conflict is a typed error with the envelope', async () => {
    const client = makeControlPlaneClient({ baseUrl: cp.url });
    const run = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(e));
    const created = await run(client.create('Application', app(ns.name, 'typed', { replicas: 1 })));
    expect(Either.isRight(created) && created.right.object.name).toBe('typed');
    const got = await run(client.get({ kind: 'Application', name: 'typed', namespace: ns.name }));
    if (Either.isLeft(got)) throw got.left;
    const version = (got.right.object as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
    const updated = await run(
      client.update(
        { kind: 'Application', name: 'typed', namespace: ns.name },
        app(ns.name, 'typed', { replicas: 2 }),
        version,
      ),
    );
    expect(Either.isRight(updated)).toBe(true);
    const stale = await run(
      client.update(
        { kind: 'Application', name: 'typed', namespace: ns.name },
        app(ns.name, 'typed', { replicas: 3 }),
        version,
      ),
    );
    expect(Either.isLeft(stale) && stale.left).toMatchObject({
      _tag: 'ControlPlaneError',
      status: 409,
      error: { code: 'conflict' },
    });
    const page = await run(client.list('Application', { namespace: ns.name }));
    expect(Either.isRight(page) && page.right.items.length).toBe(1);
    const current = Either.isRight(updated) ? (updated.right.object.resourceVersion as string) : '';
    expect(
      Either.isRight(await run(client.delete({ kind: 'Application', name: 'typed', namespace: ns.name }, current))),
    ).toBe(true);
    const down = await run(makeControlPlaneClient({ baseUrl: 'http://127.0.0.1:1' }).discovery());
    expect(Either.isLeft(down) && down.left.status).toBe(0);
  });

  it('every write leaves an audit record, rejected attempts included', async () => {
    const client = makeControlPlaneClient({ baseUrl: cp.url });
    await Effect.runPromise(Effect.either(client.create('Application', app(ns.name, 'audited', { replicas: -5 }))));
    const entries = await cp.runtime.runPromise(Effect.flatMap(AuditLog, (a) => a.entries));
    expect(entries.find((e) => e.verb === 'create' && e.object?.name === 'audited')).toMatchObject({
      outcome: 'rejected',
      code: 'invalid_field',
      actor: 'local-owner',
    });
    expect(
      entries.some(
        (e) => e.verb === 'update' && e.object?.name === 'typed' && e.outcome === 'rejected' && e.code === 'conflict',
      ),
    ).toBe(true);
    expect(entries.some((e) => e.verb === 'delete' && e.outcome === 'accepted')).toBe(true);
  });
});

// TC-118 deletion requires prior transfer, against the real API server: OwnedObjectsFromClusterLive finds the account's
// objects by spec.owner across namespaces — kernel kinds and extension kinds alike (decision 0445: every CRD labelled
// `kos.tsic.top/extension`, as the Installer writes it) — and Identity.deleteAccount refuses with
// account_has_objects + ownedObjects until they are transferred. The control-plane database is a real SQLite file.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect, Layer, ManagedRuntime } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, type KubeObject, layerFromToken } from '@homelab/kube';
import { eventually, installCrds, kubeRequest, testbed, useNamespace } from '@homelab/testbed/vitest';
import {
  accountReference,
  buildRegistry,
  checkDeclaration,
  extensionCrdsOf,
  Identity,
  IdentityModuleLive,
  type IdentityPorts,
  loadExtensions,
  OwnedObjects,
  OwnedObjectsFromClusterLive,
} from '../src/index.js';
import { accountWithPassword, ownerSession } from './identity-support.js';
import { installKosCrds } from './support.js';

const ns = useNamespace('kos-owned');
const NOTES_GROUP = `notes-${randomBytes(3).toString('hex')}.example.org`;
const dir = mkdtempSync(join(tmpdir(), 'kos-owned-'));
let rt: ManagedRuntime.ManagedRuntime<Identity | IdentityPorts | OwnedObjects | KubeClient, unknown>;
beforeAll(async () => {
  await installKosCrds();
  const { kube } = testbed();
  const kubeLayer = layerFromToken({ server: kube.server, token: kube.token, caCert: kube.caCert });
  const owned = OwnedObjectsFromClusterLive.pipe(Layer.provide(kubeLayer));
  rt = ManagedRuntime.make(
    Layer.mergeAll(IdentityModuleLive({ path: join(dir, 'cp.db') }).pipe(Layer.provide(owned)), owned, kubeLayer),
  );
});
afterAll(async () => {
  await kubeRequest('DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/notes.${NOTES_GROUP}`);
  await rt.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** The Owner's session: bootstrapped by the first test that asks, then reused (bootstrap runs once per database). */
let ownerToken: string | undefined;
const ownerOnce = Effect.suspend(() =>
  ownerToken !== undefined
    ? Effect.succeed({ token: ownerToken })
    : Effect.tap(ownerSession, (s) => Effect.sync(() => (ownerToken = s.token))),
);

const object = (kind: string, name: string, owner: string): KubeObject => ({
  apiVersion: 'kos.tsic.top/v1beta1',
  kind,
  metadata: { name, namespace: ns.name },
  spec: { owner },
});

describe('TC-118 deletion requires prior transfer (real API server)', () => {
  it('refuses with account_has_objects listing the owned objects; succeeds once they are transferred', async () => {
    const result = await rt.runPromise(
      Effect.gen(function* () {
        const identity = yield* Identity;
        const client = yield* KubeClient;
        const { token } = yield* ownerOnce;
        yield* accountWithPassword(token, 'frank', 'Member');
        const owner = yield* identity.authenticate(token, 'other');
        yield* client.create(object('Volume', 'frank-data', 'frank'));
        yield* client.create(object('BackupPolicy', 'frank-nightly', 'frank'));
        yield* client.create(object('Volume', 'other-data', 'someone-else'));
        const refused = yield* Effect.flip(identity.deleteAccount(owner, { name: 'frank', source: 'api' }));
        // transfer (as the global Owner would: spec.owner rewritten) and try again
        for (const [kind, name] of [
          ['Volume', 'frank-data'],
          ['BackupPolicy', 'frank-nightly'],
        ] as const)
          yield* client.patch(
            { apiVersion: 'kos.tsic.top/v1beta1', kind, namespace: ns.name, name },
            { type: 'merge', patch: { spec: { owner: 'owner' } } },
          );
        yield* identity.deleteAccount(owner, { name: 'frank', source: 'api' });
        const gone = yield* Effect.flip(identity.updateAccount(owner, { name: 'frank', role: 'Guest', source: 'api' }));
        return { refused, gone };
      }),
    );
    expect(result.refused._tag).toBe('AccountHasObjects');
    const owned = result.refused._tag === 'AccountHasObjects' ? result.refused.ownedObjects : [];
    expect(
      owned
        .filter((o) => o.namespace === ns.name)
        .map((o) => `${o.kind}/${o.name}`)
        .sort(),
    ).toEqual(['BackupPolicy/frank-nightly', 'Volume/frank-data']);
    expect(result.gone).toMatchObject({ _tag: 'AccountNotFound', account: 'frank' });
    expect(accountReference('frank').kind).toBe('Account');
  });
});

describe('TC-118 with extension objects (decision 0445)', () => {
  it('TC-118: extension objects the account owns are listed beside kernel objects and refuse the deletion until transferred', async () => {
    // the CRD exactly as the Installer writes it for an activated component (it stays while disabled or kept)
    const declared = checkDeclaration(
      {
        id: 'owned-notes',
        version: '1.0.0',
        framework: '^1.0.0',
        contributes: { kinds: [{ group: NOTES_GROUP, version: 'v1', kind: 'Note', plural: 'notes' }] },
      },
      [],
    );
    const registry = buildRegistry(
      loadExtensions([
        {
          name: 'owned-notes',
          createdAt: '2026-01-01T00:00:00Z',
          ownership: 'managed',
          disabled: false,
          package: { _tag: 'Verified', declaration: declared },
        },
      ]),
    );
    await installCrds(extensionCrdsOf(registry.kinds, 'owned-notes') as never);
    // the API server's discovery lists a new kind a moment after the CRD is Established
    await eventually(
      'the Note kind is discovered',
      () =>
        rt.runPromise(
          Effect.flatMap(KubeClient, (c) => c.listAll({ apiVersion: `${NOTES_GROUP}/v1`, kind: 'Note' })).pipe(
            Effect.as(true),
            Effect.orElseSucceed(() => false),
          ),
        ),
      30_000,
      500,
    );
    const note = (name: string, owner: string): KubeObject => ({
      apiVersion: `${NOTES_GROUP}/v1`,
      kind: 'Note',
      metadata: { name, namespace: ns.name },
      spec: { owner, text: 'x' },
    });
    const result = await rt.runPromise(
      Effect.gen(function* () {
        const identity = yield* Identity;
        const client = yield* KubeClient;
        const { token } = yield* ownerOnce;
        yield* accountWithPassword(token, 'gina', 'Member');
        const owner = yield* identity.authenticate(token, 'other');
        yield* client.create(note('gina-shopping', 'gina'));
        yield* client.create(note('someone-elses', 'someone-else'));
        yield* client.create(object('Volume', 'gina-data', 'gina'));
        const refused = yield* Effect.flip(identity.deleteAccount(owner, { name: 'gina', source: 'api' }));
        yield* client.patch(
          { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Volume', namespace: ns.name, name: 'gina-data' },
          { type: 'merge', patch: { spec: { owner: 'owner' } } },
        );
        // the Volume alone is transferred: the Note still refuses the deletion
        const stillRefused = yield* Effect.flip(identity.deleteAccount(owner, { name: 'gina', source: 'api' }));
        yield* client.patch(
          { apiVersion: `${NOTES_GROUP}/v1`, kind: 'Note', namespace: ns.name, name: 'gina-shopping' },
          { type: 'merge', patch: { spec: { owner: 'owner' } } },
        );
        yield* identity.deleteAccount(owner, { name: 'gina', source: 'api' });
        return { refused, stillRefused };
      }),
    );
    const listed = (e: typeof result.refused) =>
      (e._tag === 'AccountHasObjects' ? e.ownedObjects : [])
        .filter((o) => o.namespace === ns.name)
        .map((o) => `${o.apiVersion} ${o.kind}/${o.name}`)
        .sort();
    expect(result.refused._tag).toBe('AccountHasObjects');
    expect(listed(result.refused)).toEqual([
      'kos.tsic.top/v1beta1 Volume/gina-data',
      `${NOTES_GROUP}/v1 Note/gina-shopping`,
    ]);
    expect(listed(result.stillRefused)).toEqual([`${NOTES_GROUP}/v1 Note/gina-shopping`]);
  });
});

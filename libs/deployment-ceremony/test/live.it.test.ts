/**
 * The ceremony on the real test bed kube-apiserver+etcd through the real adapters (KubernetesClusterLive over
 * @homelab/kube's transport, FileReceiptStoreLive, OperatorHostLive). Network faults are injected between the
 * client and the real server (`interpose`); the server itself is never simulated.
 */
import { chmodSync, readFileSync, statSync, symlinkSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { Effect, Exit, Option } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HeadVersion } from '../src/api/head.js';
import type { HeadRef, TargetIdentity } from '../src/api/identity.js';
import type { LockedManifest } from '../src/api/manifest.js';
import type { PreflightRecord, RetirementCommand } from '../src/api/retirement.js';
import type { SentRequest } from '../src/adapter/kubernetes/index.js';
import { applyRetirement } from '../src/application/apply.js';
import { auditStoredReceipt } from '../src/application/audit.js';
import { readHead } from '../src/application/head-store.js';
import { KubernetesCluster } from '../src/application/ports.js';
import { preflightRetirement } from '../src/application/preflight.js';
import { install, rollback, upgrade } from '../src/application/transitions.js';
import { canonicalJsonUnsafe } from '../src/domain/canonical-json.js';
import { checkRequestAllowed } from '../src/domain/request-allow-list.js';
import {
  cm,
  command,
  type Env,
  extraDeployment,
  interpose,
  kubeSystemUid,
  listFiles,
  liveManifest,
  lockManifest,
  makeWorkdir,
  other,
  runLive,
} from './live-fixture.js';
import { failureOf } from './helpers.js';

const ns = useNamespace('ceremony');
let work: ReturnType<typeof makeWorkdir>;
let clusterUid: string;

beforeAll(async () => {
  work = makeWorkdir();
  clusterUid = await kubeSystemUid();
});
afterAll(() => work.cleanup());

const cmPath = (name: string) => `/api/v1/namespaces/${ns.name}/configmaps/${name}`;
const value = <A, E>(exit: Exit.Exit<A, E>): A => {
  if (Exit.isSuccess(exit)) return exit.value;
  throw new Error(`expected success, got ${JSON.stringify(exit.cause)}`);
};

/** One deployment of its own in the test namespace: Head `<prefix>-head`, objects `<prefix>-…`. */
const deployment = async (prefix: string, manifest?: LockedManifest) => {
  const head: HeadRef = { namespace: ns.name, name: `${prefix}-head` };
  const env: Env = { kubeconfig: work.kubeconfig, receipts: work.receipts, head };
  const locked = manifest ?? liveManifest(ns.name, prefix);
  const installed = value(await runLive(install({ head, manifest: locked, clusterUid }), env, 'transition'));
  const v1: HeadVersion = { generation: installed.head.generation, resourceVersion: installed.resourceVersion };
  const cmd = (targets: ReadonlyArray<TargetIdentity>, expected: HeadVersion = v1): RetirementCommand =>
    command(clusterUid, head, locked, expected, targets);
  const preflight = async (c: RetirementCommand, extra: Parameters<typeof runLive>[3] = {}) =>
    runLive(preflightRetirement({ command: c, manifest: locked }), env, 'retirement', extra);
  const apply = async (c: RetirementCommand, record: PreflightRecord, extra: Parameters<typeof runLive>[3] = {}) =>
    runLive(applyRetirement({ command: c, manifest: locked, preflight: record }), env, 'retirement', extra);
  const headNow = async () => value(await runLive(readHead(head), env, 'retirement'));
  return { head, env, manifest: locked, v1, cmd, preflight, apply, headNow };
};

const receiptFiles = () => listFiles(work.receipts).filter((f) => f.startsWith('retirement-receipt-'));

describe('live gate (seed: install + retire one namespaced ConfigMap on a real API server)', () => {
  it('install 7 objects → Head generation 1; retire one ConfigMap → generation 2, inventory 6, object absent, real preconditioned DELETE, two audits pass, nothing left behind', async () => {
    const d = await deployment('gate');
    const before = await d.headNow();
    expect([before.head.generation, before.head.inventory.length, before.head.phase, before.head.transition]).toEqual([
      1,
      7,
      'committed',
      'install',
    ]);
    const live = await other.json<{ metadata: { uid: string; resourceVersion: string } }>(cmPath('gate-cm-1'));

    const sentPreflight: Array<SentRequest> = [];
    const pf = value(await d.preflight(d.cmd([cm(ns.name, 'gate-cm-1')]), { sent: sentPreflight }));
    expect(pf.record.targets[0]).toMatchObject({
      plural: 'configmaps',
      preconditions: { uid: live.metadata.uid, resourceVersion: live.metadata.resourceVersion },
      dryRun: { dryRun: ['All'], propagationPolicy: 'Background' },
    });
    // The preflight changed nothing: same resourceVersion, Head untouched.
    expect((await other.json<typeof live>(cmPath('gate-cm-1'))).metadata.resourceVersion).toBe(
      live.metadata.resourceVersion,
    );
    expect((await d.headNow()).resourceVersion).toBe(before.resourceVersion);
    expect(new Set(sentPreflight.map((r) => r.method))).toEqual(new Set(['GET', 'DELETE']));

    const sent: Array<SentRequest> = [];
    const out = value(await d.apply(d.cmd([cm(ns.name, 'gate-cm-1')]), pf.record, { sent }));
    expect(out.path).toBe('applied');
    const deletes = sent.filter((r) => r.method === 'DELETE');
    expect(deletes).toEqual([
      {
        method: 'DELETE',
        path: cmPath('gate-cm-1'),
        body: {
          apiVersion: 'v1',
          kind: 'DeleteOptions',
          propagationPolicy: 'Background',
          preconditions: { uid: live.metadata.uid, resourceVersion: live.metadata.resourceVersion },
        },
      },
    ]);
    expect(sent.filter((r) => r.method === 'PUT').length).toBe(2); // applying, then committed
    expect((await other.get(cmPath('gate-cm-1'))).status).toBe(404);

    const after = await d.headNow();
    expect([after.head.generation, after.head.inventory.length, after.head.phase, after.head.transition]).toEqual([
      2,
      6,
      'committed',
      'retire',
    ]);
    expect(after.head.previous?.inventory).toEqual(before.head.inventory);
    expect(out.receipt.headCas.before.generation).toBe(1);
    expect(out.receipt.headCas.after).toEqual({ generation: 2, resourceVersion: after.resourceVersion });
    expect(out.receipt.crossResourceAtomicity).toBe(false);

    for (let i = 0; i < 2; i++) {
      const audit = value(await runLive(auditStoredReceipt(out.key, pf.record), d.env, 'retirement'));
      expect(audit).toMatchObject({ verdict: 'compatible', externalResultsReplayed: false, kubernetesMutation: false });
    }
    // Nothing left behind: the receipts directory holds exactly the receipt, mode 0600, byte-equal to the output.
    expect(listFiles(work.receipts)).toContain(out.key);
    expect(listFiles(work.receipts).filter((f) => !f.startsWith('retirement-receipt-'))).toEqual([]);
    expect(statSync(join(work.receipts, out.key)).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(work.receipts, out.key), 'utf8')).toBe(out.bytes);
  });
});

describe('request allow-list on the real client', () => {
  it('every request the ceremony sent passed the allow-list; a request outside it is refused before it is sent (REQUEST_NOT_ALLOWED)', async () => {
    const d = await deployment('allow');
    const sent: Array<SentRequest> = [];
    const pf = value(await d.preflight(d.cmd([cm(ns.name, 'allow-cm-0')]), { sent }));
    value(await d.apply(d.cmd([cm(ns.name, 'allow-cm-0')]), pf.record, { sent }));
    expect(sent.length).toBeGreaterThan(0);
    for (const r of sent) expect(checkRequestAllowed('retirement', r, d.head)._tag).toBe('Right');
    expect(new Set(sent.map((r) => r.method))).toEqual(new Set(['GET', 'DELETE', 'PUT']));

    // A server-side apply through a retirement-mode client never leaves the process.
    const refused: Array<SentRequest> = [];
    const exit = await runLive(
      Effect.flatMap(KubernetesCluster, (c) =>
        c.apply(
          { group: '', version: 'v1', plural: 'configmaps', namespace: ns.name, name: 'allow-cm-2' },
          { apiVersion: 'v1', kind: 'ConfigMap' },
        ),
      ),
      d.env,
      'retirement',
      { sent: refused },
    );
    expect(failureOf(exit)).toMatchObject({ _tag: 'RequestNotAllowed', code: 'REQUEST_NOT_ALLOWED', method: 'PATCH' });
    expect(refused).toEqual([]);
    // Deleting the Head through a retirement client is refused the same way.
    const headDelete = await runLive(
      Effect.flatMap(KubernetesCluster, (c) =>
        c.delete(
          { group: '', version: 'v1', plural: 'configmaps', namespace: ns.name, name: d.head.name },
          { propagationPolicy: 'Background', preconditions: { uid: 'x', resourceVersion: '1' } },
        ),
      ),
      d.env,
      'retirement',
    );
    expect(failureOf(headDelete)).toMatchObject({ code: 'REQUEST_NOT_ALLOWED', method: 'DELETE' });
  });
});

describe('fail closed on the real server: nothing deleted, no receipt', () => {
  it('target replaced by a new object with the same name between preflight and apply → UID_REPLACED; the new object survives, Head unchanged', async () => {
    const d = await deployment('repl');
    const c = d.cmd([cm(ns.name, 'repl-cm-0')]);
    const pf = value(await d.preflight(c));
    const oldUid = pf.record.targets[0]?.preconditions.uid;
    expect(oldUid).toMatch(/^[0-9a-f-]{36}$/);
    expect((await other.del(cmPath('repl-cm-0'))).status).toBe(200);
    const body = d.manifest.manifest.objects.find((o) => o.object.metadata.name === 'repl-cm-0')?.object;
    expect(body).toBeDefined();
    expect((await other.apply(cmPath('repl-cm-0'), body, 'qinglong3-catalog-lock')).status).toBe(201);
    const replaced = await other.json<{ metadata: { uid: string } }>(cmPath('repl-cm-0'));
    expect(replaced.metadata.uid).not.toBe(oldUid);

    const receiptsBefore = receiptFiles();
    const exit = await d.apply(c, pf.record);
    expect(failureOf(exit)).toMatchObject({ code: 'UID_REPLACED', target: cm(ns.name, 'repl-cm-0') });
    expect((await other.json<typeof replaced>(cmPath('repl-cm-0'))).metadata.uid).toBe(replaced.metadata.uid);
    const head = await d.headNow();
    expect([head.head.generation, head.head.phase, head.resourceVersion]).toEqual([
      1,
      'committed',
      d.v1.resourceVersion,
    ]);
    expect(receiptFiles()).toEqual(receiptsBefore);
  });

  it('resourceVersion drift (another writer touched the target) → RESOURCE_VERSION_DRIFT before any DELETE', async () => {
    const d = await deployment('drift');
    const c = d.cmd([cm(ns.name, 'drift-cm-0')]);
    const pf = value(await d.preflight(c));
    expect((await other.mergePatch(cmPath('drift-cm-0'), { metadata: { labels: { touched: 'yes' } } })).status).toBe(
      200,
    );
    const sent: Array<SentRequest> = [];
    expect(failureOf(await d.apply(c, pf.record, { sent }))).toMatchObject({
      code: 'RESOURCE_VERSION_DRIFT',
      check: 'resourceVersion',
    });
    expect(sent.filter((r) => r.method !== 'GET')).toEqual([]);
    expect((await other.get(cmPath('drift-cm-0'))).status).toBe(200);
  });

  it('a target held by a finalizer and terminating fails the preflight (TARGET_TERMINATING)', async () => {
    const d = await deployment('term');
    expect(
      (await other.mergePatch(cmPath('term-cm-0'), { metadata: { finalizers: ['example.com/hold'] } })).status,
    ).toBe(200);
    expect((await other.del(cmPath('term-cm-0'))).status).toBe(200);
    const exit = await d.preflight(d.cmd([cm(ns.name, 'term-cm-0')]));
    expect(failureOf(exit)).toMatchObject({ code: 'TARGET_TERMINATING', check: 'deletionTimestamp' });
    await other.mergePatch(cmPath('term-cm-0'), { metadata: { finalizers: null } });
  });

  it('a finalizer that holds the target after our DELETE → TARGET_TERMINATING, Head stays applying; once released, the same command recovers and commits once', async () => {
    const d = await deployment('fin');
    expect(
      (await other.mergePatch(cmPath('fin-cm-0'), { metadata: { finalizers: ['example.com/hold'] } })).status,
    ).toBe(200);
    const c = d.cmd([cm(ns.name, 'fin-cm-0')]);
    const pf = value(await d.preflight(c));
    expect(failureOf(await d.apply(c, pf.record))).toMatchObject({ code: 'TARGET_TERMINATING', check: 'absence' });
    const stuck = await d.headNow();
    expect([stuck.head.phase, stuck.head.generation]).toEqual(['applying', 1]);
    expect(receiptFiles().some((f) => f === `retirement-receipt-${pf.record.mutationDigest.slice(7)}.json`)).toBe(
      false,
    );

    expect((await other.mergePatch(cmPath('fin-cm-0'), { metadata: { finalizers: null } })).status).toBe(200);
    expect((await other.get(cmPath('fin-cm-0'))).status).toBe(404);
    const out = value(await d.apply(c, pf.record));
    expect(out.path).toBe('resumed');
    expect(out.receipt.targets.map((t) => t.outcome)).toEqual(['recovered']);
    const head = await d.headNow();
    expect([head.head.phase, head.head.generation, head.head.inventory.length]).toEqual(['committed', 2, 6]);
  });

  it("Head changed by another writer between preflight and apply → HEAD_MISMATCH; between our read and our CAS → the server's 409 is HEAD_CONFLICT", async () => {
    const d = await deployment('conf');
    const c = d.cmd([cm(ns.name, 'conf-cm-0')]);
    const pf = value(await d.preflight(c));
    // Another writer between the preflight and the apply.
    expect((await other.mergePatch(cmPath(d.head.name), { metadata: { labels: { other: 'writer' } } })).status).toBe(
      200,
    );
    expect(failureOf(await d.apply(c, pf.record))).toMatchObject({ code: 'HEAD_MISMATCH' });
    expect((await other.get(cmPath('conf-cm-0'))).status).toBe(200);

    // Fresh preflight on the moved Head; this time the other writer strikes right before our CAS (PUT).
    const moved = await d.headNow();
    const c2 = d.cmd([cm(ns.name, 'conf-cm-0')], {
      generation: moved.head.generation,
      resourceVersion: moved.resourceVersion,
    });
    const pf2 = value(await d.preflight(c2));
    const race = interpose((m, p) => m === 'PUT' && p === cmPath(d.head.name), {
      once: true,
      before: async () =>
        void (await other.mergePatch(cmPath(d.head.name), { metadata: { labels: { other: 'again' } } })),
    });
    expect(failureOf(await d.apply(c2, pf2.record, { wrap: race.wrap }))).toMatchObject({ code: 'HEAD_CONFLICT' });
    expect(race.fired()).toBe(1);
    expect((await other.get(cmPath('conf-cm-0'))).status).toBe(200); // nothing deleted: the CAS precedes every DELETE
    expect((await d.headNow()).head.phase).toBe('committed');
  });

  it("the server's dry-run DELETE answers 409 when the object moved under the preflight → PRECONDITION_FAILED", async () => {
    const d = await deployment('dry');
    const race = interpose(
      (m, p, body) => m === 'DELETE' && p === cmPath('dry-cm-0') && (body ?? '').includes('"dryRun"'),
      {
        once: true,
        before: async () =>
          void (await other.mergePatch(cmPath('dry-cm-0'), { metadata: { labels: { moved: 'yes' } } })),
      },
    );
    const exit = await d.preflight(d.cmd([cm(ns.name, 'dry-cm-0')]), { wrap: race.wrap });
    expect(failureOf(exit)).toMatchObject({ code: 'PRECONDITION_FAILED', check: 'dry-run-delete' });
    expect(String((failureOf(exit) as { message: string }).message)).toContain('409');
    expect((await other.get(cmPath('dry-cm-0'))).status).toBe(200);
  });

  it('input refused before any target is read: forbidden kind, 65 targets, a survivor without the worker role', async () => {
    const d = await deployment('input');
    const secret: TargetIdentity = { group: '', version: 'v1', kind: 'Secret', namespace: ns.name, name: 'input-cm-0' };
    expect(failureOf(await d.preflight(d.cmd([secret])))).toMatchObject({ code: 'TARGET_FORBIDDEN_KIND' });
    const many = Array.from({ length: 65 }, (_, i) => cm(ns.name, `input-x-${i}`));
    expect(failureOf(await d.preflight(d.cmd(many)))).toMatchObject({ code: 'TARGET_LIMIT_EXCEEDED' });
    const worker: TargetIdentity = {
      group: 'apps',
      version: 'v1',
      kind: 'Deployment',
      namespace: ns.name,
      name: 'input-worker',
    };
    expect(failureOf(await d.preflight(d.cmd([worker])))).toMatchObject({
      code: 'SURVIVOR_ROLE_MISSING',
      missingRoles: ['worker'],
    });
    expect((await other.get(`/apis/apps/v1/namespaces/${ns.name}/deployments/input-worker`)).status).toBe(200);
  });

  it('guards on real files and the real cluster: group-readable or symlinked kubeconfig, another cluster UID', async () => {
    const d = await deployment('guard');
    const c = d.cmd([cm(ns.name, 'guard-cm-0')]);
    chmodSync(work.kubeconfig, 0o640);
    try {
      expect(failureOf(await d.preflight(c))).toMatchObject({ code: 'KUBECONFIG_NOT_PRIVATE' });
    } finally {
      chmodSync(work.kubeconfig, 0o600);
    }
    const link = join(work.dir, 'kubeconfig-link');
    symlinkSync(work.kubeconfig, link);
    try {
      const exit = await runLive(
        preflightRetirement({ command: c, manifest: d.manifest }),
        { ...d.env, kubeconfig: link },
        'retirement',
      );
      expect(failureOf(exit)).toMatchObject({ code: 'KUBECONFIG_NOT_PRIVATE' });
      expect(String((failureOf(exit) as { message: string }).message)).toContain('not a regular file');
    } finally {
      unlinkSync(link);
    }
    expect(failureOf(await d.preflight({ ...c, clusterUid: 'another-cluster' }))).toMatchObject({
      code: 'CLUSTER_UID_MISMATCH',
    });
  });
});

describe('recovery on the real server', () => {
  it('lost DELETE response: the server deleted, the client saw a reset; Head stays applying; the same command recovers the target and commits once', async () => {
    const d = await deployment('lost');
    const c = d.cmd([cm(ns.name, 'lost-cm-0'), cm(ns.name, 'lost-cm-1')]);
    const pf = value(await d.preflight(c));
    const fault = interpose(
      (m, p, body) => m === 'DELETE' && p === cmPath('lost-cm-0') && !(body ?? '').includes('dryRun'),
      { once: true, loseAnswer: true },
    );
    const first = await d.apply(c, pf.record, { wrap: fault.wrap });
    expect(failureOf(first)).toMatchObject({ _tag: 'ClusterRequestFailed', operation: 'delete' });
    expect((await other.get(cmPath('lost-cm-0'))).status).toBe(404); // the DELETE took effect
    expect((await other.get(cmPath('lost-cm-1'))).status).toBe(200);
    const applying = await d.headNow();
    expect([applying.head.phase, applying.head.generation]).toEqual(['applying', 1]);

    const sent: Array<SentRequest> = [];
    const out = value(await d.apply(c, pf.record, { sent }));
    expect(out.path).toBe('resumed');
    expect(out.receipt.targets.map((t) => t.outcome)).toEqual(['recovered', 'deleted']);
    expect(sent.filter((r) => r.method === 'DELETE').map((r) => r.path)).toEqual([cmPath('lost-cm-1')]);
    expect(sent.filter((r) => r.method === 'PUT').length).toBe(1); // only the commit
    const head = await d.headNow();
    expect([head.head.phase, head.head.generation, head.head.inventory.length]).toEqual(['committed', 2, 5]);
    const audit = value(await runLive(auditStoredReceipt(out.key, pf.record), d.env, 'retirement'));
    expect(audit.verdict).toBe('compatible');
  });

  it('receipt deleted after commit → the same command rebuilds it byte-identically from the Head; a second re-run finds it present', async () => {
    const d = await deployment('rcpt');
    const c = d.cmd([cm(ns.name, 'rcpt-cm-2')]);
    const pf = value(await d.preflight(c));
    const out = value(await d.apply(c, pf.record));
    const committed = await d.headNow();
    unlinkSync(join(work.receipts, out.key));
    const sent: Array<SentRequest> = [];
    const rebuilt = value(await d.apply(c, pf.record, { sent }));
    expect(rebuilt.path).toBe('receipt-rebuilt');
    expect(readFileSync(join(work.receipts, out.key), 'utf8')).toBe(out.bytes);
    expect(sent.filter((r) => r.method !== 'GET')).toEqual([]); // rebuilt without touching the cluster
    expect((await d.headNow()).resourceVersion).toBe(committed.resourceVersion);
    expect(value(await d.apply(c, pf.record)).path).toBe('receipt-present');
  });
});

describe('rollback after a retirement (real server)', () => {
  it('restores previous lock and full inventory with the same release; the retired ConfigMap is re-created by server-side apply with a new UID', async () => {
    const d = await deployment('back');
    const c = d.cmd([cm(ns.name, 'back-cm-1')]);
    const pf = value(await d.preflight(c));
    value(await d.apply(c, pf.record));
    const retired = await d.headNow();
    const out = value(
      await runLive(
        rollback({
          head: d.head,
          manifest: d.manifest,
          clusterUid,
          expectedHead: { generation: retired.head.generation, resourceVersion: retired.resourceVersion },
        }),
        d.env,
        'transition',
      ),
    );
    expect([out.head.generation, out.head.transition, out.head.inventory.length, out.head.release.version]).toEqual([
      3,
      'rollback',
      7,
      '3.0.0',
    ]);
    expect(out.head.inventory).toEqual(retired.head.previous?.inventory);
    expect(out.head.lock).toEqual(retired.head.previous?.lock);
    const recreated = await other.json<{
      metadata: { uid: string; managedFields: Array<{ manager: string; operation: string }> };
    }>(cmPath('back-cm-1'));
    const retiredUid = pf.record.targets[0]?.preconditions.uid;
    expect(retiredUid).toMatch(/^[0-9a-f-]{36}$/);
    expect(recreated.metadata.uid).not.toBe(retiredUid);
    expect(recreated.metadata.managedFields).toEqual(
      expect.arrayContaining([expect.objectContaining({ manager: 'qinglong3-catalog-lock', operation: 'Apply' })]),
    );
  });
});

describe('upgrade on the real server', () => {
  it('a manifest that omits an inventory object is refused before anything is applied; a complete one is applied and CASes generation 2', async () => {
    const d = await deployment('upg');
    const full = liveManifest(ns.name, 'upg', '3.0.1');
    const omitting = lockManifest({
      ...full.manifest,
      objects: full.manifest.objects.filter((o) => o.object.metadata.name !== 'upg-cm-2'),
    });
    const sent: Array<SentRequest> = [];
    const refused = await runLive(
      upgrade({ head: d.head, manifest: omitting, clusterUid, expectedHead: d.v1 }),
      d.env,
      'transition',
      { sent },
    );
    expect(failureOf(refused)).toMatchObject({ code: 'UPGRADE_OMITS_INVENTORY_OBJECT' });
    expect(sent.filter((r) => r.method !== 'GET')).toEqual([]);
    const out = value(
      await runLive(upgrade({ head: d.head, manifest: full, clusterUid, expectedHead: d.v1 }), d.env, 'transition'),
    );
    expect([out.head.generation, out.head.transition, out.head.release.version, out.head.inventory.length]).toEqual([
      2,
      'upgrade',
      '3.0.1',
      7,
    ]);
    // The same command again (its answer lost) finds the Head already committed and writes nothing.
    const again = value(
      await runLive(upgrade({ head: d.head, manifest: full, clusterUid, expectedHead: d.v1 }), d.env, 'transition'),
    );
    expect([again.path, again.resourceVersion]).toEqual(['already-committed', out.resourceVersion]);
    // Another upgrade from the stale expected Head is refused (HEAD_MISMATCH).
    const next = liveManifest(ns.name, 'upg', '3.0.2');
    expect(
      failureOf(
        await runLive(upgrade({ head: d.head, manifest: next, clusterUid, expectedHead: d.v1 }), d.env, 'transition'),
      ),
    ).toMatchObject({ code: 'HEAD_MISMATCH' });
  });

  it('an upgrade is an intent: a writer before the applying CAS fails it closed with nothing applied; after a lost commit answer the same command reports already-committed', async () => {
    const d = await deployment('upi');
    const extra = {
      object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'upi-new', namespace: ns.name }, data: {} },
    };
    const next = liveManifest(ns.name, 'upi', '3.0.1', [extra]);
    const headPath = cmPath(d.head.name);
    const race = interpose((m, p) => m === 'PUT' && p === headPath, {
      once: true,
      before: async () => void (await other.mergePatch(headPath, { metadata: { labels: { other: 'writer' } } })),
    });
    const sent: Array<SentRequest> = [];
    const refused = await runLive(upgrade({ head: d.head, manifest: next, clusterUid }), d.env, 'transition', {
      wrap: race.wrap,
      sent,
    });
    expect(failureOf(refused)).toMatchObject({ code: 'HEAD_CONFLICT' });
    expect(sent.filter((r) => r.method === 'PATCH')).toEqual([]); // nothing applied
    expect((await other.get(cmPath('upi-new'))).status).toBe(404);
    expect((await d.headNow()).head).toMatchObject({ generation: 1, phase: 'committed' });

    // The commit's answer is lost: the server committed, the client saw a reset.
    let puts = 0;
    const lost = interpose((m, p) => m === 'PUT' && p === headPath && ++puts === 2, { loseAnswer: true });
    const first = await runLive(upgrade({ head: d.head, manifest: next, clusterUid }), d.env, 'transition', {
      wrap: lost.wrap,
    });
    expect(failureOf(first)).toMatchObject({ _tag: 'ClusterRequestFailed', operation: 'replace-head' });
    const committed = await d.headNow();
    expect(committed.head).toMatchObject({ generation: 2, phase: 'committed', transition: 'upgrade' });
    expect((await other.get(cmPath('upi-new'))).status).toBe(200);
    const again = value(await runLive(upgrade({ head: d.head, manifest: next, clusterUid }), d.env, 'transition'));
    expect([again.path, again.resourceVersion]).toEqual(['already-committed', committed.resourceVersion]);
  });
});

describe('commit-CAS conflict on the real server', () => {
  it('another writer between the DELETEs and the commit: HEAD_CONFLICT, the Head stays applying; the same command recovers and commits once', async () => {
    const d = await deployment('ccas');
    const c = d.cmd([cm(ns.name, 'ccas-cm-0')]);
    const pf = value(await d.preflight(c));
    const headPath = cmPath(d.head.name);
    let puts = 0;
    const race = interpose((m, p) => m === 'PUT' && p === headPath && ++puts === 2, {
      before: async () => void (await other.mergePatch(headPath, { metadata: { labels: { other: 'writer' } } })),
    });
    expect(failureOf(await d.apply(c, pf.record, { wrap: race.wrap }))).toMatchObject({ code: 'HEAD_CONFLICT' });
    expect(race.fired()).toBe(1);
    expect((await other.get(cmPath('ccas-cm-0'))).status).toBe(404); // the DELETE happened before the conflict
    const stuck = await d.headNow();
    expect([stuck.head.phase, stuck.head.generation]).toEqual(['applying', 1]);
    const out = value(await d.apply(c, pf.record));
    expect([out.path, out.receipt.targets.map((t) => t.outcome)]).toEqual(['resumed', ['recovered']]);
    expect((await d.headNow()).head).toMatchObject({ generation: 2, phase: 'committed' });
  });
});

describe('install --create-namespace on the real server', () => {
  it('a missing Head namespace is refused (HEAD_NAMESPACE_MISSING) before anything is applied; with createNamespace the namespace is created and the install runs', async () => {
    const headNs = `${ns.name}-heads`;
    const head: HeadRef = { namespace: headNs, name: 'cns-head' };
    const env: Env = { kubeconfig: work.kubeconfig, receipts: work.receipts, head };
    const manifest = liveManifest(ns.name, 'cns');
    try {
      const refused = await runLive(install({ head, manifest, clusterUid }), env, 'transition');
      expect(failureOf(refused)).toMatchObject({ code: 'HEAD_NAMESPACE_MISSING' });
      expect((await other.get(`/api/v1/namespaces/${headNs}`)).status).toBe(404);
      expect((await other.get(cmPath('cns-cm-0'))).status).toBe(404);
      const done = value(
        await runLive(install({ head, manifest, clusterUid, createNamespace: true }), env, 'transition'),
      );
      expect(done.head.generation).toBe(1);
      expect((await other.get(`/api/v1/namespaces/${headNs}`)).status).toBe(200);
      expect((await other.get(`/api/v1/namespaces/${headNs}/configmaps/cns-head`)).status).toBe(200);
    } finally {
      await other.del(`/api/v1/namespaces/${headNs}`);
    }
  });
});

describe('Head v1 on the real server', () => {
  it('a v1 Head (written by an older release) is read as committed and the retirement stores the Head as v2', async () => {
    const d = await deployment('v1h');
    const v2 = await d.headNow();
    const { phase: _p, schema: _s, intent: _i, retirement: _r, ...rest } = v2.head;
    const v1 = { ...rest, schema: 'qinglong.deployment.head.v1' };
    const put = await kubeRequest('PUT', cmPath(d.head.name), {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: d.head.name, namespace: ns.name, resourceVersion: v2.resourceVersion },
      data: { 'head.json': canonicalJsonUnsafe(v1) },
    });
    expect(put.status).toBe(200);
    const read = await d.headNow();
    expect([read.storedSchema, read.head.phase]).toEqual(['qinglong.deployment.head.v1', 'committed']);
    const c = d.cmd([cm(ns.name, 'v1h-cm-0')], { generation: 1, resourceVersion: read.resourceVersion });
    const pf = value(await d.preflight(c));
    value(await d.apply(c, pf.record));
    const after = await d.headNow();
    expect([after.storedSchema, after.head.generation, after.head.transition]).toEqual([
      'qinglong.deployment.head.v2',
      2,
      'retire',
    ]);
  });
});

describe('server normalisation of field values (decision 0046 → 0074)', () => {
  it('the server stores cpu "0.5" as "500m": the expected-field check reports FIELD_DRIFT on that path; the normalised form passes', async () => {
    const raw = liveManifest(ns.name, 'norm', '3.0.0', [
      extraDeployment(ns.name, 'norm-raw', { limits: { cpu: '0.5', memory: '64Mi' } }),
      extraDeployment(ns.name, 'norm-ok', { limits: { cpu: '500m', memory: '64Mi' } }),
    ]);
    const d = await deployment('norm', raw);
    const stored = await other.json<{
      spec: { template: { spec: { containers: Array<{ resources: { limits: { cpu: string } } }> } } };
    }>(`/apis/apps/v1/namespaces/${ns.name}/deployments/norm-raw`);
    expect(stored.spec.template.spec.containers[0]?.resources.limits.cpu).toBe('500m');
    const dep = (name: string): TargetIdentity => ({
      group: 'apps',
      version: 'v1',
      kind: 'Deployment',
      namespace: ns.name,
      name,
    });
    const exit = await d.preflight(d.cmd([dep('norm-raw')]));
    expect(failureOf(exit)).toMatchObject({ code: 'FIELD_DRIFT', check: 'expected-fields' });
    expect(String((failureOf(exit) as { message: string }).message)).toContain('spec.template.spec.containers');
    const ok = value(await d.preflight(d.cmd([dep('norm-ok')])));
    expect(ok.record.targets[0]?.plural).toBe('deployments');
  });
});

describe('the adapter reads', () => {
  it('discovery of the real server lists configmaps (namespaced) and deployments with subresources; get of a missing object is None', async () => {
    const d = await deployment('disc');
    const exit = await runLive(
      Effect.gen(function* () {
        const c = yield* KubernetesCluster;
        return {
          core: yield* c.discover('', 'v1'),
          apps: yield* c.discover('apps', 'v1'),
          missing: yield* c.get({
            group: '',
            version: 'v1',
            plural: 'configmaps',
            namespace: ns.name,
            name: 'no-such-object',
          }),
          uid: yield* c.clusterUid,
        };
      }),
      d.env,
      'retirement',
    );
    const r = value(exit);
    expect(r.core).toEqual(
      expect.arrayContaining([
        { name: 'configmaps', kind: 'ConfigMap', namespaced: true },
        { name: 'namespaces', kind: 'Namespace', namespaced: false },
      ]),
    );
    expect(r.apps).toEqual(expect.arrayContaining([{ name: 'deployments/scale', kind: 'Scale', namespaced: true }]));
    expect(Option.isNone(r.missing)).toBe(true);
    expect(r.uid).toBe(clusterUid);
  });
});

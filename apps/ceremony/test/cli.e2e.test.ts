/**
 * The `ceremony` CLI as a child process (its bin) against the real test bed kube-apiserver: the live gate through
 * the CLI, the crash between DELETE and Head commit (a SIGKILLed child) and its re-run, the guards, exit codes,
 * nothing left behind, and no Kubernetes code loaded by the offline audit.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kubeRequest, testbed, useNamespace } from '@homelab/testbed/vitest';
import { digestOf, type LockedManifest, type Lock, type ManifestObject, type Role } from '@homelab/deployment-ceremony';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = join(import.meta.dirname, '../bin/ceremony.mjs');
/** Test-only entry (decision 0253): the same CLI, SIGKILLed at the request CEREMONY_TEST_CRASH names. */
const CRASHING_BIN = join(import.meta.dirname, 'fixtures/crashing-ceremony.mjs');
const TRACE = join(import.meta.dirname, 'fixtures/trace-loads.mjs');
const ns = useNamespace('ceremony-cli');
let dir: string;
let home: string;
let tmp: string;
let kubeconfig: string;
let clusterUid: string;

interface Ran {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly json: Record<string, unknown>;
}

const ceremony = (args: ReadonlyArray<string>, env: Record<string, string> = {}, bin = BIN): Promise<Ran> =>
  new Promise((resolve, reject) => {
    // A clean environment: an empty HOME and TMPDIR (checked afterwards), an ambient KUBECONFIG that must be ignored.
    const child = spawn(bin, args, {
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: home,
        TMPDIR: tmp,
        KUBECONFIG: join(home, 'ambient-kubeconfig-never-read'),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      const last = stdout.trim().split('\n').pop() ?? '';
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(last) as Record<string, unknown>;
      } catch {
        json = {};
      }
      resolve({ code, signal, stdout, stderr, json });
    });
  });

const deployment = (name: string, role: Role): ManifestObject => ({
  role,
  object: {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: ns.name },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'main', image: `registry.example/${role}@sha256:${'b'.repeat(64)}` }] },
      },
    },
  },
});

/** A 7-object locked manifest (four role Deployments, three ConfigMaps) named `<p>-…`, written to a file. */
const manifestFile = (p: string, version = '3.0.0', configMaps = 3): string => {
  const manifest = {
    schema: 'qinglong.deployment.manifest.v1' as const,
    release: { version },
    catalogue: 'qinglong-catalogue@2026.08',
    objects: [
      deployment(`${p}-control`, 'control'),
      deployment(`${p}-control-ai`, 'control-ai'),
      deployment(`${p}-admin`, 'admin'),
      deployment(`${p}-worker`, 'worker'),
      ...Array.from({ length: configMaps }, (_, i) => i).map((i): ManifestObject => ({
        object: {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `${p}-cm-${i}`, namespace: ns.name },
          data: { i: String(i) },
        },
      })),
    ],
  };
  const locked: LockedManifest = {
    manifest,
    lock: { manifestDigest: digestOf(manifest), catalogue: manifest.catalogue } as Lock,
  };
  const file = join(dir, `${p}-manifest-${version}.json`);
  writeFileSync(file, JSON.stringify(locked, null, 2));
  return file;
};

const cmPath = (name: string) => `/api/v1/namespaces/${ns.name}/configmaps/${name}`;
const headOf = async (head: string) => {
  const res = await kubeRequest('GET', cmPath(head));
  const cmap = res.json() as { metadata: { resourceVersion: string }; data: { 'head.json': string } };
  return {
    resourceVersion: cmap.metadata.resourceVersion,
    head: JSON.parse(cmap.data['head.json']) as { generation: number; phase: string; inventory: Array<unknown> },
  };
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ceremony-cli-'));
  chmodSync(dir, 0o700);
  home = join(dir, 'home');
  tmp = join(dir, 'tmp');
  mkdirSync(home, { mode: 0o700 });
  mkdirSync(tmp, { mode: 0o700 });
  const { kube } = testbed();
  kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: ${kube.server}\n    certificate-authority-data: ${Buffer.from(kube.caCert).toString('base64')}\nusers:\n- name: t\n  user:\n    token: ${kube.token}\ncontexts:\n- name: t\n  context: {cluster: t, user: t}\ncurrent-context: t\n`,
    { mode: 0o600 },
  );
  clusterUid = ((await kubeRequest('GET', '/api/v1/namespaces/kube-system')).json() as { metadata: { uid: string } })
    .metadata.uid;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const base = (p: string, manifest: string) => [
  '--kubeconfig',
  kubeconfig,
  '--head',
  `${ns.name}/${p}-head`,
  '--manifest',
  manifest,
  '--cluster-uid',
  clusterUid,
];

/** `install` of `<p>` (exit 0), then the retire arguments bound to the Head it committed (generation 1) for the
 * ConfigMaps `<p>-cm-<i>`. */
const installedForRetire = async (
  p: string,
  m: string,
  configMaps: ReadonlyArray<number>,
  env: Record<string, string> = {},
): Promise<Array<string>> => {
  const inst = await ceremony(['install', ...base(p, m)], env);
  expect([inst.code, inst.signal], inst.stderr).toEqual([0, null]);
  const v1 = await headOf(`${p}-head`);
  return [
    ...base(p, m),
    '--expected-generation',
    '1',
    '--expected-resource-version',
    v1.resourceVersion,
    ...configMaps.flatMap((i) => ['--target', `v1/ConfigMap/${ns.name}/${p}-cm-${i}`]),
  ];
};

/** `retire preflight` into `<dir>/<p>-pf`; the `retire apply` arguments with its file and `<dir>/<p>-receipts`. */
const preflighted = async (p: string, retire: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const pf = await ceremony(['retire', 'preflight', ...retire, '--out', join(dir, `${p}-pf`)], env);
  expect(pf.code, pf.stderr).toBe(0);
  const receipts = join(dir, `${p}-receipts`);
  const apply = ['retire', 'apply', ...retire, '--preflight', String(pf.json['file']), '--receipts', receipts];
  return { pf, receipts, apply };
};

describe('ceremony CLI on the real API server', () => {
  it('live gate through the CLI: install → head show → retire preflight → retire apply → two receipt audits; exit 0 each; nothing left in HOME, TMPDIR or beside the outputs', async () => {
    const m = manifestFile('gate');
    const dry = await ceremony(['install', ...base('gate', m), '--dry-run']);
    expect([dry.code, dry.json['dryRun']]).toEqual([0, true]);
    expect((await kubeRequest('GET', cmPath('gate-head'))).status).toBe(404);

    const inst = await ceremony(['install', ...base('gate', m)]);
    expect(inst.code).toBe(0);
    expect(inst.json).toMatchObject({ ok: true, operation: 'install', inventory: 7, head: { generation: 1 } });
    expect(inst.stderr).toContain(`applied core/v1 ConfigMap ${ns.name}/gate-cm-0`);

    const shown = await ceremony(['head', 'show', '--kubeconfig', kubeconfig, '--head', `${ns.name}/gate-head`]);
    expect(shown.json).toMatchObject({ ok: true, clusterUid, head: { generation: 1, phase: 'committed' } });
    const rv = (shown.json['head'] as { resourceVersion: string }).resourceVersion;

    const retire = [
      ...base('gate', m),
      '--expected-generation',
      '1',
      '--expected-resource-version',
      rv,
      '--target',
      `v1/ConfigMap/${ns.name}/gate-cm-1`,
    ];
    const out = join(dir, 'preflights');
    const pf = await ceremony(['retire', 'preflight', ...retire, '--out', out]);
    expect(pf.code).toBe(0);
    expect(pf.stderr).toMatch(/preflight core\/v1 ConfigMap .*gate-cm-1: uid .* dry-run DELETE accepted/);
    const receipts = join(dir, 'receipts');
    const ap = await ceremony([
      'retire',
      'apply',
      ...retire,
      '--preflight',
      String(pf.json['file']),
      '--receipts',
      receipts,
    ]);
    expect(ap.code).toBe(0);
    expect(ap.json).toMatchObject({
      ok: true,
      path: 'applied',
      head: { generation: 2 },
      crossResourceAtomicity: false,
    });
    expect(ap.stderr).toMatch(/deleted core\/v1 ConfigMap .*gate-cm-1: uid .* confirmed absent/);
    expect((await kubeRequest('GET', cmPath('gate-cm-1'))).status).toBe(404);
    const head = await headOf('gate-head');
    expect([head.head.generation, head.head.inventory.length, head.head.phase]).toEqual([2, 6, 'committed']);

    for (let i = 0; i < 2; i++) {
      const audit = await ceremony([
        'receipt',
        'audit',
        '--receipts',
        receipts,
        '--key',
        String(ap.json['receiptKey']),
        '--preflight',
        String(pf.json['file']),
      ]);
      expect(audit.code).toBe(0);
      expect(audit.json).toMatchObject({
        verdict: 'compatible',
        externalResultsReplayed: false,
        kubernetesMutation: false,
      });
    }
    // Nothing left behind.
    expect(readdirSync(home)).toEqual([]);
    expect(readdirSync(tmp)).toEqual([]);
    expect(readdirSync(receipts)).toEqual([String(ap.json['receiptKey'])]);
    expect(readdirSync(out)).toEqual([String(pf.json['file']).split('/').pop()]);
  });

  it('a child killed (SIGKILL) after its DELETE was answered and before the Head commit; the same command re-run recovers and commits exactly once', async () => {
    const retire = await installedForRetire('kill', manifestFile('kill'), [0, 2]);
    const { receipts, apply: args } = await preflighted('kill', retire);

    const killed = await ceremony(args, { CEREMONY_TEST_CRASH: 'after:DELETE:1' }, CRASHING_BIN);
    expect(killed.signal).toBe('SIGKILL');
    expect(killed.stdout).toBe('');
    expect((await kubeRequest('GET', cmPath('kill-cm-0'))).status).toBe(404);
    expect((await kubeRequest('GET', cmPath('kill-cm-2'))).status).toBe(200);
    const stuck = await headOf('kill-head');
    expect([stuck.head.phase, stuck.head.generation]).toEqual(['applying', 1]);
    expect(readdirSync(receipts)).toEqual([]);

    const rerun = await ceremony(args);
    expect(rerun.code).toBe(0);
    expect(rerun.json).toMatchObject({ path: 'resumed', head: { generation: 2 } });
    expect((rerun.json['targets'] as Array<{ outcome: string }>).map((t) => t.outcome)).toEqual([
      'recovered',
      'deleted',
    ]);
    const committed = await headOf('kill-head');
    expect([committed.head.phase, committed.head.generation, committed.head.inventory.length]).toEqual([
      'committed',
      2,
      5,
    ]);

    // Exactly once: a third run changes nothing and finds the identical receipt.
    const third = await ceremony(args);
    expect(third.json).toMatchObject({
      path: 'receipt-present',
      head: { generation: 2, resourceVersion: committed.resourceVersion },
    });
    expect((await headOf('kill-head')).resourceVersion).toBe(committed.resourceVersion);
    expect(readdirSync(receipts)).toEqual([String(rerun.json['receiptKey'])]);
    expect(readdirSync(tmp)).toEqual([]);
  });

  it('refusals and exit codes: group-readable kubeconfig (1, KUBECONFIG_NOT_PRIVATE), usage (2), unreachable server (3), tampered receipt (4)', async () => {
    const m = manifestFile('codes');
    chmodSync(kubeconfig, 0o644);
    try {
      const r = await ceremony(['install', ...base('codes', m)]);
      expect([r.code, (r.json['error'] as { code: string }).code]).toEqual([1, 'KUBECONFIG_NOT_PRIVATE']);
      expect((await kubeRequest('GET', cmPath('codes-head'))).status).toBe(404);
    } finally {
      chmodSync(kubeconfig, 0o600);
    }
    const u = await ceremony(['retire', 'apply', '--kubeconfig', kubeconfig]);
    expect([u.code, (u.json['error'] as { _tag: string })._tag]).toEqual([2, 'UsageError']);
    expect((await ceremony(['--help'])).code).toBe(0);

    const dead = join(dir, 'dead-kubeconfig');
    writeFileSync(dead, readFileSync(kubeconfig, 'utf8').replace(/server: .*/, 'server: https://127.0.0.1:1'), {
      mode: 0o600,
    });
    const un = await ceremony([
      'install',
      '--kubeconfig',
      dead,
      '--head',
      `${ns.name}/codes-head`,
      '--manifest',
      m,
      '--cluster-uid',
      clusterUid,
    ]);
    expect([un.code, (un.json['error'] as { _tag: string })._tag]).toEqual([3, 'ClusterRequestFailed']);

    // Retire, then tamper with the receipt: the offline audit says incompatible (4).
    const codes = await preflighted('codes', await installedForRetire('codes', m, [0]));
    const receipts = codes.receipts;
    const ap = await ceremony(codes.apply);
    expect(ap.code).toBe(0);
    const key = String(ap.json['receiptKey']);
    const tampered = join(dir, 'codes-tampered');
    mkdirSync(tampered, { mode: 0o700 });
    writeFileSync(
      join(tampered, key),
      readFileSync(join(receipts, key), 'utf8').replace('"generation":2', '"generation":9'),
      { mode: 0o600 },
    );
    const audit = await ceremony(['receipt', 'audit', '--receipts', tampered, '--key', key]);
    expect([audit.code, audit.json['verdict']]).toEqual([4, 'incompatible']);
  });

  it('receipt audit is offline: the process loads no Kubernetes client code (module trace), sends nothing', async () => {
    const m = manifestFile('trace');
    const { receipts, apply } = await preflighted('trace', await installedForRetire('trace', m, [2]));
    const ap = await ceremony(apply);
    expect(ap.code).toBe(0);

    const trace = join(dir, 'trace-audit.txt');
    const audit = await ceremony(['receipt', 'audit', '--receipts', receipts, '--key', String(ap.json['receiptKey'])], {
      NODE_OPTIONS: `--import=${TRACE}`,
      CEREMONY_TRACE_OUT: trace,
    });
    expect(audit.code).toBe(0);
    const loaded = readFileSync(trace, 'utf8').split('\n').filter(Boolean);
    expect(loaded.some((u) => u.includes('deployment-ceremony/src/domain/receipt'))).toBe(true);
    expect(
      loaded.filter(
        (u) => u.includes('@kubernetes/client-node') || u.includes('/libs/kube/') || u.includes('/adapter/kubernetes/'),
      ),
    ).toEqual([]);

    // The same trace for a preflight does show the Kubernetes adapter (the check above is not vacuous).
    const trace2 = join(dir, 'trace-preflight.txt');
    const h = await headOf('trace-head');
    await ceremony(['head', 'show', '--kubeconfig', kubeconfig, '--head', `${ns.name}/trace-head`], {
      NODE_OPTIONS: `--import=${TRACE}`,
      CEREMONY_TRACE_OUT: trace2,
    });
    expect(h.head.generation).toBe(2);
    expect(
      readFileSync(trace2, 'utf8')
        .split('\n')
        .some((u) => u.includes('/adapter/kubernetes/')),
    ).toBe(true);
  });
});

describe('Head transitions through the CLI process (issue 24)', () => {
  const errorCode = (r: Ran) => (r.json['error'] as { code?: string } | undefined)?.code;

  it('the shipped binary has no fault hook: QINGLONG_CEREMONY_FAULT and CEREMONY_TEST_CRASH change nothing', async () => {
    const m = manifestFile('nohook');
    const env = { QINGLONG_CEREMONY_FAULT: 'kill-after-delete', CEREMONY_TEST_CRASH: 'after:PATCH:1' };
    const retire = await installedForRetire('nohook', m, [0], env); // exit 0, no signal
    const { apply } = await preflighted('nohook', retire, env);
    const ap = await ceremony(apply, env);
    expect([ap.code, ap.signal, ap.json['path']]).toEqual([0, null, 'applied']);
    expect(ap.stderr).not.toContain('crash');
  });

  it('upgrade as an intent: SIGKILL before/after each Head PUT and after an apply; the same command resumes (or finds it committed); another command is refused meanwhile', async () => {
    const cases: ReadonlyArray<{ crash: string; phase: string; newObject: boolean; rerun: string }> = [
      { crash: 'before:PUT:1', phase: 'committed', newObject: false, rerun: 'applied' },
      { crash: 'after:PUT:1', phase: 'applying', newObject: false, rerun: 'resumed' },
      { crash: 'after:PATCH:3', phase: 'applying', newObject: false, rerun: 'resumed' },
      { crash: 'before:PUT:2', phase: 'applying', newObject: true, rerun: 'resumed' },
      { crash: 'after:PUT:2', phase: 'committed', newObject: true, rerun: 'already-committed' },
    ];
    for (const [i, c] of cases.entries()) {
      const p = `up${i}`;
      const v300 = manifestFile(p);
      const v301 = manifestFile(p, '3.0.1', 4); // one more ConfigMap, applied last
      expect((await ceremony(['install', ...base(p, v300)])).code).toBe(0);
      const v1 = await headOf(`${p}-head`);
      const expect1 = ['--expected-generation', '1', '--expected-resource-version', v1.resourceVersion];
      const args = ['upgrade', ...base(p, v301), ...expect1];
      const killed = await ceremony(args, { CEREMONY_TEST_CRASH: c.crash }, CRASHING_BIN);
      expect(killed.signal, c.crash).toBe('SIGKILL');
      const after = await headOf(`${p}-head`);
      expect([after.head.phase, after.head.generation], c.crash).toEqual([
        c.phase,
        c.phase === 'committed' && c.newObject ? 2 : 1,
      ]);
      expect((await kubeRequest('GET', cmPath(`${p}-cm-3`))).status, c.crash).toBe(c.newObject ? 200 : 404);
      if (c.phase === 'applying') {
        const other = await ceremony(['rollback', ...base(p, v300)]);
        expect([other.code, errorCode(other)], c.crash).toEqual([1, 'HEAD_APPLYING']);
        const otherUpgrade = await ceremony(['upgrade', ...base(p, manifestFile(p, '3.0.2', 5))]);
        expect([otherUpgrade.code, errorCode(otherUpgrade)], c.crash).toEqual([1, 'HEAD_APPLYING']);
      }
      const rerun = await ceremony(args);
      expect([rerun.code, rerun.json['path']], c.crash).toEqual([0, c.rerun]);
      const done = await headOf(`${p}-head`);
      expect([done.head.phase, done.head.generation, done.head.inventory.length], c.crash).toEqual(['committed', 2, 8]);
      expect((await kubeRequest('GET', cmPath(`${p}-cm-3`))).status, c.crash).toBe(200);
    }
  });

  it('retire apply SIGKILLed before and after each Head PUT: the same command finishes with one commit and one receipt', async () => {
    const cases: ReadonlyArray<{ crash: string; phase: string; generation: number; path: string }> = [
      { crash: 'before:PUT:1', phase: 'committed', generation: 1, path: 'applied' },
      { crash: 'after:PUT:1', phase: 'applying', generation: 1, path: 'resumed' },
      { crash: 'before:PUT:2', phase: 'applying', generation: 1, path: 'resumed' },
      { crash: 'after:PUT:2', phase: 'committed', generation: 2, path: 'receipt-rebuilt' },
    ];
    for (const [i, c] of cases.entries()) {
      const p = `rp${i}`;
      const m = manifestFile(p);
      const { receipts, apply: args } = await preflighted(p, await installedForRetire(p, m, [1]));
      expect((await ceremony(args, { CEREMONY_TEST_CRASH: c.crash }, CRASHING_BIN)).signal, c.crash).toBe('SIGKILL');
      const after = await headOf(`${p}-head`);
      expect([after.head.phase, after.head.generation], c.crash).toEqual([c.phase, c.generation]);
      const rerun = await ceremony(args);
      expect([rerun.code, rerun.json['path']], c.crash).toEqual([0, c.path]);
      const done = await headOf(`${p}-head`);
      expect([done.head.phase, done.head.generation, done.head.inventory.length], c.crash).toEqual(['committed', 2, 6]);
      expect(readdirSync(receipts), c.crash).toEqual([String(rerun.json['receiptKey'])]);
    }
  });

  it('rollback as an intent: SIGKILL after the applying PUT and before the commit PUT; the same command resumes', async () => {
    for (const [i, crash] of ['after:PUT:1', 'before:PUT:2'].entries()) {
      const p = `rb${i}`;
      const v300 = manifestFile(p);
      expect((await ceremony(['install', ...base(p, v300)])).code).toBe(0);
      expect((await ceremony(['upgrade', ...base(p, manifestFile(p, '3.0.1', 4))])).code).toBe(0);
      const killed = await ceremony(['rollback', ...base(p, v300)], { CEREMONY_TEST_CRASH: crash }, CRASHING_BIN);
      expect(killed.signal, crash).toBe('SIGKILL');
      expect((await headOf(`${p}-head`)).head.phase, crash).toBe('applying');
      const rerun = await ceremony(['rollback', ...base(p, v300)]);
      expect([rerun.code, rerun.json['path']], crash).toEqual([0, 'resumed']);
      const done = await headOf(`${p}-head`);
      expect([done.head.phase, done.head.generation, done.head.inventory.length], crash).toEqual(['committed', 3, 7]);
    }
  });

  it('abandon after UID_REPLACED: preview, refusals (stale resourceVersion, other digest) write nothing, the abandon commits the inventory really there, deletes nothing, and its receipt audits as abandoned', async () => {
    const m = manifestFile('ab');
    const { receipts, apply } = await preflighted('ab', await installedForRetire('ab', m, [0, 2]));
    expect((await ceremony(apply, { CEREMONY_TEST_CRASH: 'after:DELETE:1' }, CRASHING_BIN)).signal).toBe('SIGKILL');
    // Someone re-creates ab-cm-2 by hand: a new UID under the intent's name.
    expect((await kubeRequest('DELETE', cmPath('ab-cm-2'))).status).toBe(200);
    const recreated = await kubeRequest('POST', `/api/v1/namespaces/${ns.name}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ab-cm-2', namespace: ns.name },
      data: { by: 'hand' },
    });
    const newUid = (recreated.json() as { metadata: { uid: string } }).metadata.uid;
    const stuck = await ceremony(apply);
    expect([stuck.code, errorCode(stuck)]).toEqual([1, 'UID_REPLACED']);
    // The stuck Head blocks every other transition.
    expect(errorCode(await ceremony(['upgrade', ...base('ab', manifestFile('ab', '3.0.1', 4))]))).toBe('HEAD_APPLYING');

    const where = ['--kubeconfig', kubeconfig, '--head', `${ns.name}/ab-head`, '--cluster-uid', clusterUid];
    const preview = await ceremony(['retire', 'abandon', ...where, '--dry-run']);
    expect(preview.code).toBe(0);
    const targets = preview.json['targets'] as Array<{ identity: { name: string }; state: string; liveUid?: string }>;
    expect(targets.map((t) => [t.identity.name, t.state])).toEqual([
      ['ab-cm-0', 'absent'],
      ['ab-cm-2', 'replaced'],
    ]);
    expect(targets[1]?.liveUid).toBe(newUid);
    const shown = preview.json['head'] as { generation: number; resourceVersion: string };
    const digest = String(preview.json['intentDigest']);
    const abandon = (rv: string, d: string) => [
      'retire',
      'abandon',
      ...where,
      '--expected-generation',
      String(shown.generation),
      '--expected-resource-version',
      rv,
      '--intent-digest',
      d,
      '--reason',
      'ab-cm-2 was re-created by hand; keep it',
      '--receipts',
      receipts,
    ];
    const stale = await ceremony(abandon('1', digest));
    expect([stale.code, errorCode(stale)]).toEqual([1, 'HEAD_MISMATCH']);
    const otherDigest = await ceremony(abandon(shown.resourceVersion, `sha256:${'0'.repeat(64)}`));
    expect([otherDigest.code, errorCode(otherDigest)]).toEqual([1, 'INTENT_MISMATCH']);
    expect((await headOf('ab-head')).resourceVersion).toBe(shown.resourceVersion);
    expect(readdirSync(receipts)).toEqual([]);

    const done = await ceremony(abandon(shown.resourceVersion, digest));
    expect(done.code).toBe(0);
    expect(done.json).toMatchObject({ path: 'abandoned', head: { generation: 2 }, inventory: 6, deleted: 0 });
    const head = await headOf('ab-head');
    expect([head.head.phase, head.head.generation, head.head.inventory.length]).toEqual(['committed', 2, 6]);
    const hand = await kubeRequest('GET', cmPath('ab-cm-2'));
    expect((hand.json() as { metadata: { uid: string } }).metadata.uid).toBe(newUid); // nothing deleted
    const audit = await ceremony([
      'receipt',
      'audit',
      '--receipts',
      receipts,
      '--key',
      String(done.json['receiptKey']),
    ]);
    expect([audit.code, audit.json['verdict'], audit.json['abandoned']]).toEqual([0, 'compatible', true]);
    // A Head that is not applying cannot be abandoned; the abandoned retirement cannot be completed.
    const again = await ceremony(abandon(head.resourceVersion, `sha256:${'1'.repeat(64)}`));
    expect([again.code, errorCode(again)]).toEqual([1, 'HEAD_NOT_APPLYING']);
    expect(errorCode(await ceremony(apply))).toBe('RETIREMENT_ABANDONED');
  });

  it('install into a missing Head namespace is refused (exit 1, HEAD_NAMESPACE_MISSING) and nothing is applied; --create-namespace creates it', async () => {
    const m = manifestFile('cns');
    const headNs = `${ns.name}-cli-heads`;
    const args = ['install', ...base('cns', m).map((a) => (a === `${ns.name}/cns-head` ? `${headNs}/cns-head` : a))];
    try {
      const refused = await ceremony(args);
      expect([refused.code, errorCode(refused)]).toEqual([1, 'HEAD_NAMESPACE_MISSING']);
      expect((await kubeRequest('GET', cmPath('cns-cm-0'))).status).toBe(404);
      const created = await ceremony([...args, '--create-namespace']);
      expect(created.code).toBe(0);
      expect((await kubeRequest('GET', `/api/v1/namespaces/${headNs}/configmaps/cns-head`)).status).toBe(200);
    } finally {
      await kubeRequest('DELETE', `/api/v1/namespaces/${headNs}`);
    }
  });
});

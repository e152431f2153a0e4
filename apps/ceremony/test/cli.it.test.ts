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

const ceremony = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Ran> =>
  new Promise((resolve, reject) => {
    // A clean environment: an empty HOME and TMPDIR (checked afterwards), an ambient KUBECONFIG that must be ignored.
    const child = spawn(BIN, args, {
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
const manifestFile = (p: string): string => {
  const manifest = {
    schema: 'qinglong.deployment.manifest.v1' as const,
    release: { version: '3.0.0' },
    catalogue: 'qinglong-catalogue@2026.08',
    objects: [
      deployment(`${p}-control`, 'control'),
      deployment(`${p}-control-ai`, 'control-ai'),
      deployment(`${p}-admin`, 'admin'),
      deployment(`${p}-worker`, 'worker'),
      ...[0, 1, 2].map((i): ManifestObject => ({
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
  const file = join(dir, `${p}-manifest.json`);
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
    const m = manifestFile('kill');
    expect((await ceremony(['install', ...base('kill', m)])).code).toBe(0);
    const v1 = await headOf('kill-head');
    const retire = [
      ...base('kill', m),
      '--expected-generation',
      '1',
      '--expected-resource-version',
      v1.resourceVersion,
      '--target',
      `v1/ConfigMap/${ns.name}/kill-cm-0`,
      '--target',
      `v1/ConfigMap/${ns.name}/kill-cm-2`,
    ];
    const pf = await ceremony(['retire', 'preflight', ...retire, '--out', join(dir, 'kill-pf')]);
    expect(pf.code).toBe(0);
    const receipts = join(dir, 'kill-receipts');
    const args = ['retire', 'apply', ...retire, '--preflight', String(pf.json['file']), '--receipts', receipts];

    const killed = await ceremony(args, { QINGLONG_CEREMONY_FAULT: 'kill-after-delete' });
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
    expect((await ceremony(['install', ...base('codes', m)])).code).toBe(0);
    const v1 = await headOf('codes-head');
    const retire = [
      ...base('codes', m),
      '--expected-generation',
      '1',
      '--expected-resource-version',
      v1.resourceVersion,
      '--target',
      `v1/ConfigMap/${ns.name}/codes-cm-0`,
    ];
    const pf = await ceremony(['retire', 'preflight', ...retire, '--out', join(dir, 'codes-pf')]);
    const receipts = join(dir, 'codes-receipts');
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
    expect((await ceremony(['install', ...base('trace', m)])).code).toBe(0);
    const v1 = await headOf('trace-head');
    const retire = [
      ...base('trace', m),
      '--expected-generation',
      '1',
      '--expected-resource-version',
      v1.resourceVersion,
      '--target',
      `v1/ConfigMap/${ns.name}/trace-cm-2`,
    ];
    const pf = await ceremony(['retire', 'preflight', ...retire, '--out', join(dir, 'trace-pf')]);
    const receipts = join(dir, 'trace-receipts');
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

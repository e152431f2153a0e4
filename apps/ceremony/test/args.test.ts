import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEAD, parseArgs, parseTarget } from '../src/args.js';

const ok = (argv: ReadonlyArray<string>) => {
  const r = parseArgs(argv);
  if (Either.isLeft(r)) throw new Error(r.left.message);
  return r.right;
};
const usage = (argv: ReadonlyArray<string>) => {
  const r = parseArgs(argv);
  return Either.isLeft(r) ? r.left.message : undefined;
};
const common = ['--kubeconfig', 'k', '--manifest', 'm.json', '--cluster-uid', 'u'];

describe('ceremony argument parsing', () => {
  it('retire preflight: ordered repeated targets, core group with four parts, default Head', () => {
    const p = ok([
      'retire',
      'preflight',
      ...common,
      '--expected-generation',
      '3',
      '--expected-resource-version',
      '77',
      '--target',
      'v1/ConfigMap/ns/a',
      '--target=apps/v1/Deployment/ns/b',
      '--out',
      'dir',
    ]);
    expect(p).toMatchObject({
      _tag: 'retire-preflight',
      head: DEFAULT_HEAD,
      expected: { generation: 3, resourceVersion: '77' },
      targets: [
        { group: '', version: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'a' },
        { group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'ns', name: 'b' },
      ],
      out: 'dir',
    });
  });
  it('help: no words, `help`, --help and -h on a command', () => {
    expect(ok([])).toEqual({ _tag: 'help' });
    expect(ok(['help', 'install'])).toEqual({ _tag: 'help', topic: 'install' });
    expect(ok(['retire', 'apply', '--help'])).toEqual({ _tag: 'help', topic: 'retire-apply' });
    expect(ok(['install', '-h'])).toEqual({ _tag: 'help', topic: 'install' });
  });
  it('usage errors name the problem: unknown command, missing/duplicated/foreign options, malformed target and Head', () => {
    expect(usage(['retire', 'now'])).toContain('unknown command');
    expect(usage(['install', '--kubeconfig', 'k'])).toBe('--manifest is required');
    expect(usage(['install', ...common, '--kubeconfig', 'again'])).toBe('--kubeconfig given twice');
    expect(usage(['install', ...common, '--target', 'v1/ConfigMap/ns/a'])).toBe('--target is not an option of install');
    expect(
      usage([
        'retire',
        'apply',
        ...common,
        '--expected-generation',
        '1',
        '--expected-resource-version',
        '1',
        '--target',
        'ConfigMap/a',
        '--preflight',
        'p',
        '--receipts',
        'r',
      ]),
    ).toContain('expected [group/]version/Kind/namespace/name');
    expect(usage(['head', 'show', '--kubeconfig', 'k', '--head', 'only-name'])).toContain('expected namespace/name');
    expect(usage(['upgrade', ...common, '--expected-generation', '2'])).toContain('go together');
    expect(usage(['upgrade', ...common, '--expected-generation', '0', '--expected-resource-version', '1'])).toContain(
      'positive integer',
    );
    expect(
      usage([
        'retire',
        'preflight',
        ...common,
        '--expected-generation',
        '1',
        '--expected-resource-version',
        '1',
        '--out',
        'o',
      ]),
    ).toBe('at least one --target is required');
    expect(usage(['install', ...common, '--expected-generation', '1', '--expected-resource-version', '1'])).toBe(
      '--expected-generation is not an option of install',
    );
    expect(usage(['install', '--kubeconfig'])).toBe('--kubeconfig needs a value');
  });
  it('install/upgrade/rollback take --dry-run; receipt audit needs no kubeconfig', () => {
    expect(ok(['upgrade', ...common, '--dry-run'])).toMatchObject({ _tag: 'upgrade', dryRun: true });
    expect(ok(['receipt', 'audit', '--receipts', 'r', '--key', 'k.json'])).toEqual({
      _tag: 'receipt-audit',
      receipts: 'r',
      key: 'k.json',
    });
  });
  it('target syntax', () => {
    expect(Either.isRight(parseTarget('rbac.authorization.k8s.io/v1/Role/ns/r'))).toBe(true);
    expect(Either.isLeft(parseTarget('v1/ConfigMap//a'))).toBe(true);
  });

  it('retire abandon: the preview takes only where the Head is; the abandon needs the Head version, a sha256 intent digest, a reason and the receipts directory', () => {
    const where = ['--kubeconfig', 'k', '--cluster-uid', 'u', '--head', 'ns/h'];
    expect(ok(['retire', 'abandon', ...where, '--dry-run'])).toEqual({
      _tag: 'retire-abandon',
      kubeconfig: 'k',
      head: { namespace: 'ns', name: 'h' },
      clusterUid: 'u',
      dryRun: true,
    });
    expect(usage(['retire', 'abandon', ...where, '--dry-run', '--reason', 'x'])).toBe(
      '--reason is not used by the abandon preview',
    );
    const digest = `sha256:${'a'.repeat(64)}`;
    const full = [
      ...where,
      '--expected-generation',
      '4',
      '--expected-resource-version',
      '99',
      '--intent-digest',
      digest,
      '--reason',
      'replaced by hand',
      '--receipts',
      'r',
    ];
    expect(ok(['retire', 'abandon', ...full])).toMatchObject({
      _tag: 'retire-abandon',
      dryRun: false,
      apply: { expected: { generation: 4, resourceVersion: '99' }, intentDigest: digest, reason: 'replaced by hand' },
    });
    expect(usage(['retire', 'abandon', ...where])).toMatch(/--expected-generation and --expected-resource-version/);
    expect(usage(['retire', 'abandon', ...full.map((a) => (a === digest ? 'sha256:abc' : a))])).toMatch(
      /--intent-digest sha256:abc/,
    );
    expect(usage(['retire', 'abandon', ...full.map((a) => (a === 'replaced by hand' ? 'x'.repeat(1025) : a))])).toBe(
      '--reason: at most 1024 characters',
    );
  });

  it('--create-namespace belongs to install only', () => {
    expect(ok(['install', ...common, '--create-namespace'])).toMatchObject({ _tag: 'install', createNamespace: true });
    expect(ok(['install', ...common])).toMatchObject({ _tag: 'install', createNamespace: false });
    expect(usage(['upgrade', ...common, '--create-namespace'])).toBe('--create-namespace is not an option of upgrade');
  });
});

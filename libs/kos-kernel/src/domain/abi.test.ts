/* eslint-disable @typescript-eslint/no-non-null-assertion -- fixtures are edited by index in these tests */
// TC-105 (pure half) and the ABI self-check rules: exactly ten kinds, scopes, both versions equal, storage v1beta1,
// conversion None, no admission webhook on the kernel group.
import { describe, expect, it } from 'vitest';
import { kosCrds } from '../api/crds.js';
import { checkAbi, type CrdLike, firstDifference } from './abi.js';

const generated = (): CrdLike[] => JSON.parse(JSON.stringify(kosCrds())) as CrdLike[];
const codes = (
  crds: ReadonlyArray<CrdLike>,
  webhookConfigurations: Parameters<typeof checkAbi>[0]['webhookConfigurations'] = [],
) => checkAbi({ crds, webhookConfigurations }).violations.map((v) => v.code);

type Mutable<T> = { -readonly [K in keyof T]: Mutable<T[K]> };
const edit = (f: (crds: Mutable<CrdLike>[]) => void): CrdLike[] => {
  const crds = generated() as Mutable<CrdLike>[];
  f(crds);
  return crds as CrdLike[];
};

describe('ABI self-check', () => {
  it('TC-105: the generated CRDs pass: ten kinds, scopes, equal versions, storage v1beta1, conversion None', () => {
    const report = checkAbi({ crds: generated(), webhookConfigurations: [] });
    expect(report.violations).toEqual([]);
    expect(report.ok).toBe(true);
    for (const crd of generated()) expect(crd.spec.conversion).toEqual({ strategy: 'None' });
  });

  it('CRDs of other groups are ignored', () => {
    const other = {
      ...generated()[0]!,
      spec: { ...generated()[0]!.spec, group: 'example.test', names: { kind: 'Gadget' } },
    };
    expect(codes([...generated(), other])).toEqual([]);
  });

  it('a missing kind, an extension kind in the group, a duplicate', () => {
    expect(codes(generated().slice(1))).toEqual(['kind_missing']);
    const extra = edit((c) => {
      c.push({ ...c[0]!, spec: { ...c[0]!.spec, names: { kind: 'Notification', plural: 'notifications' } } });
    });
    expect(codes(extra)).toEqual(['kind_not_kernel']);
    expect(codes([...generated(), generated()[2]!])).toEqual(['kind_duplicated']);
  });

  it('a wrong scope', () => {
    expect(codes(edit((c) => (c[0]!.spec.scope = 'Cluster')))).toEqual(['scope_mismatch']);
  });

  it('a version not served, a missing version, a wrong storage version', () => {
    expect(codes(edit((c) => (c[0]!.spec.versions[0]!.served = false)))).toEqual(['version_set']);
    expect(codes(edit((c) => c[0]!.spec.versions.splice(0, 1)))).toEqual(['version_set']);
    expect(
      codes(
        edit((c) => {
          c[0]!.spec.versions[0]!.storage = true;
          c[0]!.spec.versions[1]!.storage = false;
        }),
      ),
    ).toEqual(['storage_version']);
  });

  it('versions that differ in schema are reported with the path', () => {
    const crds = edit((c) => {
      const schema = c[0]!.spec.versions[0]!.schema!.openAPIV3Schema as {
        properties: { spec: { properties: Record<string, unknown> } };
      };
      schema.properties.spec.properties['extra'] = { type: 'string' };
    });
    const [v] = checkAbi({ crds, webhookConfigurations: [] }).violations;
    expect(v).toMatchObject({
      code: 'versions_differ',
      kind: 'Application',
      path: '.schema.properties.spec.properties.extra (only in the first)',
    });
  });

  it('status subresource or field where the ABI says none, and the other way round', () => {
    const ad = (c: Mutable<CrdLike>[]) => c.find((x) => x.spec.names.kind === 'ApplicationDefinition')!;
    expect(codes(edit((c) => ad(c).spec.versions.forEach((v) => (v.subresources = { status: {} }))))).toEqual([
      'status_mismatch',
      'status_mismatch',
    ]);
    expect(codes(edit((c) => c[0]!.spec.versions.forEach((v) => delete v.subresources)))).toEqual([
      'status_mismatch',
      'status_mismatch',
    ]);
  });

  it('TC-105: a conversion webhook is a violation', () => {
    expect(
      codes(
        edit((c) => (c[0]!.spec.conversion = { strategy: 'Webhook', webhook: { clientConfig: { url: 'https://x' } } })),
      ),
    ).toEqual(['conversion_not_none']);
    expect(codes(edit((c) => delete c[0]!.spec.conversion))).toEqual([]); // absent = the API server's default, None
  });

  it('TC-105: an admission webhook on the kernel group (or on every group) is a violation; others are listed only', () => {
    const hooks = [
      {
        kind: 'ValidatingWebhookConfiguration',
        metadata: { name: 'kos' },
        webhooks: [{ name: 'v.kos', rules: [{ apiGroups: ['kos.tsic.top'] }] }],
      },
      {
        kind: 'MutatingWebhookConfiguration',
        metadata: { name: 'all' },
        webhooks: [{ name: 'm.all', rules: [{ apiGroups: ['*'] }] }],
      },
      {
        kind: 'ValidatingWebhookConfiguration',
        metadata: { name: 'cm' },
        webhooks: [{ name: 'v.cm', rules: [{ apiGroups: ['cert-manager.io'] }] }],
      },
    ];
    const report = checkAbi({ crds: generated(), webhookConfigurations: hooks });
    expect(report.violations.map((v) => v.code)).toEqual(['admission_webhook', 'admission_webhook']);
    expect(report.otherWebhooks).toEqual(['ValidatingWebhookConfiguration/cm/v.cm']);
  });

  it('firstDifference ignores key order and names the first differing path', () => {
    expect(firstDifference({ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 })).toBeUndefined();
    expect(firstDifference({ a: { b: 1 } }, { a: { b: 2 } })).toBe('.a.b');
    expect(firstDifference([1], [1, 2])).toBe(' (length 1 vs 2)');
  });
});

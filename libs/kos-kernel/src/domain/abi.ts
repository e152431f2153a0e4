// ABI self-check (seed pkg/abi: "kind 集合、作用域、双版本同结构、无 webhook"): a pure function over what the
// cluster (or the generator) says — CRDs and admission webhook configurations — returning every violation.
// TC-105: conversion strategy None, no conversion webhook, no admission webhook on the kernel group.
import { KERNEL_KINDS, KIND_INFO, KOS_GROUP, KOS_STORAGE_VERSION, KOS_VERSIONS } from '../api/group.js';

/** The parts of an apiextensions.k8s.io/v1 CustomResourceDefinition the check reads. */
export interface CrdLike {
  readonly metadata?: { readonly name?: string };
  readonly spec: {
    readonly group: string;
    readonly names: { readonly kind: string; readonly plural?: string };
    readonly scope: string;
    readonly versions: ReadonlyArray<{
      readonly name: string;
      readonly served: boolean;
      readonly storage: boolean;
      readonly schema?: { readonly openAPIV3Schema?: unknown };
      readonly subresources?: { readonly status?: unknown; readonly scale?: unknown };
      readonly additionalPrinterColumns?: ReadonlyArray<unknown>;
    }>;
    readonly conversion?: {
      readonly strategy?: string;
      readonly webhook?: unknown;
      readonly webhookClientConfig?: unknown;
    };
  };
}

/** The parts of a Mutating/ValidatingWebhookConfiguration the check reads. */
export interface WebhookConfigurationLike {
  readonly kind?: string;
  readonly metadata?: { readonly name?: string };
  readonly webhooks?: ReadonlyArray<{
    readonly name: string;
    readonly rules?: ReadonlyArray<{ readonly apiGroups?: ReadonlyArray<string> }>;
  }>;
}

export type AbiViolation =
  | { readonly code: 'kind_missing'; readonly kind: string; readonly message: string }
  | { readonly code: 'kind_not_kernel'; readonly kind: string; readonly message: string }
  | { readonly code: 'kind_duplicated'; readonly kind: string; readonly message: string }
  | { readonly code: 'scope_mismatch'; readonly kind: string; readonly message: string }
  | { readonly code: 'version_set'; readonly kind: string; readonly message: string }
  | { readonly code: 'storage_version'; readonly kind: string; readonly message: string }
  | { readonly code: 'versions_differ'; readonly kind: string; readonly path: string; readonly message: string }
  | { readonly code: 'status_mismatch'; readonly kind: string; readonly message: string }
  | { readonly code: 'conversion_not_none'; readonly kind: string; readonly message: string }
  | { readonly code: 'admission_webhook'; readonly webhook: string; readonly message: string };

export interface AbiReport {
  readonly ok: boolean;
  readonly violations: ReadonlyArray<AbiViolation>;
  /** Webhooks seen that do not intercept the kernel group (not violations; listed for the operator). */
  readonly otherWebhooks: ReadonlyArray<string>;
}

/** First path where two JSON values differ (key order ignored), or undefined when they are equal. */
export const firstDifference = (a: unknown, b: unknown, path = ''): string | undefined => {
  if (a === b) return undefined;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return `${path} (length ${a.length} vs ${b.length})`;
    for (let i = 0; i < a.length; i++) {
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  if (
    a !== null &&
    b !== null &&
    typeof a === 'object' &&
    typeof b === 'object' &&
    !Array.isArray(a) &&
    !Array.isArray(b)
  ) {
    const ao = a as Record<string, unknown>;
    const bo = b as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(ao), ...Object.keys(bo)])].sort();
    for (const k of keys) {
      if (!(k in ao)) return `${path}.${k} (only in the second)`;
      if (!(k in bo)) return `${path}.${k} (only in the first)`;
      const d = firstDifference(ao[k], bo[k], `${path}.${k}`);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  return path === '' ? '<root>' : path;
};

const hasStatusField = (schema: unknown): boolean =>
  typeof schema === 'object' &&
  schema !== null &&
  typeof (schema as { properties?: unknown }).properties === 'object' &&
  'status' in ((schema as { properties: Record<string, unknown> }).properties ?? {});

/** Does this webhook see requests for the kernel group? (`*` matches every group.) */
const intercepts = (rules: ReadonlyArray<{ readonly apiGroups?: ReadonlyArray<string> }> | undefined): boolean =>
  (rules ?? []).some((r) => (r.apiGroups ?? []).some((g) => g === KOS_GROUP || g === '*'));

export const checkAbi = (input: {
  readonly crds: ReadonlyArray<CrdLike>;
  readonly webhookConfigurations: ReadonlyArray<WebhookConfigurationLike>;
}): AbiReport => {
  const violations: AbiViolation[] = [];
  const inGroup = input.crds.filter((c) => c.spec.group === KOS_GROUP);
  const seen = new Map<string, number>();
  for (const c of inGroup) seen.set(c.spec.names.kind, (seen.get(c.spec.names.kind) ?? 0) + 1);

  for (const kind of KERNEL_KINDS) {
    if (!seen.has(kind))
      violations.push({ code: 'kind_missing', kind, message: `kernel kind ${kind} has no CRD in ${KOS_GROUP}` });
  }
  for (const [kind, count] of [...seen.entries()].sort()) {
    if (!(KERNEL_KINDS as ReadonlyArray<string>).includes(kind)) {
      violations.push({
        code: 'kind_not_kernel',
        kind,
        message: `${kind} is not a kernel kind; ${KOS_GROUP} is a closed set of ten (C-19)`,
      });
    }
    if (count > 1) violations.push({ code: 'kind_duplicated', kind, message: `${kind} is defined by ${count} CRDs` });
  }

  for (const crd of inGroup) {
    const kind = crd.spec.names.kind;
    const info = (KIND_INFO as Record<string, (typeof KIND_INFO)[keyof typeof KIND_INFO] | undefined>)[kind];
    if (info === undefined) continue;
    if (crd.spec.scope !== info.scope) {
      violations.push({
        code: 'scope_mismatch',
        kind,
        message: `${kind} is ${crd.spec.scope}, the ABI says ${info.scope}`,
      });
    }
    const names = crd.spec.versions.map((v) => v.name).sort();
    const expected = [...KOS_VERSIONS].sort();
    const served = crd.spec.versions
      .filter((v) => v.served)
      .map((v) => v.name)
      .sort();
    if (firstDifference(names, expected) !== undefined || firstDifference(served, expected) !== undefined) {
      violations.push({
        code: 'version_set',
        kind,
        message: `${kind} serves [${served.join(', ')}] of [${names.join(', ')}]; the ABI serves exactly [${expected.join(', ')}]`,
      });
    }
    const storage = crd.spec.versions.filter((v) => v.storage).map((v) => v.name);
    if (storage.length !== 1 || storage[0] !== KOS_STORAGE_VERSION) {
      violations.push({
        code: 'storage_version',
        kind,
        message: `${kind} stores [${storage.join(', ')}]; the ABI stores ${KOS_STORAGE_VERSION}`,
      });
    }
    const [a, b] = KOS_VERSIONS.map((name) => crd.spec.versions.find((v) => v.name === name));
    if (a !== undefined && b !== undefined) {
      const shape = (v: typeof a) => ({
        schema: v.schema?.openAPIV3Schema,
        subresources: v.subresources ?? {},
        printerColumns: v.additionalPrinterColumns ?? [],
      });
      const diff = firstDifference(shape(a), shape(b));
      if (diff !== undefined) {
        violations.push({
          code: 'versions_differ',
          kind,
          path: diff,
          message: `${kind}: ${a.name} and ${b.name} differ at ${diff}`,
        });
      }
    }
    for (const v of crd.spec.versions) {
      const subresource = v.subresources?.status !== undefined;
      const field = hasStatusField(v.schema?.openAPIV3Schema);
      if (subresource !== info.status || field !== info.status) {
        violations.push({
          code: 'status_mismatch',
          kind,
          message: `${kind} ${v.name}: status subresource ${subresource}, status field ${field}; the ABI says ${info.status ? 'both' : 'neither'}`,
        });
      }
    }
    const conversion = crd.spec.conversion;
    if (
      (conversion?.strategy !== undefined && conversion.strategy !== 'None') ||
      conversion?.webhook !== undefined ||
      conversion?.webhookClientConfig !== undefined
    ) {
      violations.push({
        code: 'conversion_not_none',
        kind,
        message: `${kind}: conversion strategy ${conversion?.strategy ?? 'None'}${conversion?.webhook !== undefined || conversion?.webhookClientConfig !== undefined ? ' with a webhook' : ''}; the ABI has none`,
      });
    }
  }

  const otherWebhooks: string[] = [];
  for (const config of input.webhookConfigurations) {
    for (const hook of config.webhooks ?? []) {
      const id = `${config.kind ?? 'WebhookConfiguration'}/${config.metadata?.name ?? '?'}/${hook.name}`;
      if (intercepts(hook.rules)) {
        violations.push({
          code: 'admission_webhook',
          webhook: id,
          message: `admission webhook ${id} intercepts ${KOS_GROUP}; the ABI has none`,
        });
      } else {
        otherWebhooks.push(id);
      }
    }
  }
  return { ok: violations.length === 0, violations, otherWebhooks };
};

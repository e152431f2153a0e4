// The closed set of kernel kinds in kos.tsic.top (seed 000; digest §2.1). Extension kinds never live in this group
// (C-19): they belong to the extension's own API group.

export const KOS_GROUP = 'kos.tsic.top';
export const KOS_VERSIONS = ['v1alpha1', 'v1beta1'] as const;
export type KosVersion = (typeof KOS_VERSIONS)[number];
/** Both versions are served; this one is stored. */
export const KOS_STORAGE_VERSION: KosVersion = 'v1beta1';

export const KERNEL_KINDS = [
  'Application',
  'ApplicationDefinition',
  'Volume',
  'Endpoint',
  'Provider',
  'SystemComponent',
  'BackupPolicy',
  'RestoreJob',
  'NodeDevice',
  'VolumeMigration',
] as const;
export type KernelKind = (typeof KERNEL_KINDS)[number];

export interface KindInfo {
  readonly kind: KernelKind;
  readonly plural: string;
  readonly scope: 'Namespaced' | 'Cluster';
  /** Has a status writer ⇒ a status field and the status subresource (the other two have neither). */
  readonly status: boolean;
  /** Carries `spec.owner` (C-60; the five kinds of the account-transfer list). */
  readonly owned: boolean;
}

export const KIND_INFO: Readonly<Record<KernelKind, KindInfo>> = {
  Application: { kind: 'Application', plural: 'applications', scope: 'Namespaced', status: true, owned: true },
  ApplicationDefinition: {
    kind: 'ApplicationDefinition',
    plural: 'applicationdefinitions',
    scope: 'Cluster',
    status: false,
    owned: false,
  },
  Volume: { kind: 'Volume', plural: 'volumes', scope: 'Namespaced', status: true, owned: true },
  Endpoint: { kind: 'Endpoint', plural: 'endpoints', scope: 'Namespaced', status: true, owned: false },
  Provider: { kind: 'Provider', plural: 'providers', scope: 'Cluster', status: true, owned: false },
  SystemComponent: {
    kind: 'SystemComponent',
    plural: 'systemcomponents',
    scope: 'Cluster',
    status: true,
    owned: false,
  },
  BackupPolicy: { kind: 'BackupPolicy', plural: 'backuppolicies', scope: 'Namespaced', status: true, owned: true },
  RestoreJob: { kind: 'RestoreJob', plural: 'restorejobs', scope: 'Namespaced', status: true, owned: true },
  NodeDevice: { kind: 'NodeDevice', plural: 'nodedevices', scope: 'Cluster', status: false, owned: false },
  VolumeMigration: {
    kind: 'VolumeMigration',
    plural: 'volumemigrations',
    scope: 'Namespaced',
    status: true,
    owned: true,
  },
};

export const isKernelKind = (kind: string): kind is KernelKind =>
  (KERNEL_KINDS as ReadonlyArray<string>).includes(kind);

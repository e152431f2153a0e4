// kos.tsic.top/v1beta1 — the ten kernel kinds (the storage version) (seed 000, "API 组为 kos.tsic.top。十类对象…"; digest §2.1–§2.3).
//
// Only the fields the contracts fix are declared ("spec 字段由契约逐个加入：尚未固定字段的对象保持空 spec，实现不发明
// 线格式"). A field whose *name* a contract fixes but whose *shape* the seed does not give is `Opaque`: any JSON
// value, kept verbatim by the API server (x-kubernetes-preserve-unknown-fields) — decision 0031.
//
// This file is an explicit structural copy of ../v1alpha1/kinds.ts, not an alias: C-16 requires adjacent
// versions to have the same structure and the copy keeps any difference visible in code; the ABI self-check and a
// test prove the two stay equal.
import { Schema } from 'effect';
import { Conditions, DateTimeString, Int32, preserveUnknownFields, resource, withDefault } from '@homelab/crd';
import { StorageSize } from '../storage-size.js';

const apiVersion = 'kos.tsic.top/v1beta1';

/** A contract-named field whose structure is not fixed yet: any JSON value, stored verbatim. */
const Opaque = Schema.Unknown;

/** C-60: the owning account of the five owned kinds (written by the API from the session; immutable). */
const Owner = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253));

const NamespaceName = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(63),
  Schema.pattern(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/),
);

/** C-08 health states, in priority order. */
export const HealthState = Schema.Literal('Unknown', 'Unavailable', 'Degraded', 'Healthy');

/** The status every kind with a status writer carries: `status.phase`, `status.health.state`, the `Reconciled`
 * condition among `status.conditions`. */
const statusFields = {
  phase: Schema.optional(Schema.String),
  health: Schema.optional(Schema.Struct({ state: Schema.optional(HealthState) })),
  conditions: Schema.optional(Conditions),
};

// --- Application (Namespaced, status) -------------------------------------------------------------------------
export const ApplicationSpec = Schema.Struct({
  owner: Schema.optional(Owner), // C-60
  visibility: Schema.optional(Opaque), // C-59
  definitionRef: Schema.optional(Opaque), // C-32
  namespace: Schema.optional(NamespaceName), // C-32: the declared target namespace
  config: Schema.optional(Opaque), // C-32
  volumes: Schema.optional(Opaque), // C-32
  replicas: Schema.optional(Int32.pipe(Schema.greaterThanOrEqualTo(0))), // C-66
  paused: Schema.optional(Schema.Boolean), // C-66
  resources: Schema.optional(Opaque), // C-67
  driftPolicy: Schema.optional(Schema.Literal('reconcile', 'adopt', 'ignore').pipe(withDefault('reconcile'))), // C-34
});
export const ApplicationStatus = Schema.Struct({
  ...statusFields,
  retryCount: Schema.optional(Int32.pipe(Schema.greaterThanOrEqualTo(0))), // C-33
  nextRetryAt: Schema.optional(DateTimeString), // C-33
  uninstall: Schema.optional(Opaque), // C-33
  resources: Schema.optional(
    Schema.Struct({ unlimited: Schema.optional(Schema.Boolean), limitRange: Schema.optional(Opaque) }).pipe(
      preserveUnknownFields,
    ),
  ), // C-67
  resourceDefaults: Schema.optional(Opaque), // C-67
  drift: Schema.optional(Opaque), // C-34
  applied: Schema.optional(Schema.Struct({ renderDigest: Schema.optional(Schema.String) }).pipe(preserveUnknownFields)), // C-34
  upgrade: Schema.optional(Schema.Struct({ renderDigest: Schema.optional(Schema.String) }).pipe(preserveUnknownFields)), // C-34
});
export const Application = resource({
  apiVersion,
  kind: 'Application',
  spec: ApplicationSpec,
  status: ApplicationStatus,
});

// --- ApplicationDefinition (Cluster, no status writer ⇒ no status) --------------------------------------------
export const ApplicationDefinitionSpec = Schema.Struct({
  package: Schema.optional(Schema.Struct({ dataFormat: Schema.optional(Opaque) }).pipe(preserveUnknownFields)), // C-32, C-34
  config: Schema.optional(Opaque), // C-32: the config schema
  template: Schema.optional(Opaque), // C-32
  hooks: Schema.optional(Opaque), // C-32
  chart: Schema.optional(Opaque), // C-32
  requires: Schema.optional(Opaque), // C-32
  resources: Schema.optional(Opaque), // C-67: package defaults
});
export const ApplicationDefinition = resource({
  apiVersion,
  kind: 'ApplicationDefinition',
  spec: ApplicationDefinitionSpec,
});

// --- Volume (Namespaced, status) ------------------------------------------------------------------------------
export const VolumeSpec = Schema.Struct({
  owner: Schema.optional(Owner),
  size: Schema.optional(StorageSize), // §6.4: the PVC's storage request (absent: 1Gi); decision 0240
});
export const VolumeStatus = Schema.Struct({ ...statusFields });
export const Volume = resource({ apiVersion, kind: 'Volume', spec: VolumeSpec, status: VolumeStatus });

// --- Endpoint (Namespaced, status) ----------------------------------------------------------------------------
export const EndpointSpec = Schema.Struct({
  tls: Schema.optional(Schema.Struct({ issuerRef: Schema.optional(Opaque) }).pipe(preserveUnknownFields)), // C-45/C-46
  auth: Schema.optional(Schema.Struct({ providerRef: Schema.optional(Opaque) }).pipe(preserveUnknownFields)), // C-45
});
export const EndpointStatus = Schema.Struct({ ...statusFields, certificate: Schema.optional(Opaque) }); // C-46
export const Endpoint = resource({ apiVersion, kind: 'Endpoint', spec: EndpointSpec, status: EndpointStatus });

// --- Provider (Cluster, status) -------------------------------------------------------------------------------
export const ProviderSpec = Schema.Struct({});
export const ProviderStatus = Schema.Struct({ ...statusFields });
export const Provider = resource({ apiVersion, kind: 'Provider', spec: ProviderSpec, status: ProviderStatus });

// --- SystemComponent (Cluster, status) ------------------------------------------------------------------------
export const SystemComponentSpec = Schema.Struct({
  package: Schema.optional(Opaque), // C-17: artifact reference + sha256 digest
  disable: Schema.optional(Opaque), // C-28: disable request
});
export const SystemComponentStatus = Schema.Struct({ ...statusFields });
export const SystemComponent = resource({
  apiVersion,
  kind: 'SystemComponent',
  spec: SystemComponentSpec,
  status: SystemComponentStatus,
});

// --- BackupPolicy (Namespaced, status) ------------------------------------------------------------------------
export const BackupPolicySpec = Schema.Struct({
  owner: Schema.optional(Owner),
  selector: Schema.optional(Opaque), // C-41
  schedule: Schema.optional(Opaque),
  consistency: Schema.optional(Opaque),
  target: Schema.optional(Opaque),
  retention: Schema.optional(Opaque),
  drill: Schema.optional(Opaque),
});
export const BackupPolicyStatus = Schema.Struct({
  ...statusFields,
  lastBackup: Schema.optional(Opaque), // C-41: the four baseline items
  lastDrill: Schema.optional(Opaque),
  running: Schema.optional(Opaque), // the long action in progress
});
export const BackupPolicy = resource({
  apiVersion,
  kind: 'BackupPolicy',
  spec: BackupPolicySpec,
  status: BackupPolicyStatus,
});

// --- RestoreJob (Namespaced, status) --------------------------------------------------------------------------
export const RestoreJobSpec = Schema.Struct({
  owner: Schema.optional(Owner),
  policy: Schema.optional(Opaque), // C-42
  targetApplication: Schema.optional(Opaque),
  inPlace: Schema.optional(Schema.Boolean),
});
export const RestoreJobStatus = Schema.Struct({
  ...statusFields,
  backupPath: Schema.optional(Schema.String), // C-42: the resolved run directory
});
export const RestoreJob = resource({ apiVersion, kind: 'RestoreJob', spec: RestoreJobSpec, status: RestoreJobStatus });

// --- NodeDevice (Cluster, no status writer ⇒ no status) -------------------------------------------------------
export const NodeDeviceSpec = Schema.Struct({
  node: Schema.optional(Schema.String), // C-70
  collector: Schema.optional(Schema.String),
  observedAt: Schema.optional(DateTimeString),
  devices: Schema.optional(Schema.Array(Opaque)),
});
export const NodeDevice = resource({ apiVersion, kind: 'NodeDevice', spec: NodeDeviceSpec });

// --- VolumeMigration (Namespaced, status) ---------------------------------------------------------------------
export const VolumeMigrationSpec = Schema.Struct({ owner: Schema.optional(Owner) });
export const VolumeMigrationStatus = Schema.Struct({ ...statusFields });
export const VolumeMigration = resource({
  apiVersion,
  kind: 'VolumeMigration',
  spec: VolumeMigrationSpec,
  status: VolumeMigrationStatus,
});

/** The ten kinds of this version, by kind name. */
export const kinds = {
  Application,
  ApplicationDefinition,
  Volume,
  Endpoint,
  Provider,
  SystemComponent,
  BackupPolicy,
  RestoreJob,
  NodeDevice,
  VolumeMigration,
} as const;

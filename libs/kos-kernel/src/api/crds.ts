// The CRDs of the ten kinds, generated from the Schemas with @homelab/crd: both versions served, v1beta1 stored,
// `conversion: None`, the status subresource exactly for the eight kinds with a status writer.
import {
  type CustomResourceDefinition,
  customResourceDefinitionOrThrow,
  type PrinterColumn,
  renderYaml,
} from '@homelab/crd';
import { KERNEL_KINDS, KIND_INFO, KOS_GROUP, KOS_STORAGE_VERSION, type KernelKind } from './group.js';
import * as v1alpha1 from './v1alpha1/kinds.js';
import * as v1beta1 from './v1beta1/kinds.js';

/** Printer columns of the kinds with status (display only; decision 0032). */
const statusColumns: ReadonlyArray<PrinterColumn> = [
  { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
  { name: 'Health', type: 'string', jsonPath: '.status.health.state' },
  { name: 'Reconciled', type: 'string', jsonPath: ".status.conditions[?(@.type=='Reconciled')].status" },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

export const kosCrd = (kind: KernelKind): CustomResourceDefinition => {
  const info = KIND_INFO[kind];
  const version = (name: 'v1alpha1' | 'v1beta1') => ({
    name,
    schema: (name === 'v1alpha1' ? v1alpha1.kinds : v1beta1.kinds)[kind],
    served: true,
    storage: name === KOS_STORAGE_VERSION,
    status: info.status,
    ...(info.status ? { printerColumns: statusColumns } : {}),
  });
  return customResourceDefinitionOrThrow({
    group: KOS_GROUP,
    scope: info.scope,
    names: { kind, plural: info.plural, categories: ['kos'] },
    versions: [version('v1alpha1'), version('v1beta1')],
    labels: { 'app.kubernetes.io/part-of': 'kos' },
  });
};

/** All ten CRDs, in the order of the kind table. */
export const kosCrds = (): ReadonlyArray<CustomResourceDefinition> => KERNEL_KINDS.map(kosCrd);

/** The files of deploy/crds/kos/: one `<plural>.kos.tsic.top.yaml` per kind. */
export const kosCrdFiles = (): Readonly<Record<string, string>> =>
  Object.fromEntries(
    kosCrds().map((crd) => [
      `${crd.metadata.name}.yaml`,
      renderYaml([crd], {
        header: ['Generated from libs/kos-kernel/src/api (npm run generate -w @homelab/kos-kernel). Do not edit.'],
      }),
    ]),
  );

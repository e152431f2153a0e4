// The three CRDs, generated from the Schemas by `@homelab/crd`, and their rendered YAML files
// (checked into deploy/crds/ayatori/ and drift-checked by test/crds.test.ts).
import { customResourceDefinitionOrThrow, renderYaml, type CustomResourceDefinition } from '@homelab/crd';
import { PostgreSQLDatabaseCrd } from './database.js';
import { PostgreSQLInstanceCrd } from './instance.js';
import { PostgreSQLTenantCrd } from './tenant.js';

export const CrdDefinitions = [PostgreSQLInstanceCrd, PostgreSQLDatabaseCrd, PostgreSQLTenantCrd] as const;

export const customResourceDefinitions = (): ReadonlyArray<CustomResourceDefinition> =>
  CrdDefinitions.map((definition) => customResourceDefinitionOrThrow(definition));

/** File name → YAML, one file per CRD, named like the seed's `config/crd/bases`. */
export const crdManifestFiles = (): Readonly<Record<string, string>> =>
  Object.fromEntries(
    customResourceDefinitions().map((crd) => [
      `${crd.spec.group}_${crd.spec.names.plural}.yaml`,
      renderYaml([crd], {
        header: ['Generated from libs/ayatori-database/src/api (Effect Schemas) by @homelab/crd; do not edit.'],
      }),
    ]),
  );

// Shared by the test bed's own tests: a throw-away CRD whose names no other file or run uses.
import { uniqueName } from '../src/vitest/index.js';

/**
 * A namespaced CRD `<plural><random>.<group>` of kind `<kind><random>`, one version v1 (served, stored) with this
 * schema. Not installed: the test installs it (and deletes it where it must).
 */
export const scratchCrd = (
  group: string,
  pluralPrefix: string,
  kindPrefix: string,
  openAPIV3Schema: Record<string, unknown>,
) => {
  const unique = uniqueName('x').slice(2);
  const plural = `${pluralPrefix}${unique}`;
  const kind = `${kindPrefix}${unique}`;
  const crdName = `${plural}.${group}`;
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: crdName },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural, singular: plural.slice(0, -1), kind, listKind: `${kind}List` },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema } }],
    },
  };
  return { group, plural, kind, crdName, crd };
};

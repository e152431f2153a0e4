// Which keys an event enqueues (seed: controller/binding_setup.go, instance_setup.go), as pure functions over the
// cached objects. Watches only trigger; every decision re-reads through the API (see the use cases).
import { bindingTargetName } from '../domain/binding.js';

export interface TenantKey {
  readonly namespace: string;
  readonly name: string;
}

export interface TenantFacts extends TenantKey {
  readonly uid: string;
  readonly provisionInstance?: string | undefined;
  readonly existingDatabase?: string | undefined;
}

/** The `database.bindingTarget` index value of a Tenant: `spec.databaseRef.name`, else `tenant-<uid>`. */
export const tenantIndexValue = (tenant: TenantFacts): string =>
  bindingTargetName({ uid: tenant.uid, existingDatabase: tenant.existingDatabase });

/** A Database event enqueues the Tenants whose binding target is that Database's name. */
export const tenantsForDatabase = (database: string, tenants: ReadonlyArray<TenantFacts>): ReadonlyArray<TenantKey> =>
  tenants.filter((t) => tenantIndexValue(t) === database).map(({ namespace, name }) => ({ namespace, name }));

/**
 * An Instance event enqueues provision Tenants naming it, and databaseRef Tenants whose Database (from the cache)
 * names it. A Database missing from the cache maps to nothing (the 30 s recheck covers it).
 */
export const tenantsForInstance = (
  instance: string,
  tenants: ReadonlyArray<TenantFacts>,
  databaseInstance: (database: string) => string | undefined,
): ReadonlyArray<TenantKey> =>
  tenants
    .filter((t) =>
      t.provisionInstance !== undefined
        ? t.provisionInstance === instance
        : t.existingDatabase !== undefined && databaseInstance(t.existingDatabase) === instance,
    )
    .map(({ namespace, name }) => ({ namespace, name }));

/** A Secret event (metadata only) enqueues the Instances naming it, and only for the controller namespace. */
export const instancesForSecret = (
  secret: { readonly namespace: string; readonly name: string },
  secretNamespace: string,
  instances: ReadonlyArray<{ readonly name: string; readonly adminSecret: string }>,
): ReadonlyArray<string> =>
  secret.namespace !== secretNamespace ? [] : instances.filter((i) => i.adminSecret === secret.name).map((i) => i.name);

/** A Database or Tenant event enqueues the Instance it references (a databaseRef Tenant references none). */
export const instanceForReference = (
  object:
    | { readonly kind: 'Database'; readonly instanceRef: string }
    | { readonly kind: 'Tenant'; readonly provisionInstance?: string | undefined },
): ReadonlyArray<string> => {
  const name = object.kind === 'Database' ? object.instanceRef : object.provisionInstance;
  return name ? [name] : [];
};

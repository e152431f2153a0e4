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

/** What a Database event says about the Database, for `tenantsWokenByDatabase`. */
export interface DatabaseEventFacts {
  readonly name: string;
  /** `spec.source`: only a provisioned Database is written by its bound Tenant's round. */
  readonly provisioned: boolean;
  /** `spec.tenantRef` of a bound Database. */
  readonly tenantRef?: TenantKey | undefined;
  /** The event's object is at a resourceVersion this process's own write produced. */
  readonly ownWrite: boolean;
}

/**
 * The Tenants a Database event wakes (decision 0380): every Tenant whose binding target it is, except the bound
 * Tenant when the event is this process's own write of a provisioned Database — only that Tenant's round writes such a
 * Database, and it went on from exactly that state. Another process's change, an imported Database and every other
 * Tenant naming it still wake.
 */
export const tenantsWokenByDatabase = (
  database: DatabaseEventFacts,
  tenants: ReadonlyArray<TenantFacts>,
): ReadonlyArray<TenantKey> => {
  const keys = tenantsForDatabase(database.name, tenants);
  const bound = database.tenantRef;
  if (!database.provisioned || !database.ownWrite || bound === undefined) return keys;
  return keys.filter((k) => k.namespace !== bound.namespace || k.name !== bound.name);
};

/**
 * The Instances a Tenant or Database event wakes (decision 0380): the one it references, and only while that Instance
 * is being deleted — references matter only to a deleting Instance (InstanceInUse until none is left); the deletion
 * itself wakes the Instance, and that round lists the references from the API.
 */
export const instancesWokenByReference = (
  object: Parameters<typeof instanceForReference>[0],
  deleting: ReadonlySet<string>,
): ReadonlyArray<string> => instanceForReference(object).filter((i) => deleting.has(i));

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

// B's authorization rows on PostgreSQL: the policy stand-in's per-service version and the per-Network grant registry
// with its grant_version counter. Inside the authority store's fenced transaction; `lockRegistry` locks the
// counter row FOR UPDATE, so two productions of one Network never issue the same grant_version.
import type { GrantRegistryRow, GrantTx } from '../../application/grant-store.js';
import type { PolicySource } from '../../application/lease-store.js';
import { type TxConnection, lit } from './batch.js';

const S = 'service_control';

/** Appended to the authority store's numbered migrations. */
export const GRANT_MIGRATIONS: readonly string[] = [
  `CREATE TABLE ${S}.policy_version (service_id bytea PRIMARY KEY, version numeric(20) NOT NULL);
   CREATE TABLE ${S}.grant_counter (network_id bytea PRIMARY KEY, last_version numeric(20) NOT NULL);
   CREATE TABLE ${S}.grant_registry (network_id bytea NOT NULL, service_id bytea NOT NULL, consumer bytea NOT NULL,
     version numeric(20) NOT NULL, protocols text[] NOT NULL, policy_digest bytea NOT NULL,
     policy_version numeric(20) NOT NULL, state text NOT NULL CHECK (state IN ('active', 'withdrawn')),
     listener_revision numeric(20) NOT NULL, PRIMARY KEY (network_id, service_id, consumer));`,
];

const b = (v: unknown): Uint8Array => new Uint8Array(v as Buffer);
const hexOf = (v: unknown): string => (v as Buffer).toString('hex');

export const grantTx = (c: TxConnection): GrantTx => ({
  networkPolicy: (networkId) =>
    c.statement(
      `SELECT p.service_id, p.consumer, p.protocols, p.expiry::text AS expiry, NULL::text AS version FROM ${S}.policy_source p
         JOIN ${S}.service s ON s.service_id = p.service_id WHERE s.network_id = ${lit.bytea(networkId)}
       UNION ALL
       SELECT v.service_id, NULL, NULL, NULL, v.version::text FROM ${S}.policy_version v
         JOIN ${S}.service s ON s.service_id = v.service_id WHERE s.network_id = ${lit.bytea(networkId)}
       ORDER BY 1, 2`,
      (r) => {
        const sources = new Map<string, PolicySource[]>();
        const versions = new Map<string, bigint>();
        for (const row of r.rows) {
          const id = hexOf(row['service_id']);
          if (row['version'] !== null) {
            versions.set(id, BigInt(row['version'] as string));
            continue;
          }
          const list = sources.get(id) ?? [];
          list.push({
            consumer: b(row['consumer']),
            protocols: row['protocols'] as string[],
            expiry: row['expiry'] === null ? null : Number(row['expiry']),
          });
          sources.set(id, list);
        }
        return { sources, versions };
      },
    ),
  policyVersion: (serviceId, lock) =>
    c.statement(
      `SELECT version::text AS version FROM ${S}.policy_version WHERE service_id = ${lit.bytea(serviceId)}${lock === true ? ' FOR UPDATE' : ''}`,
      (r) => (r.rows[0] === undefined ? null : BigInt(r.rows[0]['version'] as string)),
    ),
  savePolicyVersion: async (serviceId, version) =>
    c.write(
      `INSERT INTO ${S}.policy_version VALUES (${lit.bytea(serviceId)}, ${lit.num(version)})
       ON CONFLICT (service_id) DO UPDATE SET version = excluded.version`,
    ),
  lockRegistry: async (networkId) => {
    // two statements of the same tick: one round trip; the counter row lock serialises the Network's productions
    const [lastVersion, rows] = await Promise.all([
      c.statement(
        `SELECT last_version::text AS v FROM ${S}.grant_counter WHERE network_id = ${lit.bytea(networkId)} FOR UPDATE`,
        (r) => (r.rows[0] === undefined ? null : BigInt(r.rows[0]['v'] as string)),
      ),
      c.statement(
        `SELECT service_id, consumer, version::text AS version, protocols, policy_digest, policy_version::text AS policy_version, state,
           listener_revision::text AS listener_revision FROM ${S}.grant_registry WHERE network_id = ${lit.bytea(networkId)}`,
        (r) =>
          r.rows.map((row): GrantRegistryRow => ({
            serviceId: b(row['service_id']),
            consumer: b(row['consumer']),
            version: BigInt(row['version'] as string),
            protocols: row['protocols'] as string[],
            policyDigest: b(row['policy_digest']),
            policyVersion: BigInt(row['policy_version'] as string),
            state: row['state'] as GrantRegistryRow['state'],
            listenerRevision: BigInt(row['listener_revision'] as string),
          })),
      ),
    ]);
    return { rows, lastVersion };
  },
  saveRegistry: async (networkId, rows, lastVersion) => {
    if (lastVersion !== null)
      c.write(
        `INSERT INTO ${S}.grant_counter VALUES (${lit.bytea(networkId)}, ${lit.num(lastVersion)})
         ON CONFLICT (network_id) DO UPDATE SET last_version = excluded.last_version`,
      );
    if (rows.length === 0) return;
    c.write(
      `INSERT INTO ${S}.grant_registry VALUES ${rows
        .map(
          (g) =>
            `(${lit.bytea(networkId)}, ${lit.bytea(g.serviceId)}, ${lit.bytea(g.consumer)}, ${lit.num(g.version)},
              ARRAY[${g.protocols.map((p) => lit.text(p)).join(', ')}]::text[], ${lit.bytea(g.policyDigest)}, ${lit.num(g.policyVersion)},
              ${lit.text(g.state)}, ${lit.num(g.listenerRevision)})`,
        )
        .join(', ')}
       ON CONFLICT (network_id, service_id, consumer) DO UPDATE SET version = excluded.version, protocols = excluded.protocols,
         policy_digest = excluded.policy_digest, policy_version = excluded.policy_version, state = excluded.state,
         listener_revision = excluded.listener_revision`,
    );
  },
});

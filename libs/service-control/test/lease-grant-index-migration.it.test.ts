// Decision 0760 on the machine's PostgreSQL: `lease_grant`'s one index comes as an appended migration. A database at
// the previous head (every migration before it, replayed as `migrate` ran them) holding grant rows, then migrated by
// the store, keeps its rows and ends with exactly the schema of a fresh database migrated in one go: lease_grant with
// the (holder, service_id, request_id) index only.
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { AUTHORITY_MIGRATIONS } from '../src/adapter/postgresql/authority-store.js';
import { LEASE_GRANT_ONE_INDEX_MIGRATION } from '../src/adapter/postgresql/lease-store.js';
import { migrate, migrateTo, schemaOf } from './fixtures/migrations.js';

const upgraded = useDatabase('sc_upgrade_0760');
const fresh = useDatabase('sc_fresh_0760');

/** The head before 0760: every migration before the one that replaces lease_grant's indexes. */
const PREVIOUS_HEAD = AUTHORITY_MIGRATIONS.indexOf(LEASE_GRANT_ONE_INDEX_MIGRATION);

const GRANTS = `SELECT encode(grant_id, 'hex') AS g, epoch::text, kind, encode(service_id, 'hex') AS s, encode(holder, 'hex') AS h,
  encode(request_id, 'hex') AS r, seq::text, deadline::text FROM service_control.lease_grant ORDER BY 1`;

describe('lease_grant with one index (decision 0760): the migration', () => {
  it('a database at the previous head, with grant rows, migrated again keeps them and has the schema of a fresh one', async () => {
    expect(PREVIOUS_HEAD).toBeGreaterThan(0);
    await migrateTo(upgraded.config, PREVIOUS_HEAD);
    const sql = sqlOn(upgraded);
    await sql(
      `INSERT INTO service_control.lease_grant (grant_id, epoch, kind, service_id, holder, network_id, generation, runtime_id,
         session_seq, seq, request_id, request_digest, deadline)
       SELECT sha256(int4send(g)), 1, CASE WHEN g % 3 = 0 THEN 'acquire' ELSE 'refresh' END, sha256(int4send(g % 7)),
         sha256(int4send(g % 5)), '\\x01', 1, '\\x02', 1, g, sha256(int4send(g + 1000)), '\\x03', 1000 + g
       FROM generate_series(1, 40) g`,
    );
    const rows = await sql(GRANTS);
    // the previous head as it was: three indexes
    expect(
      (
        (await sql(
          `SELECT count(*)::int AS n FROM pg_indexes WHERE schemaname = 'service_control' AND tablename = 'lease_grant'`,
        )) as { n: number }[]
      )[0]?.n,
    ).toBe(3);

    await migrate(upgraded.config);
    await migrate(fresh.config);
    expect(await sql(GRANTS)).toEqual(rows);
    const after = await schemaOf(upgraded);
    expect(
      (after.indexes as { indexdef: string }[])
        .filter((x) => x.indexdef.includes('.lease_grant '))
        .map((x) => x.indexdef),
    ).toEqual([
      'CREATE INDEX lease_grant_holder_service_id_request_id_idx ON service_control.lease_grant USING btree (holder, service_id, request_id)',
    ]);
    expect(after.version).toEqual([{ v: AUTHORITY_MIGRATIONS.length }]);
    expect(after).toEqual(await schemaOf(fresh));
  });
});

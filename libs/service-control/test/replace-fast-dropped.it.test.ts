// Decision 0690 on the machine's PostgreSQL: 0670's one-statement replace (`replace_fast`, `replace_norm`) is withdrawn
// by an appended migration that drops its functions. A database migrated to the previous head (every migration up to
// and including the one that created them, replayed as `migrate` ran them) and then migrated by the store ends with no
// such function and with exactly the schema of a fresh database migrated in one go.
import { useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { AUTHORITY_MIGRATIONS } from '../src/adapter/postgresql/authority-store.js';
import { migrate, migrateTo, schemaOf } from './fixtures/migrations.js';

const upgraded = useDatabase('sc_upgrade_0690');
const fresh = useDatabase('sc_fresh_0690');

/** 0670's head: the migrations up to and including the one that created `replace_fast`. */
const PREVIOUS_HEAD =
  AUTHORITY_MIGRATIONS.findIndex((m) => m.includes('CREATE FUNCTION service_control.replace_fast(')) + 1;

const names = (s: Awaited<ReturnType<typeof schemaOf>>) => s.functions.map((f) => (f as { name: string }).name);

describe('report.replace in one statement withdrawn (decision 0690)', () => {
  it('a database at 0670’s head, migrated again, has no replace_fast or replace_norm and the schema of a fresh database', async () => {
    expect(PREVIOUS_HEAD).toBeGreaterThan(0);
    await migrateTo(upgraded.config, PREVIOUS_HEAD);
    // the previous head as it was: the functions are there
    expect(names(await schemaOf(upgraded))).toEqual(expect.arrayContaining(['replace_fast', 'replace_norm']));

    await migrate(upgraded.config);
    await migrate(fresh.config);
    const after = await schemaOf(upgraded);
    expect(names(after)).not.toContain('replace_fast');
    expect(names(after)).not.toContain('replace_norm');
    expect(names(after)).toEqual(expect.arrayContaining(['replace_rows', 'replace_write'])); // the general path's
    expect(after.version).toEqual([{ v: AUTHORITY_MIGRATIONS.length }]);
    expect(after).toEqual(await schemaOf(fresh));
  });
});

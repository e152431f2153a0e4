// Start-up check of the PostgreSQL settings (issue 26, bad input): one connection and `SELECT 1`, so a wrong host,
// port, user, password or database name is a one-line start-up failure with its own exit code instead of a process
// that listens but can never be ready. The same connection reads the server settings nsd's tables rely on for their
// upkeep (decision 0720): a server that does not autovacuum is served, with a warning.
import pg from 'pg';

export interface DatabaseSettings {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly database: string;
  readonly password?: string;
}

/** The server settings the upkeep of nsd's tables depends on, as `pg_settings` gives them (`on` / `off`). */
export interface MaintenanceSettings {
  readonly autovacuum: string;
  readonly trackCounts: string;
}

/**
 * Warnings about a server that will not clean nsd's tables up (decision 0720). Every granted lease refresh inserts a
 * grant row and deletes the one before, so without autovacuum the dead rows and index entries pile up for as long as
 * nsd runs and every refresh walks more of them. Autovacuum needs `track_counts` too (it finds its work from them).
 */
export const maintenanceWarnings = (s: MaintenanceSettings): readonly string[] => [
  ...(s.autovacuum === 'on'
    ? []
    : [
        "autovacuum is off on this PostgreSQL server: nsd's lease tables gather dead rows with every refresh and refreshes slow down with uptime; turn autovacuum on, or VACUUM the service_control schema regularly",
      ]),
  ...(s.trackCounts === 'on'
    ? []
    : ["track_counts is off on this PostgreSQL server: autovacuum cannot tell which of nsd's tables need it"]),
];

/**
 * `{ problem }` when the database does not answer (PostgreSQL's or the socket's reason, one line), else the
 * `maintenanceWarnings` of its server.
 */
export const probeDatabase = async (
  settings: DatabaseSettings,
  timeoutMs = 10_000,
): Promise<{ readonly problem: string } | { readonly warnings: readonly string[] }> => {
  const client = new pg.Client({ ...settings, connectionTimeoutMillis: timeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const row = (
      await client.query<MaintenanceSettings>(
        `SELECT current_setting('autovacuum') AS autovacuum, current_setting('track_counts') AS "trackCounts"`,
      )
    ).rows[0] as MaintenanceSettings;
    return { warnings: maintenanceWarnings(row) };
  } catch (e) {
    const code = (e as { code?: string }).code;
    const message = e instanceof Error ? e.message : String(e);
    return {
      problem: (code !== undefined && !message.includes(code) ? `${message} (${code})` : message).split('\n')[0] ?? '',
    };
  } finally {
    await client.end().catch(() => undefined);
  }
};

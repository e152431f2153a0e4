// Start-up check of the PostgreSQL settings (issue 26, bad input): one connection and `SELECT 1`, so a wrong host,
// port, user, password or database name is a one-line start-up failure with its own exit code instead of a process
// that listens but can never be ready.
import pg from 'pg';

export interface DatabaseSettings {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly database: string;
  readonly password?: string;
}

/** `undefined` when the database answers, else PostgreSQL's or the socket's reason (one line). */
export const probeDatabase = async (settings: DatabaseSettings, timeoutMs = 10_000): Promise<string | undefined> => {
  const client = new pg.Client({ ...settings, connectionTimeoutMillis: timeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (e) {
    const code = (e as { code?: string }).code;
    const message = e instanceof Error ? e.message : String(e);
    return (code !== undefined && !message.includes(code) ? `${message} (${code})` : message).split('\n')[0];
  } finally {
    await client.end().catch(() => undefined);
  }
};

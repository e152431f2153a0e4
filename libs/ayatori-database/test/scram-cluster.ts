// A PostgreSQL cluster of the test file's own (issue 21, decision 0312): the machine's PostgreSQL trusts every local
// login, so no test against it can see a wrong password refused. This one is `initdb` from the machine's PostgreSQL
// binaries, run as the `postgres` user on a free port, `scram-sha-256` for every login, TLS only (`hostssl`; plain
// connections are rejected) with the machine's snakeoil certificate (DNS SAN `localhost`, the root bundle of the
// tests). Stopped (immediate) and removed after the file.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';

const bin = '/usr/lib/postgresql/15/bin';
export const snakeoilCert = '/etc/ssl/certs/ssl-cert-snakeoil.pem';
const snakeoilKey = '/etc/ssl/private/ssl-cert-snakeoil.key';

export interface ScramCluster {
  readonly port: number;
  readonly superuser: string;
  readonly superuserPassword: string;
  /** The CA bundle clients verify the server with (the self-signed server certificate itself). */
  readonly rootCert: string;
  /** A query as the superuser over TLS (verify-full). */
  readonly query: (text: string, values?: unknown[], database?: string) => Promise<Array<Record<string, unknown>>>;
  readonly stop: () => void;
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });

const asPostgres = (args: ReadonlyArray<string>) =>
  execFileSync('runuser', ['-u', 'postgres', '--', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });

export const startScramCluster = async (): Promise<ScramCluster> => {
  const dir = mkdtempSync('/tmp/ay-scram-');
  const ids = execFileSync('id', ['-u', 'postgres']).toString().trim();
  const gid = execFileSync('id', ['-g', 'postgres']).toString().trim();
  chownSync(dir, Number(ids), Number(gid));
  const superuserPassword = randomBytes(24).toString('base64url');
  const pwfile = join(dir, 'pw');
  writeFileSync(pwfile, `${superuserPassword}\n`, { mode: 0o600 });
  chownSync(pwfile, Number(ids), Number(gid));
  const data = join(dir, 'data');
  asPostgres([
    `${bin}/initdb`,
    '-D',
    data,
    '-U',
    'postgres',
    `--pwfile=${pwfile}`,
    '--auth=scram-sha-256',
    '--no-sync',
    '--no-instructions',
  ]);
  rmSync(pwfile);
  const port = await freePort();
  appendFileSync(
    join(data, 'postgresql.conf'),
    [
      `port = ${port}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${dir}'`,
      'ssl = on',
      `ssl_cert_file = '${snakeoilCert}'`,
      `ssl_key_file = '${snakeoilKey}'`,
      "password_encryption = 'scram-sha-256'",
      'fsync = off',
      'max_connections = 50',
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(data, 'pg_hba.conf'),
    [
      'local all all scram-sha-256',
      'hostssl all all 127.0.0.1/32 scram-sha-256',
      'hostnossl all all 127.0.0.1/32 reject',
      '',
    ].join('\n'),
  );
  asPostgres([`${bin}/pg_ctl`, '-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', 'start']);
  const rootCert = readFileSync(snakeoilCert, 'utf8');
  const query = async (text: string, values: unknown[] = [], database = 'postgres') => {
    const c = new pg.Client({
      host: 'localhost',
      port,
      user: 'postgres',
      password: superuserPassword,
      database,
      ssl: { ca: rootCert, servername: 'localhost' },
    });
    await c.connect();
    try {
      return (await c.query(text, values)).rows as Array<Record<string, unknown>>;
    } finally {
      await c.end();
    }
  };
  return {
    port,
    superuser: 'postgres',
    superuserPassword,
    rootCert,
    query,
    stop: () => {
      try {
        asPostgres([`${bin}/pg_ctl`, '-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
};

// A PostgreSQL cluster of the test bed's own that checks passwords (issue 21, decision 0382; was one cluster per test
// file, decision 0312). The machine's PostgreSQL (127.0.0.1:5432) trusts every local login, so no test against it can
// see a wrong password refused. This one: `initdb` from the machine's PostgreSQL binaries (the newest under
// /usr/lib/postgresql), run as the `postgres` user when the test bed runs as root, on a free loopback port;
// `scram-sha-256` for every login, TLS only (`hostssl`; plain connections rejected) with a serving certificate for
// `localhost`/127.0.0.1 signed by the test bed's CA. fsync off (disposable data). Stopped (`-m immediate`) and its
// directory removed when the scope closes.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect } from 'effect';
import pg from 'pg';
import { TestbedError } from './errors.js';
import { freePort } from './net.js';
import { createPki, issueCertificate } from './pki.js';

/** What tests need to reach the cluster (part of the state file, `scramPostgres`). */
export interface ScramPostgres {
  /** The certificate's name (`localhost`): connect to `hostaddr`, verify against `host`. */
  readonly host: string;
  readonly hostaddr: string;
  readonly port: number;
  readonly superuser: string;
  readonly password: string;
  /** The test bed's CA (PEM): `sslmode=verify-full` with it as the root bundle. */
  readonly caCert: string;
  readonly version: string;
}

const fail = (reason: string) => new TestbedError({ component: 'postgresql', reason });

/** The machine's newest PostgreSQL server binaries (Debian layout), or undefined. */
export const postgresBinDir = (root = '/usr/lib/postgresql'): string | undefined => {
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
};

const run = (asPostgres: boolean, args: ReadonlyArray<string>): void => {
  const [command, ...rest] = asPostgres ? ['runuser', '-u', 'postgres', '--', ...args] : args;
  execFileSync(command as string, rest, { stdio: ['ignore', 'pipe', 'pipe'] });
};

const describe = (e: unknown): string => {
  const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim();
  return stderr !== undefined && stderr !== '' ? stderr.slice(-500) : e instanceof Error ? e.message : String(e);
};

/** A superuser query over TLS (verify-full against the CA), on a connection of its own. */
export const scramQuery = async (
  cluster: ScramPostgres,
  text: string,
  values: unknown[] = [],
  database = 'postgres',
): Promise<Array<Record<string, unknown>>> => {
  const client = new pg.Client({
    host: cluster.hostaddr,
    port: cluster.port,
    user: cluster.superuser,
    password: cluster.password,
    database,
    ssl: { ca: cluster.caCert, servername: cluster.host },
    connectionTimeoutMillis: 10_000,
  });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as Array<Record<string, unknown>>;
  } finally {
    await client.end();
  }
};

/**
 * Starts the cluster in the caller's scope; `pkiDir` is the directory of the test bed's CA (`createPki`), where its
 * serving certificate is issued. Fails (TestbedError) when there are no PostgreSQL binaries, or when running as root
 * without a `postgres` user; the caller reports it as unavailable.
 */
export const startScramPostgres = (
  pkiDir: string,
  caCert: string,
  progress: (line: string) => void = () => undefined,
) =>
  Effect.gen(function* () {
    const bin = postgresBinDir();
    if (bin === undefined) return yield* fail('no PostgreSQL server binaries under /usr/lib/postgresql');
    const asPostgres = process.getuid?.() === 0;
    const owner = asPostgres
      ? yield* Effect.try({
          try: () => ({
            uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
            gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
          }),
          catch: () => fail('running as root and there is no postgres user to run the cluster as'),
        })
      : undefined;
    const serving = yield* issueCertificate(
      pkiDir,
      'postgresql-scram',
      '/CN=localhost',
      'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n',
    );
    const port = yield* freePort();
    const started = Date.now();
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), 'homelab-testbed-pg-'))),
      (d) =>
        Effect.sync(() => {
          try {
            run(asPostgres, [join(bin, 'pg_ctl'), '-D', join(d, 'data'), '-m', 'immediate', '-w', 'stop']);
          } catch {
            /* not running (a failed start) */
          }
          rmSync(d, { recursive: true, force: true });
        }),
    );
    const password = randomBytes(24).toString('base64url');
    const data = join(dir, 'data');
    yield* Effect.try({
      try: () => {
        const own = (f: string) => (owner === undefined ? undefined : chownSync(f, owner.uid, owner.gid));
        own(dir);
        // the key must belong to the server's user with mode 0600, so the cluster gets copies of its own
        copyFileSync(serving.certFile, join(dir, 'server.crt'));
        copyFileSync(serving.keyFile, join(dir, 'server.key'));
        own(join(dir, 'server.crt'));
        own(join(dir, 'server.key'));
        writeFileSync(join(dir, 'pw'), `${password}\n`, { mode: 0o600 });
        own(join(dir, 'pw'));
        run(asPostgres, [
          join(bin, 'initdb'),
          '-D',
          data,
          '-U',
          'postgres',
          `--pwfile=${join(dir, 'pw')}`,
          '--auth=scram-sha-256',
          '--no-sync',
          '--no-instructions',
        ]);
        rmSync(join(dir, 'pw'));
        appendFileSync(
          join(data, 'postgresql.conf'),
          [
            `port = ${port}`,
            "listen_addresses = '127.0.0.1'",
            `unix_socket_directories = '${dir}'`,
            'ssl = on',
            `ssl_cert_file = '${join(dir, 'server.crt')}'`,
            `ssl_key_file = '${join(dir, 'server.key')}'`,
            "password_encryption = 'scram-sha-256'",
            'fsync = off',
            'synchronous_commit = off',
            'full_page_writes = off',
            'max_connections = 200',
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
        own(join(data, 'pg_hba.conf'));
        run(asPostgres, [join(bin, 'pg_ctl'), '-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', 'start']);
      },
      catch: (e) => fail(`SCRAM cluster did not start: ${describe(e)}`),
    });
    const cluster: Omit<ScramPostgres, 'version'> = {
      host: 'localhost',
      hostaddr: '127.0.0.1',
      port,
      superuser: 'postgres',
      password,
      caCert,
    };
    const version = yield* Effect.tryPromise({
      try: async () =>
        String((await scramQuery({ ...cluster, version: '' }, 'SHOW server_version'))[0]?.['server_version']),
      catch: (e) => fail(`SCRAM cluster started but refused the superuser over TLS: ${describe(e)}`),
    });
    progress(`postgresql ${version} (scram-sha-256, TLS only) ready at 127.0.0.1:${port} (${Date.now() - started} ms)`);
    return { ...cluster, version } satisfies ScramPostgres;
  });

/**
 * The same cluster for a process that has no test bed CA at hand (a test file whose running test bed predates the
 * service): a throw-away CA of its own in a temporary directory, removed with the scope.
 */
export const startStandaloneScramPostgres = () =>
  Effect.gen(function* () {
    const pkiDir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), 'homelab-testbed-pki-'))),
      (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true })),
    );
    const pki = yield* createPki(pkiDir);
    return yield* startScramPostgres(pkiDir, pki.caCert);
  });

// A PostgreSQL cluster of the test bed's own that checks passwords (issue 21, decision 0382; was one cluster per test
// file, decision 0312). The machine's PostgreSQL (127.0.0.1:5432) trusts every local login, so no test against it can
// see a wrong password refused. This one: `initdb` from the machine's PostgreSQL binaries (the newest under
// /usr/lib/postgresql), run as the `postgres` user when the test bed runs as root, on a free loopback port;
// `scram-sha-256` for every login, TLS only (`hostssl`; plain connections rejected) with a serving certificate for
// `localhost`/127.0.0.1 signed by the test bed's CA. fsync off (disposable data). Stopped (`-m immediate`) and its
// directory removed when the scope closes. The directory records its owner (`owner.json`: the starting process's pid
// and start time); a cluster whose owner died without closing its scope (SIGKILL) is stopped and removed by the next
// start or `testbed down` (`reapOrphanedScramClusters`, decision 0420).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
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
  connectionTimeoutMillis = 10_000,
): Promise<Array<Record<string, unknown>>> => {
  const client = new pg.Client({
    host: cluster.hostaddr,
    port: cluster.port,
    user: cluster.superuser,
    password: cluster.password,
    database,
    ssl: { ca: cluster.caCert, servername: cluster.host },
    connectionTimeoutMillis,
  });
  client.on('error', () => undefined); // a server that goes away mid-query fails the query, not the process
  await client.connect();
  try {
    return (await client.query(text, values)).rows as Array<Record<string, unknown>>;
  } finally {
    await client.end();
  }
};

/** What `testbed status` reports of the cluster: it answered its superuser over TLS (with its version), or why not. */
export type ScramHealth =
  { readonly ready: true; readonly version: string } | { readonly ready: false; readonly reason: string };

/**
 * Whether the cluster is alive as the state file describes it: a real login of the superuser with its password
 * (scram-sha-256) over TLS verified against the CA for `host` — the way every test reaches it — and one query.
 */
export const scramHealth = async (cluster: ScramPostgres, timeoutMs = 5_000): Promise<ScramHealth> => {
  try {
    const rows = await scramQuery(cluster, 'SHOW server_version', [], 'postgres', timeoutMs);
    return { ready: true, version: String(rows[0]?.['server_version']) };
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    return { ready: false, reason: `${typeof code === 'string' ? `${code}: ` : ''}${describe(e)}` };
  }
};

/** Every cluster directory starts with this (under the OS temporary directory). */
export const clusterDirPrefix = 'homelab-testbed-pg-';
/** The owner record beside the data directory (decision 0420). */
const ownerFile = 'owner.json';

interface Owner {
  readonly pid: number;
  /** The owner's start time (`/proc/<pid>/stat` field 22, clock ticks since boot): a reused pid is not the owner. */
  readonly startTime: string | null;
  /** The binaries that started the cluster (its `pg_ctl` stops it), and whether they ran as `postgres`. */
  readonly bin: string;
  readonly asPostgres: boolean;
}

/** A process's start time from /proc (undefined when the process or /proc is not there). */
export const processStartTime = (pid: number): string | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
};

const ownerAlive = (owner: Owner): boolean => {
  const started = processStartTime(owner.pid);
  if (started !== undefined) return owner.startTime === null || owner.startTime === started;
  try {
    process.kill(owner.pid, 0); // no /proc: the pid alone
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

const readOwner = (dir: string): Owner | undefined => {
  try {
    const o = JSON.parse(readFileSync(join(dir, ownerFile), 'utf8')) as Partial<Owner>;
    return typeof o.pid === 'number' && typeof o.bin === 'string' && typeof o.asPostgres === 'boolean'
      ? {
          pid: o.pid,
          startTime: typeof o.startTime === 'string' ? o.startTime : null,
          bin: o.bin,
          asPostgres: o.asPostgres,
        }
      : undefined;
  } catch {
    return undefined;
  }
};

/** Stops a cluster (`pg_ctl -m immediate`) and removes its directory; a cluster that is not running is only removed. */
const stopAndRemove = (dir: string, bin: string, asPostgres: boolean): void => {
  try {
    run(asPostgres, [join(bin, 'pg_ctl'), '-D', join(dir, 'data'), '-m', 'immediate', '-w', 'stop']);
  } catch {
    /* not running (a failed start, or its server already gone) */
  }
  rmSync(dir, { recursive: true, force: true });
};

/**
 * The clusters of test beds (or test files) that died without stopping them (SIGKILL, a crash): every
 * `homelab-testbed-pg-*` directory whose owner record names a process that is gone (or a pid now used by another
 * process) is stopped and removed, one progress line each. A directory without an owner record is left alone: it is
 * being set up right now (the record is written right after the directory is made) or was made by code older than
 * the record, and whether its owner lives cannot be told. Never fails: what cannot be stopped is reported.
 */
export const reapOrphanedScramClusters = (
  progress: (line: string) => void = () => undefined,
  root: string = tmpdir(),
): ReadonlyArray<string> => {
  let names: string[];
  try {
    names = readdirSync(root).filter((n) => n.startsWith(clusterDirPrefix));
  } catch {
    return [];
  }
  const reaped: string[] = [];
  for (const name of names) {
    const dir = join(root, name);
    const owner = readOwner(dir);
    if (owner === undefined || ownerAlive(owner)) continue;
    try {
      stopAndRemove(dir, owner.bin, owner.asPostgres);
      reaped.push(dir);
      progress(`stopped and removed the SCRAM PostgreSQL cluster ${dir} of a process that is gone (pid ${owner.pid})`);
    } catch (e) {
      progress(
        `could not remove the orphaned SCRAM PostgreSQL cluster ${dir} (pid ${owner.pid} is gone): ${describe(e)}`,
      );
    }
  }
  return reaped;
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
    yield* Effect.sync(() => reapOrphanedScramClusters(progress));
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const d = mkdtempSync(join(tmpdir(), clusterDirPrefix));
        const owner: Owner = { pid: process.pid, startTime: processStartTime(process.pid) ?? null, bin, asPostgres };
        writeFileSync(join(d, ownerFile), `${JSON.stringify(owner)}\n`);
        return d;
      }),
      (d) => Effect.sync(() => stopAndRemove(d, bin, asPostgres)),
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

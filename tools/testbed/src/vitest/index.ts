// Per-file isolation on the shared test bed: each helper registers beforeAll/afterAll hooks that create a
// fresh namespace / database / KV path for the calling test file and clean it up afterwards. Below them, the
// fixtures test files of several projects share (polling, admin SQL, raw API objects, a scoped start-up).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect, Exit, Scope } from 'effect';
import { writeBusyboxImage, type BusyboxImageSpec } from '../images.js';
import { importImages } from '../node.js';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { installCrdsOn, kubeCall, type CrdManifest } from '../kube-api.js';
import { httpCall, type HttpResponse } from '../net.js';
import type { TestbedState } from '../state.js';
import { type ScramPostgres, scramQuery, startStandaloneScramPostgres } from '../scram-postgres.js';

export type { TestbedState } from '../state.js';
export type { ScramPostgres } from '../scram-postgres.js';
export type { BusyboxImageSpec, ImageFiles } from '../images.js';
export { httpCall, type HttpOptions, type HttpResponse } from '../net.js';

/** The running test bed (provided by the global setup). */
export const testbed = (): TestbedState => {
  const state = inject('homelabTestbed');
  if (!state) throw new Error("no test bed: add { testbed: true } to this project's vitest config");
  return state;
};

export const uniqueName = (prefix: string): string => `${prefix}-${randomBytes(4).toString('hex')}`;

/**
 * A raw, authenticated call to the test bed's kube-apiserver (for smoke tests and fixtures). Like client-go, it
 * waits and retries when the server answers 429 with Retry-After, at most 30 s in all.
 */
export const kubeRequest = (
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<HttpResponse & { json: () => unknown }> => kubeCall(testbed().kube, method, path, body, contentType);

/**
 * Delete each named object of `collection` (an API path such as `/apis/g/v1/things`) after removing its finalizers:
 * the tear-down of objects whose gate only a controller under test would have released. Missing objects are fine.
 */
export const deleteReleasingFinalizers = async (collection: string, names: Iterable<string>): Promise<void> => {
  for (const name of names) {
    await kubeRequest(
      'PATCH',
      `${collection}/${name}`,
      { metadata: { finalizers: null } },
      'application/merge-patch+json',
    );
    await kubeRequest('DELETE', `${collection}/${name}`);
  }
};

/**
 * Creates (or replaces) CRDs and waits until each is Established **and** every served version answers a list
 * with 200 — Established alone does not mean the storage for the new resource is ready to serve.
 */
export const installCrds = (crds: ReadonlyArray<CrdManifest>, timeoutMs = 60_000): Promise<void> =>
  installCrdsOn(testbed().kube, crds, timeoutMs);

const lazy = <T>(what: string) => {
  let value: T | undefined;
  return {
    set: (v: T) => (value = v),
    get: (): T => {
      if (value === undefined) throw new Error(`${what} is only available inside tests (after beforeAll)`);
      return value;
    },
  };
};

/**
 * A namespace of its own for this test file (unique name, so files stay independent), deleted after the file. The
 * test bed's namespace controller then empties and removes it in the background; nothing waits for that.
 */
export const useNamespace = (prefix = 'test'): { readonly name: string } => {
  const cell = lazy<string>('namespace');
  beforeAll(async () => {
    const name = uniqueName(prefix);
    const res = await kubeRequest('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name },
    });
    if (res.status !== 201) throw new Error(`creating namespace ${name}: ${res.status} ${res.body}`);
    cell.set(name);
  });
  afterAll(async () => {
    await kubeRequest('DELETE', `/api/v1/namespaces/${cell.get()}`);
  });
  return {
    get name() {
      return cell.get();
    },
  };
};

export interface TestDatabase {
  readonly database: string;
  readonly host: string;
  readonly port: number;
  readonly user: string;
  /** An admin client config for this database. */
  readonly config: pg.ClientConfig;
}

/**
 * Wait (≤ 1 s) until the database has no sessions left. `pg.Pool.end()` resolves as soon as it has asked its clients to
 * close, before their backends have exited; `DROP DATABASE … WITH (FORCE)` then terminates those backends, and the
 * closing client receives the FATAL as an unhandled `error` event in the test process (seen under load). A connection a
 * test really left open is still dropped after the wait.
 */
const closedConnectionsGone = async (
  database: string,
  sessions: (sql: string) => Promise<number> = async (sql) => ((await adminQuery(sql)).rows[0] as { n: number }).n,
): Promise<void> => {
  const sql = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = ${pgLiteral(database)} AND pid <> pg_backend_pid()`;
  for (let i = 0; i < 50; i++) {
    if ((await sessions(sql)) === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

const pgLiteral = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/** A fresh PostgreSQL database for this test file, dropped (with its connections) afterwards. */
export const useDatabase = (prefix = 't'): TestDatabase => {
  const cell = lazy<TestDatabase>('database');
  beforeAll(async () => {
    const { postgres } = testbed();
    const database = uniqueName(prefix).replaceAll('-', '_');
    await adminQuery(`CREATE DATABASE "${database}"`);
    cell.set({
      database,
      host: postgres.host,
      port: postgres.port,
      user: postgres.user,
      config: { host: postgres.host, port: postgres.port, user: postgres.user, database },
    });
  });
  afterAll(async () => {
    const { database } = cell.get();
    await closedConnectionsGone(database);
    await adminQuery(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  });
  return {
    get database() {
      return cell.get().database;
    },
    get host() {
      return cell.get().host;
    },
    get port() {
      return cell.get().port;
    },
    get user() {
      return cell.get().user;
    },
    get config() {
      return cell.get().config;
    },
  };
};

export interface TestKvPath {
  readonly addr: string;
  readonly token: string;
  readonly mount: string;
  /** A path prefix (no leading or trailing slash) owned by this test file. */
  readonly base: string;
}

/** OpenBao call helper against the test bed's dev server. */
export const baoRequest = (method: string, path: string, body?: unknown): Promise<HttpResponse> => {
  const { openbao } = testbed();
  if (!openbao.available) throw new Error(`OpenBao is unavailable on this test bed: ${openbao.reason}`);
  return httpCall(`${openbao.addr}/v1/${path}`, {
    method,
    headers: { 'x-vault-token': openbao.token, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
};

const deleteKvTree = async (mount: string, path: string): Promise<void> => {
  const list = await baoRequest('LIST', `${mount}/metadata/${path}/`);
  if (list.status === 200) {
    const keys = (JSON.parse(list.body) as { data: { keys: string[] } }).data.keys;
    for (const key of keys) {
      if (key.endsWith('/')) await deleteKvTree(mount, `${path}/${key.slice(0, -1)}`);
      else await baoRequest('DELETE', `${mount}/metadata/${path}/${key}`);
    }
  }
  await baoRequest('DELETE', `${mount}/metadata/${path}`);
};

/** A KV v2 path prefix of its own for this test file; everything under it is deleted afterwards. */
export const useKvPath = (prefix = 'tests'): TestKvPath => {
  const cell = lazy<TestKvPath>('KV path');
  beforeAll(() => {
    const { openbao } = testbed();
    if (!openbao.available) throw new Error(`OpenBao is unavailable on this test bed: ${openbao.reason}`);
    cell.set({
      addr: openbao.addr,
      token: openbao.token,
      mount: openbao.kvMount,
      base: `${prefix}/${uniqueName('kv')}`,
    });
  });
  afterAll(async () => {
    const kv = cell.get();
    await deleteKvTree(kv.mount, kv.base);
  });
  return {
    get addr() {
      return cell.get().addr;
    },
    get token() {
      return cell.get().token;
    },
    get mount() {
      return cell.get().mount;
    },
    get base() {
      return cell.get().base;
    },
  };
};

export interface TestScramPostgres extends ScramPostgres {
  /** A database of this file's own (unique name), dropped with its connections after the file. */
  readonly database: string;
  /** A superuser query over TLS (verify-full against `caCert`), in the file's database unless another is named. */
  readonly query: (text: string, values?: unknown[], database?: string) => Promise<Array<Record<string, unknown>>>;
  /** True when the running test bed's state has no such cluster and this file started one of its own. */
  readonly own: boolean;
}

/**
 * The test bed's password-checking PostgreSQL cluster (scram-sha-256, TLS only; decision 0382) for this file, with a
 * database of the file's own. Roles the file creates are its own to drop (unique names: the cluster is shared). A
 * running test bed started before the service existed has none in its state: then the file starts a cluster of its
 * own (same recipe, a throw-away CA) and stops it after the file.
 */
export const useScramPostgres = (prefix = 't'): TestScramPostgres => {
  const cell = lazy<TestScramPostgres>('SCRAM PostgreSQL');
  let scope: Scope.CloseableScope | undefined;
  beforeAll(async () => {
    const shared = testbed().scramPostgres;
    let cluster: ScramPostgres;
    if (shared?.available === true) cluster = shared;
    else {
      scope = Effect.runSync(Scope.make());
      cluster = await Effect.runPromise(startStandaloneScramPostgres().pipe(Scope.extend(scope)));
    }
    const database = uniqueName(prefix).replaceAll('-', '_');
    await scramQuery(cluster, `CREATE DATABASE "${database}"`);
    cell.set({
      ...cluster,
      database,
      query: (text, values = [], db = database) => scramQuery(cluster, text, values, db),
      own: scope !== undefined,
    });
  }, 120_000);
  afterAll(async () => {
    try {
      const c = cell.get();
      await closedConnectionsGone(c.database, async (sql) => (await scramQuery(c, sql))[0]?.['n'] as number);
      await scramQuery(c, `DROP DATABASE IF EXISTS "${c.database}" WITH (FORCE)`);
    } finally {
      if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void));
    }
  }, 60_000);
  return {
    get host() {
      return cell.get().host;
    },
    get hostaddr() {
      return cell.get().hostaddr;
    },
    get port() {
      return cell.get().port;
    },
    get superuser() {
      return cell.get().superuser;
    },
    get password() {
      return cell.get().password;
    },
    get caCert() {
      return cell.get().caCert;
    },
    get version() {
      return cell.get().version;
    },
    get database() {
      return cell.get().database;
    },
    get own() {
      return cell.get().own;
    },
    query: (text, values, database) => cell.get().query(text, values, database),
  };
};

// ---- Fixtures shared by test files on the test bed (one home instead of a copy per file). ----

/**
 * Polls `check` every `intervalMs` until it holds, and returns how long that took; fails with
 * `not within <timeoutMs> ms: <what>` when it never does.
 */
export const eventually = async (
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
  intervalMs = 100,
): Promise<number> => {
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    if (await check()) return Date.now() - start;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`not within ${timeoutMs} ms: ${what}`);
};

/** One statement on the test bed's PostgreSQL as its admin user, on a connection of its own (closed afterwards). */
/** One query on a test database, on a fresh connection each (tests run next to SIGKILLed processes); the rows. */
export const sqlOn =
  (db: TestDatabase) =>
  async (text: string, values: unknown[] = []): Promise<Record<string, unknown>[]> => {
    const client = new pg.Client(db.config);
    await client.connect();
    try {
      return (await client.query(text, values)).rows as Record<string, unknown>[];
    } finally {
      await client.end();
    }
  };

export const adminQuery = async (text: string): Promise<pg.QueryResult> => {
  const { postgres } = testbed();
  const client = new pg.Client({
    host: postgres.host,
    port: postgres.port,
    user: postgres.user,
    database: postgres.database,
  });
  await client.connect();
  try {
    return await client.query(text);
  } finally {
    await client.end();
  }
};

/** What the object fixtures read of an API object. */
export interface ObjectMeta {
  readonly metadata: { readonly name: string; readonly finalizers?: ReadonlyArray<string> };
}

export interface KubeObjects<T extends ObjectMeta> {
  /** The paths `post` created, oldest first: the file purges them (newest first) after its tests. */
  readonly created: string[];
  /** The object, or undefined when the API server answers 404 (any other answer fails: it is not "gone"). */
  readonly get: (path: string) => Promise<T | undefined>;
  /** The object; fails when it does not exist. */
  readonly must: (path: string) => Promise<T>;
  /** Creates the object (201 expected) and records its path in `created`. */
  readonly post: (collection: string, body: Record<string, unknown>) => Promise<T>;
  /** Clears the finalizers, then deletes (test clean-up only; a 409 from a concurrent write is retried). */
  readonly purge: (path: string) => Promise<void>;
}

/** Raw access to the API objects of one test file, typed as that file reads them. */
export const kubeObjects = <T extends ObjectMeta>(): KubeObjects<T> => {
  const created: string[] = [];
  const get = async (path: string): Promise<T | undefined> => {
    const r = await kubeRequest('GET', path);
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${r.body}`);
    return r.json() as T;
  };
  const must = async (path: string): Promise<T> => {
    const o = await get(path);
    if (o === undefined) throw new Error(`${path} not found`);
    return o;
  };
  const post = async (collection: string, body: Record<string, unknown>): Promise<T> => {
    const r = await kubeRequest('POST', collection, body);
    if (r.status !== 201) throw new Error(`POST ${collection}: ${r.status} ${r.body}`);
    const o = r.json() as T;
    created.push(`${collection}/${o.metadata.name}`);
    return o;
  };
  const purge = async (path: string): Promise<void> => {
    for (let i = 0; i < 5; i++) {
      const o = await get(path);
      if (o === undefined) return;
      if ((o.metadata.finalizers ?? []).length > 0) {
        const r = await kubeRequest('PUT', path, { ...o, metadata: { ...o.metadata, finalizers: [] } });
        if (r.status === 409) continue;
      }
      await kubeRequest('DELETE', path);
      return;
    }
  };
  return { created, get, must, post, purge };
};

/**
 * Runs `start` through `run` and keeps its scope open (so what it forked, e.g. a controller's workers, keeps
 * running) while `body` runs; then closes the scope and waits until the run has ended.
 */
export const whileScoped = async <E, R>(
  run: (effect: Effect.Effect<void, E, Exclude<R, Scope.Scope>>) => Promise<void>,
  start: Effect.Effect<unknown, E, R>,
  body: () => Promise<void>,
): Promise<void> => {
  let stop: (() => void) | undefined;
  const running = run(
    Effect.scoped(
      Effect.gen(function* () {
        yield* start;
        yield* Effect.async<void>((resume) => {
          stop = () => resume(Effect.void);
        });
      }),
    ),
  );
  try {
    await eventually('the scoped start', () => stop !== undefined, 20_000, 25);
    await body();
  } finally {
    stop?.();
    await running;
  }
};

/**
 * Builds busybox-based images (see `writeBusyboxImage`) and imports them into the test bed's node under their own
 * names, so pods that name them run them without a pull; returns the names containerd reports. Needs a node.
 */
export const importNodeImages = async (specs: ReadonlyArray<BusyboxImageSpec>): Promise<string[]> => {
  const node = testbed().node;
  if (node === undefined) throw new Error('this test bed has no node: use { testbed: true, node: true }');
  const dir = mkdtempSync(join(tmpdir(), 'testbed-images-'));
  try {
    const tarballs = specs.map((spec, i) => writeBusyboxImage(dir, `image-${i}.tar`, spec));
    return await Effect.runPromise(importImages(node.containerd, tarballs));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

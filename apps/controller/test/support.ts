// Shared by the controller's test-bed tests: the KOS CRDs installed (installCrds waits until each version serves),
// kos-system present, and a real controller (node:http on an ephemeral loopback port) against the test bed's
// kube-apiserver, called over HTTP with fetch; or the app as a process (`src/main.ts` under tsx).
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import pg from 'pg';
import { Api } from '@homelab/ayatori-database';
import { serviceAccountToken } from '@homelab/ayatori-database/testing';
import { layerFromToken, type LayerOptions } from '@homelab/kube';
import { kosCrds } from '@homelab/kos-kernel';
import {
  baoRequest,
  eventually,
  httpCall,
  installCrds,
  kubeObjects,
  kubeRequest,
  testbed,
  type TestDatabase,
  type TestKvPath,
  useDatabase,
  useKvPath,
  useNamespace,
} from '@homelab/testbed/vitest';
import {
  type ControllerConfig,
  type ControllerHandle,
  parseConfig,
  type StartOptions,
  startController,
} from '../src/index.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const prepareCluster = async (): Promise<void> => {
  await installCrds(kosCrds() as unknown as Parameters<typeof installCrds>[0]);
  const ns = await kubeRequest('POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: 'kos-system' },
  });
  if (ns.status !== 201 && ns.status !== 409) throw new Error(`kos-system: ${ns.status} ${ns.body}`);
};

export const testConfig = (overrides: Partial<ControllerConfig> = {}): ControllerConfig => ({
  ...parseConfig(['--port', '0', '--modules=kos'], {}),
  discoveryIntervalMs: 60_000,
  shutdownGraceMs: 30_000,
  // The application reconciler writes (finalizer, status): in-process test controllers reconcile only the objects a
  // test labels for them, never the other files' Applications.
  kosLabelSelector: 'homelab.test/kos-reconcile=on',
  ...overrides,
});

export const startTestController = (
  overrides: Partial<ControllerConfig> = {},
  options: StartOptions & { kubeOptions?: LayerOptions } = {},
): Promise<ControllerHandle> =>
  startController(testConfig(overrides), {
    kube: layerFromToken(testbed().kube, options.kubeOptions ?? {}),
    log: () => undefined,
    ...options,
  });

/** A loopback port nothing listens on (bound, then released). */
export const closedPort = async (): Promise<number> => {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
};

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
}

export const call = async (
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> => {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON (health endpoints, metrics) */
  }
  return { status: res.status, headers: res.headers, body: parsed };
};

export const app = (
  namespace: string,
  name: string,
  spec: Record<string, unknown> = {},
  labels?: Record<string, string>,
) => ({
  apiVersion: 'kos.tsic.top/v1beta1',
  kind: 'Application',
  metadata: { name, namespace, ...(labels ? { labels } : {}) },
  spec,
});

/** name → resourceVersion of every Application in the namespace, straight from the API server. */
export const appVersions = async (namespace: string): Promise<Record<string, string>> => {
  const list = (await kubeRequest('GET', `/apis/kos.tsic.top/v1beta1/namespaces/${namespace}/applications`)).json() as {
    items: Array<{ metadata: { name: string; resourceVersion: string } }>;
  };
  return Object.fromEntries(list.items.map((i) => [i.metadata.name, i.metadata.resourceVersion]));
};

export const until = async <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
};

/**
 * `src/main.ts` as a child process under tsx (port 0, the test bed's kubeconfig, no in-cluster namespace), added to
 * `children` (the file kills what still runs after its tests). `output` collects stdout and stderr; `listening`
 * resolves with the URL from the start-up line, or with undefined when the process exits first.
 */
export const spawnController = (
  args: ReadonlyArray<string>,
  children: ChildProcess[],
  /**
   * Another entry (a test-only one under test/fixtures, decision 0253; or an `.mjs` bundle of one from
   * `bundleEntry`, run by plain node) and extra environment.
   */
  options: { readonly entry?: string; readonly env?: Readonly<Record<string, string>> } = {},
) => {
  const entry = options.entry ?? join(import.meta.dirname, '../src/main.ts');
  const runner = entry.endsWith('.mjs') ? [entry] : ['--import', 'tsx', '--conditions=@homelab/source', entry];
  const child = spawn(process.execPath, [...runner, '--port', '0', ...args], {
    cwd: join(import.meta.dirname, '..'),
    env: {
      ...process.env,
      // The test bed this run uses (a worktree reuses the main checkout's through the variable).
      HOMELAB_TESTBED_STATE:
        process.env['HOMELAB_TESTBED_STATE'] ?? join(import.meta.dirname, '../../../.testbed/state.json'),
      KUBECONFIG: '',
      POD_NAMESPACE: '',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const output = { text: '' };
  child.stdout?.on('data', (d: Buffer) => (output.text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output.text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const listening = new Promise<string | undefined>((resolve) => {
    const check = () => {
      const m = /listening on (http:\/\/[^;\s]+)/.exec(output.text);
      if (m) resolve(m[1] as string);
    };
    child.stdout?.on('data', check);
    void exited.then(() => resolve(undefined));
  });
  return { child, output, exited, listening };
};

/** The workspace's root (its node_modules resolves a bundle's third-party imports). */
const workspaceRoot = join(import.meta.dirname, '../../..');

/**
 * A controller entry (`src/main.ts` or a test-only one under test/fixtures) bundled once with esbuild into one `.mjs`
 * file under the workspace's `node_modules/.cache/controller-e2e/`: the workspace's own TypeScript (the
 * `@homelab/source` condition, as tsx resolves it) in one module, every third-party package still imported from
 * node_modules. The same code as `--import tsx` runs, without tsx transforming ~185 modules again at every start
 * (decision 0381: ≈ 12 s of each start on the loaded 2-core machine). The caller removes the file (`remove`).
 */
export const bundleEntry = async (
  entry: string = join(import.meta.dirname, '../src/main.ts'),
): Promise<{ readonly file: string; readonly remove: () => void }> => {
  const { build } = await import('esbuild');
  const dir = join(workspaceRoot, 'node_modules/.cache/controller-e2e');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${basename(entry, '.ts')}-${randomBytes(4).toString('hex')}.mjs`);
  await build({
    entryPoints: [entry],
    outfile: file,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['@homelab/source'],
    logLevel: 'warning',
    plugins: [
      {
        name: 'third-party-external',
        setup: (b) =>
          b.onResolve({ filter: /^[^./]/ }, (a) =>
            a.path.startsWith('@homelab/') ? undefined : { path: a.path, external: true },
          ),
      },
    ],
  });
  return { file, remove: () => rmSync(file, { force: true }) };
};

/**
 * Calls to a controller with the identity module, for the identity tests: requests with a bearer token, login, and a
 * session whose first login changes the one-time password to `password`. `url` is read at each call (the controller
 * starts in `beforeAll`).
 */
export const identityCalls = (url: () => string, password: string) => {
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const as = (token: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    call(url(), method, path, body, { ...bearer(token), ...headers });
  const login = (name: string, pw: string) => call(url(), 'POST', '/api/v1/auth/login', { name, password: pw });
  /** Log in; a first login changes the one-time password to `password`. */
  const session = async (name: string, pw: string): Promise<string> => {
    const first = await login(name, pw);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    if (!first.body.passwordChangeRequired) return first.body.token as string;
    const changed = await as(first.body.token, 'PUT', '/api/v1/auth/password', {
      currentPassword: pw,
      newPassword: password,
    });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    return first.body.token as string;
  };
  /** An account created by the Owner session `by`, logged in with its password changed. */
  const createAccount = async (by: string, name: string, role: 'Owner' | 'Member' | 'Guest') => {
    const created = await as(by, 'POST', '/api/v1/accounts', { name, role });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return session(name, created.body.oneTimePassword as string);
  };
  return { bearer, as, login, session, createAccount };
};

/** One record of `GET /api/v1/audit` as the tests read it. */
export interface AuditItem {
  readonly seq: number;
  readonly actor: string;
  readonly verb: string;
  readonly result: string;
  readonly code?: string;
  readonly extensionId?: string;
  readonly object?: { readonly name?: string };
}

/** The records appended since `seq`, and the newest `seq` now, read by the Owner session `owner()`. */
export const auditTrail = (as: ReturnType<typeof identityCalls>['as'], owner: () => string) => ({
  auditSince: async (seq: number): Promise<AuditItem[]> =>
    ((await as(owner(), 'GET', '/api/v1/audit?limit=1000')).body.items as AuditItem[]).filter((i) => i.seq > seq),
  lastSeq: async (): Promise<number> =>
    ((await as(owner(), 'GET', '/api/v1/audit?limit=1')).body.items as AuditItem[])[0]?.seq ?? 0,
});

// ---- the Ayatori process tests (ayatori*.e2e) ------------------------------------------------------------------

export const ayatoriBase = `/apis/${Api.Group}/${Api.Version}`;

/** A Tenant, Database or Secret as the Ayatori process tests read them. */
export interface AyatoriObj {
  metadata: { name: string; uid: string; annotations?: Record<string, string>; finalizers?: string[] };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  status?: {
    phase?: string;
    rotation?: string;
    credentialPath?: string;
    conditions?: Array<{ type: string; status: string; reason: string }>;
  };
}
/** The object's Ready condition, if any. */
export const readyCondition = (o: AyatoriObj | undefined) => o?.status?.conditions?.find((c) => c.type === 'Ready');

/** The KOS set-up plus the Ayatori CRDs, waited for until the API server serves the Tenant status subresource. */
export const prepareAyatoriCluster = async (): Promise<void> => {
  await prepareCluster();
  await installCrds(Api.customResourceDefinitions() as unknown as Parameters<typeof installCrds>[0]);
  for (let i = 0; i < 200; i++) {
    const r = await kubeRequest('GET', ayatoriBase);
    if (r.status === 200 && r.body.includes('postgresqltenants/status')) break;
    await sleep(50);
  }
};

/** A query as the test bed's admin (parameters bound by pg, not interpolated). */
export const adminSql = async (text: string, values: unknown[] = []): Promise<Array<Record<string, unknown>>> => {
  const { postgres } = testbed();
  const c = new pg.Client({
    host: postgres.host,
    port: postgres.port,
    user: postgres.user,
    database: postgres.database,
  });
  await c.connect();
  try {
    return (await c.query(text, values)).rows as Array<Record<string, unknown>>;
  } finally {
    await c.end();
  }
};

/**
 * Whether `password` is the role's password, checked against the stored SCRAM-SHA-256 verifier (the machine's
 * PostgreSQL trusts every local login, so a login would prove nothing).
 */
export const scramMatches = async (role: string, password: string): Promise<boolean> => {
  const rows = await adminSql('SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1', [role]);
  const m = /^SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)$/.exec(String(rows[0]?.['rolpassword'] ?? ''));
  if (m === null) return false;
  const salted = pbkdf2Sync(password, Buffer.from(m[2] as string, 'base64'), Number(m[1]), 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  return createHash('sha256').update(clientKey).digest('base64') === m[3];
};

/** The current KV v2 value and version at `path` under the file's mount, or undefined. */
export const kvValue = async (mount: string, path: string) => {
  const r = await baoRequest('GET', `${mount}/data/${path}`);
  if (r.status === 404) return undefined;
  const body = JSON.parse(r.body) as { data: { data: Record<string, string>; metadata: { version: number } } };
  return { data: body.data.data, version: body.data.metadata.version };
};

/** A Secret's data decoded, or undefined when it (or its data) is missing. */
export const secretData = async (namespace: string, name: string) => {
  const r = await kubeRequest('GET', `/api/v1/namespaces/${namespace}/secrets/${name}`);
  if (r.status !== 200) return undefined;
  const data = (r.json() as { data?: Record<string, string> }).data;
  return data === undefined
    ? undefined
    : Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
};

/** A PostgreSQLInstance on the test bed's PostgreSQL (sslmode disable), its admin Secret named `<name>-admin`. */
export const instanceBody = (name: string, labels: Readonly<Record<string, string>>, database: string) => ({
  apiVersion: `${Api.Group}/${Api.Version}`,
  kind: 'PostgreSQLInstance',
  metadata: { name, labels },
  spec: {
    endpoint: { host: 'localhost', hostaddr: '127.0.0.1', port: testbed().postgres.port, database, sslMode: 'disable' },
    adminCredentialRef: { name: `${name}-admin` },
  },
});

/** The flags of a controller process with Ayatori provisioning on, restricted to `selector`. */
export const ayatoriFlags = (o: {
  readonly namespace: string;
  readonly selector: string;
  readonly kv: { readonly addr: string; readonly mount: string; readonly base: string };
  readonly tokenFile: string;
}) => [
  '--modules=ayatori',
  `--database-secret-namespace=${o.namespace}`,
  `--database-label-selector=${o.selector}`,
  `--openbao-address=${o.kv.addr}`,
  `--openbao-token-file=${o.tokenFile}`,
  `--openbao-kv-mount=${o.kv.mount}`,
  `--openbao-tenant-base-path=${o.kv.base}`,
];

/** Resolves with the process once it logs that its Ayatori controllers run; throws with its output if it exited. */
export const ayatoriRunning = async (proc: ReturnType<typeof spawnController>, timeoutMs = 90_000) => {
  await eventually(
    'controllers running',
    () => proc.output.text.includes('ayatori database controllers running') || proc.child.exitCode !== null,
    timeoutMs,
  );
  if (proc.child.exitCode !== null) throw new Error(`exited: ${proc.output.text}`);
  return proc;
};

/** SIGTERM, and the process must exit 0. */
export const stopProcess = async (proc: { readonly child: ChildProcess; readonly exited: Promise<number | null> }) => {
  proc.child.kill('SIGTERM');
  expect(await proc.exited).toBe(0);
};

/** The Instance's admin Secret `<instance>-admin` in `namespace` (the controller's Secret namespace). */
export const postAdminSecret = async (namespace: string, instance: string, username: string, password: string) => {
  const r = await kubeRequest('POST', `/api/v1/namespaces/${namespace}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `${instance}-admin` },
    stringData: { username, password },
  });
  expect(r.status).toBe(201);
};

/** A kubeconfig (YAML) for the test bed's API server as a bearer token (a ServiceAccount's), mode 0600. */
export const writeTokenKubeconfig = (file: string, token: string): string => {
  const { kube } = testbed();
  writeFileSync(
    file,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: ${kube.server}\n    certificate-authority-data: ${Buffer.from(kube.caCert).toString('base64')}\nusers:\n- name: sa\n  user:\n    token: ${token}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: sa\ncurrent-context: t\n`,
    { mode: 0o600 },
  );
  return file;
};

/** What every Ayatori process test file (ayatori*.e2e) starts from; see `ayatoriProcessFile`. */
export interface AyatoriProcessFile {
  readonly ns: { readonly name: string };
  readonly db: TestDatabase;
  /** The file's KV path (only with `provisioning`). */
  readonly kv: TestKvPath;
  readonly suffix: string;
  /** The label key of this file's objects (`--database-label-selector=<label>=…`). */
  readonly label: string;
  /** The management role (NOSUPERUSER CREATEDB CREATEROLE) and its password, created before the tests. */
  readonly manager: string;
  readonly managerPassword: string;
  /** With `provisioning`: the Instance `<instanceName>` (labels `instanceLabels`) and its admin Secret, created before the tests. */
  readonly instanceName: string;
  /** The file's temporary directory; with `provisioning` it holds `token` (the OpenBao token file). */
  readonly dir: () => string;
  /** Processes still running after the file are SIGKILLed. */
  readonly children: ChildProcess[];
  /** Role and database names (the same) dropped after the file. */
  readonly roles: string[];
  /** Cluster-scoped RBAC paths deleted after the file. */
  readonly rbacCleanup: string[];
  /** Sessions ended after the file. */
  readonly sessions: pg.Client[];
  /** Other clean-ups, run after the objects were purged. */
  readonly cleanups: Array<() => Promise<void>>;
  readonly objects: ReturnType<typeof kubeObjects<AyatoriObj>>;
  readonly instances: string;
  readonly databases: string;
  readonly tenantsPath: (namespace?: string) => string;
  readonly tenantPath: (name: string) => string;
  /** The flags of an Ayatori process with provisioning on for this file, restricted to `selector`. */
  readonly flags: (selector: string, tokenFile?: string) => string[];
  /** `src/main.ts` bundled for the file (`bundleEntry`): the `entry` of `spawnController`. */
  readonly mainEntry: () => string;
  /** The argument of `grantManagerRbac`/`grantProvisioningRbac` for `serviceAccount` in the file's namespace. */
  readonly rbacGrant: (serviceAccount: string) => {
    readonly create: (path: string, body: unknown) => Promise<void>;
    readonly cleanup: string[];
    readonly namespace: string;
    readonly serviceAccount: string;
  };
  /**
   * A kubeconfig (file `name` in the file's directory) holding a token of `serviceAccount`, once `probes` (GET paths)
   * answer it — RBAC reaches the authorizer quickly but not at once.
   */
  readonly serviceAccountKubeconfig: (
    serviceAccount: string,
    probes: ReadonlyArray<string>,
    name?: string,
  ) => Promise<string>;
  // With `provisioning` (the file's Instance):
  /** The Secret delivered to the file's namespace for Tenant `tenant`, decoded, or undefined. */
  readonly secretOf: (tenant: string) => Promise<Record<string, string> | undefined>;
  /**
   * A Tenant `name` provisioned on the file's Instance, database and login role named `name` too (dropped after the
   * file, as its Database is purged), labelled `labels` (default: the file's label `yes`).
   */
  readonly createTenant: (name: string, labels?: Readonly<Record<string, string>>) => Promise<AyatoriObj>;
  /** The Tenant's Ready condition is True. */
  readonly isReady: (name: string) => Promise<boolean>;
  /**
   * The one consistent outcome of provisioning: Ready (CredentialsDelivered), one role and one database, `versions`
   * KV versions at the location the Database recorded, and one password in OpenBao, the Secret and PostgreSQL.
   */
  readonly assertProvisioned: (
    name: string,
    versions: number,
  ) => Promise<{ tenant: AyatoriObj; database: AyatoriObj; path: string; password: string }>;
  /** Nothing left of a reclaimed Tenant: Tenant, Database, Secret, role, database, every KV version. */
  readonly assertGone: (name: string, databaseName: string, path: string) => Promise<void>;
  /** Asks for a rotation (the Tenant's rotate annotation set to `request`). */
  readonly rotate: (name: string, request: string) => Promise<void>;
  /**
   * Reclaim policy Delete on the Tenant's Database (the admin's decision), with `session` a connection open as the
   * role (ended after the file), then the Tenant deleted.
   */
  readonly deleteTenant: (
    name: string,
    options: { readonly session: boolean },
  ) => Promise<{ readonly databaseName: string; readonly path: string; readonly session?: pg.Client }>;
}

/**
 * The shared set-up of the Ayatori process test files (ayatori.e2e, ayatori-provisioning.e2e,
 * ayatori-crash-steps.e2e): a namespace, a database and (with `provisioning`) a KV path of the file's own, the
 * Ayatori CRDs, the management role, and with `provisioning` the OpenBao token file, the admin Secret and the
 * Instance on the machine's PostgreSQL, and `src/main.ts` bundled once; after the file, every process killed and
 * everything it created removed.
 * Call it at the top of the file (it registers the file's hooks).
 */
export const ayatoriProcessFile = (
  prefix: string,
  options: { readonly provisioning: boolean; readonly instanceLabels?: (label: string) => Record<string, string> },
): AyatoriProcessFile => {
  const ns = useNamespace(prefix);
  const db = useDatabase(prefix.replaceAll('-', '_'));
  const kv = options.provisioning ? useKvPath(prefix) : (undefined as unknown as TestKvPath);
  const suffix = randomBytes(3).toString('hex');
  const label = `${prefix}-${suffix}`;
  const manager = `${prefix.replaceAll('-', '_')}_mgr_${suffix}`;
  const managerPassword = `${prefix.toUpperCase()}-TEST-ONLY-${suffix}`;
  const instanceName = `${prefix}-${suffix}`;
  const children: ChildProcess[] = [];
  const roles: string[] = [];
  const rbacCleanup: string[] = [];
  const sessions: pg.Client[] = [];
  const cleanups: Array<() => Promise<void>> = [];
  const objects = kubeObjects<AyatoriObj>();
  let dir = '';
  let main: { readonly file: string; readonly remove: () => void } | undefined;
  const instances = `${ayatoriBase}/postgresqlinstances`;
  const tenantsPath = (namespace = ns.name) => `${ayatoriBase}/namespaces/${namespace}/postgresqltenants`;

  beforeAll(async () => {
    main = await bundleEntry();
    await prepareAyatoriCluster();
    dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
    await adminSql(`CREATE ROLE "${manager}" LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD '${managerPassword}'`);
    if (options.provisioning) {
      writeFileSync(join(dir, 'token'), kv.token, { mode: 0o600 });
      await postAdminSecret(ns.name, instanceName, manager, managerPassword);
      await objects.post(
        instances,
        instanceBody(instanceName, options.instanceLabels?.(label) ?? { [label]: 'yes' }, db.database),
      );
    }
  }, 120_000);

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    for (const s of sessions) await s.end().catch(() => undefined);
    for (const path of objects.created.reverse()) await objects.purge(path);
    for (const path of rbacCleanup.reverse()) await kubeRequest('DELETE', path);
    for (const c of cleanups) await c().catch(() => undefined);
    for (const role of roles) {
      await adminSql(`DROP DATABASE IF EXISTS "${role}" WITH (FORCE)`).catch(() => undefined);
      await adminSql(`DROP ROLE IF EXISTS "${role}"`).catch(() => undefined);
    }
    await adminSql(`DROP OWNED BY "${manager}"`).catch(() => undefined);
    await adminSql(`DROP ROLE IF EXISTS "${manager}"`).catch(() => undefined);
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
    main?.remove();
  }, 180_000);

  const databases = `${ayatoriBase}/postgresqldatabases`;
  const tenantPath = (name: string) => `${tenantsPath()}/${name}`;
  const secretOf = (tenant: string) => secretData(ns.name, `${instanceName}-${tenant}-postgresql`);
  const rbacGrant = (serviceAccount: string) => ({
    create: async (path: string, body: unknown) => {
      const r = await kubeRequest('POST', path, body);
      if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${r.body}`);
    },
    cleanup: rbacCleanup,
    namespace: ns.name,
    serviceAccount,
  });
  const serviceAccountKubeconfig = async (
    serviceAccount: string,
    probes: ReadonlyArray<string>,
    name = 'kubeconfig',
  ) => {
    const { kube } = testbed();
    const token = await serviceAccountToken({
      request: kubeRequest,
      getAs: async (bearer, path) =>
        (await httpCall(`${kube.server}${path}`, { ca: kube.caCert, headers: { authorization: `Bearer ${bearer}` } }))
          .status,
      namespace: ns.name,
      serviceAccount,
      probes: [...probes],
    });
    return writeTokenKubeconfig(join(dir, name), token);
  };
  const createTenant = async (name: string, labels: Readonly<Record<string, string>> = { [label]: 'yes' }) => {
    roles.push(name);
    const tenant = await objects.post(tenantsPath(), {
      apiVersion: `${Api.Group}/${Api.Version}`,
      kind: 'PostgreSQLTenant',
      metadata: { name, labels },
      spec: { provision: { instanceRef: { name: instanceName }, database: name, loginRole: name } },
    });
    objects.created.push(`${databases}/tenant-${tenant.metadata.uid}`);
    return tenant;
  };
  const isReady = async (name: string) => readyCondition(await objects.get(tenantPath(name)))?.status === 'True';
  const assertProvisioned = async (name: string, versions: number) => {
    const tenant = await objects.get(tenantPath(name));
    expect(readyCondition(tenant), name).toMatchObject({ status: 'True', reason: 'CredentialsDelivered' });
    const database = await objects.get(`${databases}/tenant-${tenant?.metadata.uid}`);
    const path = database?.status?.credentialPath as string;
    expect(path).toBe(`${kv.base}/${database?.metadata.uid}`);
    expect(await adminSql('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [name])).toHaveLength(1);
    expect(await adminSql('SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1', [name])).toHaveLength(1);
    const stored = await kvValue(kv.mount, path);
    expect(stored?.version, name).toBe(versions);
    const secret = await secretOf(name);
    expect(secret, name).toEqual(stored?.data);
    expect(await scramMatches(name, secret?.['password'] as string), name).toBe(true);
    return {
      tenant: tenant as AyatoriObj,
      database: database as AyatoriObj,
      path,
      password: secret?.['password'] as string,
    };
  };
  const assertGone = async (name: string, databaseName: string, path: string) => {
    expect(await objects.get(tenantPath(name)), name).toBeUndefined();
    expect(await objects.get(`${databases}/${databaseName}`), name).toBeUndefined();
    expect(await secretOf(name), name).toBeUndefined();
    expect(await adminSql('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [name]), name).toHaveLength(0);
    expect(await adminSql('SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1', [name]), name).toHaveLength(0);
    expect((await baoRequest('GET', `${kv.mount}/metadata/${path}`)).status, name).toBe(404);
  };
  const rotate = async (name: string, request: string) => {
    const t = await objects.get(tenantPath(name));
    const annotations = { ...t?.metadata.annotations, 'database.ayatori.ddupan.top/rotate': request };
    const r = await kubeRequest('PUT', tenantPath(name), { ...t, metadata: { ...t?.metadata, annotations } });
    expect(r.status).toBe(200);
  };
  const deleteTenant = async (name: string, options: { readonly session: boolean }) => {
    const tenant = (await objects.get(tenantPath(name))) as AyatoriObj;
    const databaseName = `tenant-${tenant.metadata.uid}`;
    const d = await objects.get(`${databases}/${databaseName}`);
    const r = await kubeRequest('PUT', `${databases}/${databaseName}`, {
      ...d,
      spec: { ...d?.spec, reclaimPolicy: 'Delete' },
    });
    expect(r.status).toBe(200);
    let session: pg.Client | undefined;
    if (options.session) {
      const secret = (await secretOf(name)) as Record<string, string>;
      session = new pg.Client({
        host: '127.0.0.1',
        port: testbed().postgres.port,
        user: name,
        password: secret['password'],
        database: name,
      });
      session.on('error', () => undefined);
      await session.connect();
      sessions.push(session);
    }
    expect((await kubeRequest('DELETE', tenantPath(name))).status).toBe(200);
    const path = d?.status?.credentialPath as string;
    return session === undefined ? { databaseName, path } : { databaseName, path, session };
  };

  return {
    ns,
    db,
    kv,
    suffix,
    label,
    manager,
    managerPassword,
    instanceName,
    dir: () => dir,
    children,
    roles,
    rbacCleanup,
    sessions,
    cleanups,
    objects,
    instances,
    databases,
    tenantsPath,
    tenantPath,
    flags: (selector, tokenFile = join(dir, 'token')) => ayatoriFlags({ namespace: ns.name, selector, kv, tokenFile }),
    mainEntry: () => {
      if (main === undefined) throw new Error('the bundle is only there after beforeAll');
      return main.file;
    },
    rbacGrant,
    serviceAccountKubeconfig,
    secretOf,
    createTenant,
    isReady,
    assertProvisioned,
    assertGone,
    rotate,
    deleteTenant,
  };
};

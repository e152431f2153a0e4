import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Effect, Schema } from 'effect';
import { TestbedError } from './errors.js';
import { workspaceRoot } from './versions.js';

/** How clients reach the running test bed. Written to the state file and handed to vitest workers. */
export const TestbedState = Schema.Struct({
  pid: Schema.Number,
  startedAt: Schema.String,
  dataDir: Schema.String,
  kube: Schema.Struct({
    server: Schema.String,
    token: Schema.String,
    caCert: Schema.String,
    kubeconfig: Schema.String,
    version: Schema.String,
    etcd: Schema.String,
  }),
  /** The garbage collector, namespace and ClusterRole aggregation controllers (kube-controller-manager on loopback). */
  controllerManager: Schema.Struct({
    pid: Schema.Number,
    port: Schema.Number,
    healthz: Schema.String,
    controllers: Schema.Array(Schema.String),
    version: Schema.String,
  }),
  postgres: Schema.Struct({
    host: Schema.String,
    port: Schema.Number,
    user: Schema.String,
    database: Schema.String,
    version: Schema.String,
  }),
  openbao: Schema.Union(
    Schema.Struct({
      available: Schema.Literal(true),
      addr: Schema.String,
      token: Schema.String,
      kvMount: Schema.String,
      version: Schema.String,
    }),
    Schema.Struct({ available: Schema.Literal(false), reason: Schema.String }),
  ),
  /**
   * The password-checking PostgreSQL cluster (decision 0382): scram-sha-256, TLS only, a certificate from the test
   * bed's CA. Optional: a state written before the service existed has none (tests then start one on demand).
   */
  scramPostgres: Schema.optional(
    Schema.Union(
      Schema.Struct({
        available: Schema.Literal(true),
        host: Schema.String,
        hostaddr: Schema.String,
        port: Schema.Number,
        superuser: Schema.String,
        password: Schema.String,
        caCert: Schema.String,
        version: Schema.String,
      }),
      Schema.Struct({ available: Schema.Literal(false), reason: Schema.String }),
    ),
  ),
  /** Only with `up --node`: the node (kubelet, containerd, kube-scheduler) and the images it holds. */
  node: Schema.optional(
    Schema.Struct({
      name: Schema.String,
      podSubnet: Schema.String,
      images: Schema.Struct({ pause: Schema.String, busybox: Schema.String }),
      kubelet: Schema.Struct({
        pid: Schema.Number,
        port: Schema.Number,
        healthz: Schema.String,
        version: Schema.String,
      }),
      containerd: Schema.Struct({
        pid: Schema.Number,
        socket: Schema.String,
        version: Schema.String,
        ctr: Schema.String,
      }),
      scheduler: Schema.Struct({
        pid: Schema.Number,
        port: Schema.Number,
        healthz: Schema.String,
        version: Schema.String,
      }),
    }),
  ),
});
export type TestbedState = typeof TestbedState.Type;

export const defaultStateFile = (): string =>
  process.env['HOMELAB_TESTBED_STATE'] ?? join(workspaceRoot(), '.testbed', 'state.json');

export const writeState = (file: string, state: TestbedState): void => {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 2), { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
};

export const readState = (file: string): Effect.Effect<TestbedState, TestbedError> =>
  Effect.try({
    try: () => JSON.parse(readFileSync(file, 'utf8')) as unknown,
    catch: () =>
      new TestbedError({
        component: 'state',
        reason: `no running test bed (state file ${file} is missing or unreadable)`,
      }),
  }).pipe(
    Effect.flatMap(Schema.decodeUnknown(TestbedState)),
    Effect.mapError((e) =>
      e._tag === 'TestbedError'
        ? e
        : new TestbedError({ component: 'state', reason: `state file ${file}: ${e.message}` }),
    ),
  );

export const removeState = (file: string): void => rmSync(file, { force: true });

/**
 * Only the owning process's pid from a state file, without decoding the rest: `down` and `status` must still find a
 * test bed whose state was written by an older version of this tool (e.g. before a field was added).
 */
export const readStatePid = (file: string): number | undefined => {
  try {
    const pid = (JSON.parse(readFileSync(file, 'utf8')) as { pid?: unknown }).pid;
    return typeof pid === 'number' ? pid : undefined;
  } catch {
    return undefined;
  }
};

export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Shell exports for the running test bed (what `testbed env` prints). */
export const shellExports = (state: TestbedState, stateFile: string): string => {
  const lines: Array<[string, string | number]> = [
    ['HOMELAB_TESTBED_STATE', stateFile],
    ['KUBECONFIG', state.kube.kubeconfig],
    ['PGHOST', state.postgres.host],
    ['PGPORT', state.postgres.port],
    ['PGUSER', state.postgres.user],
  ];
  if (state.openbao.available) {
    lines.push(['BAO_ADDR', state.openbao.addr], ['BAO_TOKEN', state.openbao.token]);
    lines.push(['VAULT_ADDR', state.openbao.addr], ['VAULT_TOKEN', state.openbao.token]);
  }
  return lines.map(([k, v]) => `export ${k}='${String(v).replaceAll("'", "'\\''")}'`).join('\n');
};

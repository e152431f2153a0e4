import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Effect, Schedule } from 'effect';
import pg from 'pg';
import { ensureBinary } from './binaries.js';
import { TestbedError } from './errors.js';
import { freePort, httpCall } from './net.js';
import { createPki, issueCertificate, type Pki } from './pki.js';
import { runCommand, spawnScoped, waitReady } from './process.js';
import { versions } from './versions.js';

export type Progress = (line: string) => void;

/** etcd on loopback with a throw-away data directory (fsync off: test data is disposable). */
export const startEtcd = (dataDir: string, progress: Progress) =>
  Effect.gen(function* () {
    const bin = yield* ensureBinary('etcd');
    const clientPort = yield* freePort();
    const peerPort = yield* freePort();
    const url = `http://127.0.0.1:${clientPort}`;
    const started = Date.now();
    const proc = yield* spawnScoped({
      component: 'etcd',
      command: bin,
      args: [
        `--name=testbed`,
        `--data-dir=${join(dataDir, 'etcd')}`,
        `--listen-client-urls=${url}`,
        `--advertise-client-urls=${url}`,
        `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-cluster=testbed=http://127.0.0.1:${peerPort}`,
        '--unsafe-no-fsync=true',
        '--log-level=warn',
      ],
      logFile: join(dataDir, 'etcd.log'),
    });
    yield* waitReady('etcd', proc, async () => (await httpCall(`${url}/health`)).status === 200, '30 seconds');
    progress(`etcd ${versions.etcd} ready at ${url} (${Date.now() - started} ms)`);
    return { url };
  });

export interface KubeEndpoint {
  readonly server: string;
  readonly token: string;
  readonly caCert: string;
  readonly kubeconfig: string;
}

/** A kubeconfig (JSON, which every kubeconfig reader accepts as YAML) for one static-token user, mode 0600. */
export const writeKubeconfig = (file: string, server: string, caCert: string, user: string, token: string): void =>
  writeFileSync(
    file,
    JSON.stringify(
      {
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'testbed',
            cluster: { server, 'certificate-authority-data': Buffer.from(caCert).toString('base64') },
          },
        ],
        users: [{ name: user, user: { token } }],
        contexts: [{ name: 'testbed', context: { cluster: 'testbed', user, namespace: 'default' } }],
        'current-context': 'testbed',
      },
      null,
      2,
    ),
    { mode: 0o600 },
  );

/** What the test bed's kube-controller-manager needs from the API server it talks to. */
export interface ControllerManagerAccess {
  readonly pki: Pki;
  /** A static token for the user `system:kube-controller-manager` (bound to its bootstrap ClusterRole, not an admin). */
  readonly token: string;
}

/** The node's name. The API server dials the kubelet by its Hostname address, and `localhost` is loopback. */
export const nodeName = 'localhost';

/** What the node's components need from the API server (only with `node: true`). */
export interface NodeAccess {
  readonly pki: Pki;
  /** Static token of `system:node:<nodeName>` in `system:nodes` (the Node authorizer scopes it to this node). */
  readonly kubeletToken: string;
  /** Static token of `system:kube-scheduler`. */
  readonly schedulerToken: string;
  /** The kubelet's serving certificate (localhost, 127.0.0.1), signed by the test bed's CA. */
  readonly kubeletServing: { readonly certFile: string; readonly keyFile: string };
}

/**
 * kube-apiserver with envtest's flag set: loopback, RBAC, a static admin token in system:masters,
 * a generated service-account key pair and a serving certificate signed by a throw-away CA. A second static token
 * authenticates the kube-controller-manager as `system:kube-controller-manager`, as kubeadm's client certificate does.
 */
export const startKubeApiserver = (dataDir: string, etcdUrl: string, progress: Progress, node = false) =>
  Effect.gen(function* () {
    const bin = yield* ensureBinary('kube-apiserver');
    const pkiDir = join(dataDir, 'pki');
    mkdirSync(pkiDir, { recursive: true });
    const pki = yield* createPki(pkiDir);
    const token = randomBytes(24).toString('hex');
    const controllerManagerToken = randomBytes(24).toString('hex');
    const kubeletToken = randomBytes(24).toString('hex');
    const schedulerToken = randomBytes(24).toString('hex');
    const tokensFile = join(pkiDir, 'tokens.csv');
    writeFileSync(
      tokensFile,
      `${token},testbed-admin,testbed-admin,"system:masters"\n` +
        `${controllerManagerToken},system:kube-controller-manager,system:kube-controller-manager\n` +
        (node
          ? `${kubeletToken},system:node:${nodeName},system:node:${nodeName},"system:nodes"\n` +
            `${schedulerToken},system:kube-scheduler,system:kube-scheduler\n`
          : ''),
      { mode: 0o600 },
    );
    // With a node: the API server's client certificate for kubelet calls (logs, exec, port-forward), the kubelet's
    // serving certificate (verified through --kubelet-certificate-authority), the Node authorizer and
    // NodeRestriction, and the ServiceAccount admission (the node's controllers create the accounts and tokens).
    const kubeletClient = node
      ? yield* issueCertificate(
          pkiDir,
          'apiserver-kubelet-client',
          '/CN=kube-apiserver-kubelet-client',
          'extendedKeyUsage=clientAuth\n',
        )
      : undefined;
    const kubeletServing = node
      ? yield* issueCertificate(
          pkiDir,
          'kubelet-serving',
          `/CN=${nodeName}`,
          `subjectAltName=DNS:${nodeName},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n`,
        )
      : undefined;
    const admissionAndAuthz =
      kubeletClient === undefined
        ? ['--authorization-mode=RBAC', '--disable-admission-plugins=ServiceAccount']
        : [
            '--authorization-mode=Node,RBAC',
            '--enable-admission-plugins=NodeRestriction',
            `--kubelet-client-certificate=${kubeletClient.certFile}`,
            `--kubelet-client-key=${kubeletClient.keyFile}`,
            `--kubelet-certificate-authority=${pki.caCertFile}`,
            '--kubelet-preferred-address-types=Hostname',
          ];
    const port = yield* freePort();
    const server = `https://127.0.0.1:${port}`;
    const started = Date.now();
    const proc = yield* spawnScoped({
      component: 'kube-apiserver',
      command: bin,
      args: [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${port}`,
        `--cert-dir=${pkiDir}`,
        `--tls-cert-file=${pki.servingCertFile}`,
        `--tls-private-key-file=${pki.servingKeyFile}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        `--service-account-issuer=${server}/`,
        `--service-account-key-file=${pki.serviceAccountPublicKeyFile}`,
        `--service-account-signing-key-file=${pki.serviceAccountPrivateKeyFile}`,
        `--token-auth-file=${tokensFile}`,
        ...admissionAndAuthz,
        '--allow-privileged=true',
        '--v=1',
      ],
      logFile: join(dataDir, 'kube-apiserver.log'),
    });
    const headers = { authorization: `Bearer ${token}` };
    yield* waitReady(
      'kube-apiserver',
      proc,
      async () => (await httpCall(`${server}/readyz`, { headers, ca: pki.caCert })).status === 200,
      '120 seconds',
    );
    const kubeconfig = join(dataDir, 'kubeconfig');
    writeKubeconfig(kubeconfig, server, pki.caCert, 'testbed-admin', token);
    progress(`kube-apiserver ${versions.kubernetes} ready at ${server} (${Date.now() - started} ms)`);
    const endpoint: KubeEndpoint = { server, token, caCert: pki.caCert, kubeconfig };
    const controllerManager: ControllerManagerAccess = { pki, token: controllerManagerToken };
    const nodeAccess: NodeAccess | undefined =
      kubeletServing === undefined ? undefined : { pki, kubeletToken, schedulerToken, kubeletServing };
    return { endpoint, controllerManager, nodeAccess };
  });

/**
 * The controllers the test bed runs: the garbage collector (ownerReference cascades, Background and Foreground), the
 * namespace controller (a deleted namespace is emptied and goes away) and the ClusterRole aggregation controller (an
 * `aggregationRule` role gets the rules of the roles it selects; KOS's per-extension roles, decision 0440). Nothing
 * else — no kubelet-facing, workload or token controllers — so tests still write status themselves where envtest
 * would.
 */
export const controllerManagerControllers = [
  'garbage-collector-controller',
  'namespace-controller',
  'clusterrole-aggregation-controller',
] as const;

/**
 * With a node (`up --node`), the controllers a Deployment, a StatefulSet, a Job and a Pod's service account need,
 * node lifecycle (taints, NotReady), and the persistent-volume binder (with Kubernetes' own host-path provisioner, see
 * `hostPathStorageClass` in node.ts) and the PV/PVC protection controllers: still no endpoints or cloud controllers.
 */
export const nodeControllerManagerControllers = [
  ...controllerManagerControllers,
  'deployment-controller',
  'replicaset-controller',
  'statefulset-controller',
  'job-controller',
  'node-lifecycle-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'root-ca-certificate-publisher-controller',
  'persistentvolume-binder-controller',
  'persistentvolumeclaim-protection-controller',
  'persistentvolume-protection-controller',
] as const;

/**
 * kube-controller-manager with only {@link controllerManagerControllers}, authenticated by its own static token as
 * `system:kube-controller-manager`; each controller then uses its own ServiceAccount token from the TokenRequest
 * API (`--use-service-account-credentials`), so it runs with its bootstrap RBAC role as on a kubeadm cluster.
 * Loopback only, no leader election; its secure port serves with the API server's certificate (same CA), and it
 * is ready when `/healthz` lists both controllers as ok.
 */
export const startKubeControllerManager = (
  dataDir: string,
  kube: KubeEndpoint,
  access: ControllerManagerAccess,
  progress: Progress,
  node = false,
) =>
  Effect.gen(function* () {
    const bin = yield* ensureBinary('kube-controller-manager');
    const controllers: ReadonlyArray<string> = node ? nodeControllerManagerControllers : controllerManagerControllers;
    const kubeconfig = join(dataDir, 'pki', 'kube-controller-manager.kubeconfig');
    writeKubeconfig(kubeconfig, kube.server, kube.caCert, 'system:kube-controller-manager', access.token);
    const port = yield* freePort();
    const healthz = `https://127.0.0.1:${port}/healthz`;
    const started = Date.now();
    const proc = yield* spawnScoped({
      component: 'kube-controller-manager',
      command: bin,
      args: [
        `--kubeconfig=${kubeconfig}`,
        `--controllers=${controllers.join(',')}`,
        // The token controller signs legacy ServiceAccount token Secrets; both publish the CA to pods.
        ...(node
          ? [
              `--service-account-private-key-file=${access.pki.serviceAccountPrivateKeyFile}`,
              `--root-ca-file=${access.pki.caCertFile}`,
              // The binder's in-tree host-path provisioner: a PV directory /tmp/hostpath_pv/<uid> per claim of the
              // default StorageClass, deleted with its claim (single node, tests only — as Kubernetes documents it).
              '--enable-hostpath-provisioner=true',
            ]
          : []),
        '--use-service-account-credentials=true',
        '--leader-elect=false',
        '--bind-address=127.0.0.1',
        `--secure-port=${port}`,
        `--tls-cert-file=${access.pki.servingCertFile}`,
        `--tls-private-key-file=${access.pki.servingKeyFile}`,
        // Tests create and delete objects in bursts; the default client limits (20/30) would make the GC lag.
        '--kube-api-qps=100',
        '--kube-api-burst=200',
        '--v=1',
      ],
      logFile: join(dataDir, 'kube-controller-manager.log'),
    });
    yield* waitReady(
      'kube-controller-manager',
      proc,
      async () => {
        const r = await httpCall(`${healthz}?verbose`, { ca: kube.caCert });
        return r.status === 200 && controllers.every((c) => r.body.includes(`[+]${c} ok`));
      },
      '60 seconds',
    );
    progress(
      `kube-controller-manager ${versions.kubernetes} ready at ${healthz} (${controllers.join(', ')}; ${Date.now() - started} ms)`,
    );
    return {
      pid: proc.child.pid ?? -1,
      port,
      healthz,
      controllers: [...controllers],
      version: versions.kubernetes,
    };
  });

/** The OpenBao dev server: in memory, unsealed, KV v2 mounted at `secret/`. */
export const startOpenBao = (dataDir: string, progress: Progress) =>
  Effect.gen(function* () {
    const bin = yield* ensureBinary('bao');
    const port = yield* freePort();
    const addr = `http://127.0.0.1:${port}`;
    const token = `testbed-${randomBytes(12).toString('hex')}`;
    const started = Date.now();
    const proc = yield* spawnScoped({
      component: 'openbao',
      command: bin,
      args: [
        'server',
        '-dev',
        `-dev-root-token-id=${token}`,
        `-dev-listen-address=127.0.0.1:${port}`,
        '-dev-no-store-token',
      ],
      logFile: join(dataDir, 'openbao.log'),
      env: { HOME: dataDir },
    });
    yield* waitReady(
      'openbao',
      proc,
      async () => (await httpCall(`${addr}/v1/sys/health`)).status === 200,
      '60 seconds',
    );
    const mounts = yield* Effect.promise(() =>
      httpCall(`${addr}/v1/sys/mounts`, { headers: { 'x-vault-token': token } }),
    );
    const secret = (JSON.parse(mounts.body) as { data?: Record<string, { options?: { version?: string } }> }).data?.[
      'secret/'
    ];
    if (secret?.options?.version !== '2') {
      return yield* new TestbedError({
        component: 'openbao',
        reason: `dev server did not mount KV v2 at secret/: ${mounts.body.slice(0, 300)}`,
      });
    }
    progress(`openbao ${versions.openbaoRelease} dev server ready at ${addr} (${Date.now() - started} ms)`);
    return { addr, token, kvMount: 'secret' };
  });

export const postgresEndpoint = { host: '127.0.0.1', port: 5432, user: 'postgres', database: 'postgres' } as const;

const pgVersion = (): Promise<string> => {
  const client = new pg.Client({ ...postgresEndpoint, connectionTimeoutMillis: 3_000 });
  return client
    .connect()
    .then(() => client.query<{ server_version: string }>('SHOW server_version'))
    .then((r) => r.rows[0]?.server_version ?? 'unknown')
    .finally(() => client.end().catch(() => undefined));
};

/**
 * The machine's own PostgreSQL (trust auth on 127.0.0.1:5432). Started with the machine's
 * pg_ctlcluster command when it is down; never replaced by anything else.
 */
export const ensurePostgres = (progress: Progress) =>
  Effect.gen(function* () {
    const first = yield* Effect.either(Effect.tryPromise(pgVersion));
    if (first._tag === 'Right') {
      progress(`postgresql ${first.right} reachable at ${postgresEndpoint.host}:${postgresEndpoint.port}`);
      return { ...postgresEndpoint, version: first.right };
    }
    const confDir = '/etc/postgresql';
    const clusters = existsSync(confDir) ? readdirSync(confDir) : [];
    if (clusters.length === 0) {
      return yield* new TestbedError({
        component: 'postgresql',
        reason: `not reachable (${String(first.left.error)}) and no cluster under ${confDir} to start`,
      });
    }
    progress(`postgresql not reachable; starting cluster ${clusters[0]}/main`);
    yield* runCommand('postgresql', 'pg_ctlcluster', [
      '--skip-systemctl-redirect',
      clusters[0] as string,
      'main',
      'start',
    ]);
    const version = yield* Effect.tryPromise({
      try: pgVersion,
      catch: (e) =>
        new TestbedError({ component: 'postgresql', reason: `started but still not reachable: ${String(e)}` }),
    }).pipe(Effect.retry({ times: 40, schedule: Schedule.spaced('250 millis') }));
    return { ...postgresEndpoint, version };
  });

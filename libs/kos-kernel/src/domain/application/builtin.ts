// The five built-in ApplicationDefinitions the distribution ships (seed 000 §5.1 `pkg/app/builtin`; decision 0220):
// apps a homelab user recognises, each exercising one part of the model. Images are references only (nothing is
// pulled here). Every package digest is computed from the definition's content (canonical JSON of the spec without
// the digest itself), so a change to any byte of a template changes the digest.
import { digestOf } from './canonical.js';

export interface BuiltinDefinition {
  readonly apiVersion: 'kos.tsic.top/v1beta1';
  readonly kind: 'ApplicationDefinition';
  readonly metadata: { readonly name: string; readonly labels: Readonly<Record<string, string>> };
  readonly spec: Readonly<Record<string, unknown>>;
}

/** The label that marks a definition as built in (not a marker: ordinary metadata). */
export const BUILTIN_LABEL = 'catalogue.kos.tsic.top/source';

const labels = (app: string) => ({ 'app.kubernetes.io/name': app, 'app.kubernetes.io/instance': '{{app.name}}' });
const selector = (app: string, component = 'main') => ({
  'app.kubernetes.io/instance': '{{app.name}}',
  'app.kubernetes.io/name': app,
  'app.kubernetes.io/component': component,
});
const service = (app: string, port: number, targetPort: number) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: '{{app.name}}', labels: labels(app) },
  spec: { selector: selector(app), ports: [{ name: 'main', port, targetPort, protocol: 'TCP' }] },
});
const deployment = (app: string, component: string, name: string, pod: Record<string, unknown>, replicas = 1) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, labels: { ...labels(app), 'app.kubernetes.io/component': component } },
  spec: {
    replicas,
    selector: { matchLabels: selector(app, component) },
    template: { metadata: { labels: selector(app, component) }, spec: pod },
  },
});

// Health probes (decision 0243): a serving container is ready only once its port answers, so a crashing or
// still-starting app is not counted available (Ready comes from the Deployment's availableReplicas / the
// StatefulSet's readyReplicas); liveness restarts a process that stopped answering, with a start-up allowance
// before the first check. Ports are named, so the probes follow the container's declared port.
const httpProbes = (path: string, port: string, startupSeconds: number) => ({
  readinessProbe: { httpGet: { path, port }, periodSeconds: 5, failureThreshold: 3 },
  livenessProbe: {
    httpGet: { path, port },
    initialDelaySeconds: startupSeconds,
    periodSeconds: 20,
    failureThreshold: 3,
  },
});
const tcpProbes = (port: string, startupSeconds: number) => ({
  readinessProbe: { tcpSocket: { port }, periodSeconds: 5, failureThreshold: 3 },
  livenessProbe: { tcpSocket: { port }, initialDelaySeconds: startupSeconds, periodSeconds: 20, failureThreshold: 3 },
});

const specs: Readonly<Record<string, Readonly<Record<string, unknown>>>> = {
  // 1. A static web server: Deployment + Service + the page in a ConfigMap.
  'static-web': {
    package: {
      name: 'static-web',
      version: '1.27.3',
      dataFormat: 'none',
      description: 'nginx serving one static page',
    },
    config: {
      fields: {
        title: { type: 'string', default: 'My homelab', description: 'the page title' },
        workerProcesses: { type: 'integer', default: 1, minimum: 1, maximum: 8 },
      },
    },
    template: {
      documents: [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: '{{app.name}}-content', labels: labels('static-web') },
          data: {
            'index.html': '<!doctype html><title>{{config.title}}</title><h1>{{config.title}}</h1>',
            'nginx.conf':
              'worker_processes {{config.workerProcesses}};\nevents {}\nhttp { server { listen 8080; root /usr/share/nginx/html; } }\n',
          },
        },
        deployment('static-web', 'main', '{{app.name}}', {
          containers: [
            {
              name: 'nginx',
              image: 'docker.io/library/nginx:1.27.3-alpine',
              ports: [{ name: 'http', containerPort: 8080 }],
              ...httpProbes('/', 'http', 5),
              volumeMounts: [
                { name: 'content', mountPath: '/usr/share/nginx/html/index.html', subPath: 'index.html' },
                { name: 'content', mountPath: '/etc/nginx/nginx.conf', subPath: 'nginx.conf' },
              ],
            },
          ],
          volumes: [{ name: 'content', configMap: { name: '{{app.name}}-content' } }],
        }),
        service('static-web', 80, 8080),
      ],
    },
  },
  // 2. A key-value store with its data on a Volume (the claim comes from a Volume object of the same name).
  redis: {
    package: { name: 'redis', version: '7.4.1', dataFormat: 'redis-rdb-11', description: 'Redis with persistent data' },
    config: {
      fields: {
        maxMemory: { type: 'string', default: '256mb', description: 'maxmemory' },
        appendOnly: {
          type: 'string',
          default: 'yes',
          enum: ['yes', 'no'],
          description: 'append-only file persistence',
        },
      },
    },
    template: {
      documents: [
        {
          apiVersion: 'apps/v1',
          kind: 'StatefulSet',
          metadata: { name: '{{app.name}}', labels: { ...labels('redis'), 'app.kubernetes.io/component': 'main' } },
          spec: {
            replicas: 1,
            serviceName: '{{app.name}}',
            selector: { matchLabels: selector('redis') },
            template: {
              metadata: { labels: selector('redis') },
              spec: {
                containers: [
                  {
                    name: 'redis',
                    image: 'docker.io/library/redis:7.4.1-alpine',
                    args: ['--maxmemory', '{{config.maxMemory}}', '--appendonly', '{{config.appendOnly}}'],
                    ports: [{ name: 'redis', containerPort: 6379 }],
                    ...tcpProbes('redis', 15),
                    volumeMounts: [{ name: 'data', mountPath: '/data' }],
                  },
                ],
                volumes: [{ name: 'data', persistentVolumeClaim: { claimName: '{{volume.data}}' } }],
              },
            },
          },
        },
        service('redis', 6379, 6379),
      ],
    },
  },
  // 3. A multi-workload app: n8n's editor/webhook process and a queue worker.
  n8n: {
    package: { name: 'n8n', version: '1.72.1', dataFormat: 'n8n-1', description: 'workflow automation, web + worker' },
    config: {
      fields: {
        timezone: { type: 'string', default: 'UTC' },
        workerConcurrency: { type: 'integer', default: 5, minimum: 1, maximum: 50 },
        encryptionKey: { type: 'string', default: 'change-me', sensitive: true },
      },
    },
    template: {
      documents: [
        deployment('n8n', 'main', '{{app.name}}', {
          containers: [
            {
              name: 'n8n',
              image: 'docker.io/n8nio/n8n:1.72.1',
              env: [
                { name: 'GENERIC_TIMEZONE', value: '{{config.timezone}}' },
                { name: 'EXECUTIONS_MODE', value: 'queue' },
                { name: 'N8N_ENCRYPTION_KEY', value: '{{config.encryptionKey}}' },
              ],
              ports: [{ name: 'http', containerPort: 5678 }],
              ...httpProbes('/healthz', 'http', 30),
            },
          ],
        }),
        deployment('n8n', 'worker', '{{app.name}}-worker', {
          containers: [
            {
              name: 'worker',
              image: 'docker.io/n8nio/n8n:1.72.1',
              args: ['worker', '--concurrency={{config.workerConcurrency}}'],
              env: [
                { name: 'GENERIC_TIMEZONE', value: '{{config.timezone}}' },
                { name: 'EXECUTIONS_MODE', value: 'queue' },
                { name: 'N8N_ENCRYPTION_KEY', value: '{{config.encryptionKey}}' },
              ],
            },
          ],
        }),
        service('n8n', 80, 5678),
      ],
    },
  },
  // 4. An app with an install hook Job: Miniflux migrates its database schema before the first start.
  miniflux: {
    package: { name: 'miniflux', version: '2.2.4', dataFormat: 'miniflux-schema-2', description: 'RSS reader' },
    config: {
      fields: {
        databaseUrl: {
          type: 'string',
          default: 'postgres://miniflux@postgres/miniflux?sslmode=disable',
          sensitive: true,
        },
        pollingFrequency: { type: 'integer', default: 60, minimum: 5, maximum: 1440 },
      },
    },
    template: {
      documents: [
        deployment('miniflux', 'main', '{{app.name}}', {
          containers: [
            {
              name: 'miniflux',
              image: 'docker.io/miniflux/miniflux:2.2.4',
              env: [
                { name: 'DATABASE_URL', value: '{{config.databaseUrl}}' },
                { name: 'POLLING_FREQUENCY', value: '{{config.pollingFrequency | string}}' },
                { name: 'RUN_MIGRATIONS', value: '0' },
              ],
              ports: [{ name: 'http', containerPort: 8080 }],
              ...httpProbes('/healthcheck', 'http', 15),
            },
          ],
        }),
        service('miniflux', 80, 8080),
      ],
    },
    hooks: {
      install: {
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name: '{{app.name}}-install', labels: labels('miniflux') },
        spec: {
          backoffLimit: 2,
          template: {
            spec: {
              restartPolicy: 'Never',
              containers: [
                {
                  name: 'migrate',
                  image: 'docker.io/miniflux/miniflux:2.2.4',
                  args: ['-migrate'],
                  env: [{ name: 'DATABASE_URL', value: '{{config.databaseUrl}}' }],
                },
              ],
            },
          },
        },
      },
    },
  },
  // 5. An app with declared resources (package defaults materialized into spec.resources at creation).
  'uptime-kuma': {
    package: { name: 'uptime-kuma', version: '1.23.16', dataFormat: 'kuma-sqlite-1', description: 'uptime monitor' },
    config: { fields: { checkIntervalSeconds: { type: 'integer', default: 60, minimum: 20, maximum: 3600 } } },
    resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '500m', memory: '512Mi' } },
    template: {
      documents: [
        deployment('uptime-kuma', 'main', '{{app.name}}', {
          initContainers: [
            { name: 'init-data', image: 'docker.io/library/busybox:1.37.0', args: ['mkdir', '-p', '/app/data'] },
          ],
          containers: [
            {
              name: 'uptime-kuma',
              image: 'docker.io/louislam/uptime-kuma:1.23.16',
              env: [{ name: 'KUMA_CHECK_INTERVAL', value: '{{config.checkIntervalSeconds | string}}' }],
              ports: [{ name: 'http', containerPort: 3001 }],
              ...httpProbes('/', 'http', 30),
            },
          ],
        }),
        service('uptime-kuma', 80, 3001),
      ],
    },
  },
};

/** The spec with its content digest in `spec.package.digest`. */
export const withDigest = (spec: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> => {
  const pkg = { ...((spec['package'] as Record<string, unknown> | undefined) ?? {}) };
  delete pkg['digest'];
  const bare = { ...spec, package: pkg };
  return { ...bare, package: { ...pkg, digest: digestOf(bare) } };
};

/** The five built-in definitions, in a fixed order. */
export const BUILTIN_DEFINITIONS: ReadonlyArray<BuiltinDefinition> = Object.entries(specs).map(([name, spec]) => ({
  apiVersion: 'kos.tsic.top/v1beta1',
  kind: 'ApplicationDefinition',
  metadata: { name, labels: { [BUILTIN_LABEL]: 'builtin' } },
  spec: withDigest(spec),
}));

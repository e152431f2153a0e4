// The server itself: health, readiness against the real API server, Prometheus metrics, the OpenAPI document, the
// loopback-only bind without an identity module (and the start-up notice), and the `start` script as a real
// process that stops gracefully on SIGTERM.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindAddress, type ControllerHandle, parseConfig } from '../src/index.js';
import { useNamespace } from '@homelab/testbed/vitest';
import { app, appVersions, call, prepareCluster, startTestController } from './support.js';

const ns = useNamespace('kos-srv');

let cp: ControllerHandle;
const lines: string[] = [];

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController({ host: '0.0.0.0' }, { log: (l) => lines.push(l) });
});
afterAll(async () => cp?.close());

describe('controller server', () => {
  it('without an identity module it binds loopback even when asked for 0.0.0.0, and says so at start-up', () => {
    expect(cp.host).toBe('127.0.0.1');
    expect(cp.notice).toMatch(/no identity module.*loopback/);
    expect(lines.some((l) => /refusing to listen on 0\.0\.0\.0.*loopback/.test(l))).toBe(true);
    // Without the control-plane database no configuration object binds beyond loopback (hole 5, decision 0204).
    expect(bindAddress({ ...parseConfig([], {}), host: '0.0.0.0', insecureHttp: true }).host).toBe('127.0.0.1');
  });

  it('/healthz, /readyz (the KOS kinds are served), /metrics in Prometheus text with per-route counters', async () => {
    expect((await call(cp.url, 'GET', '/healthz')).status).toBe(200);
    expect((await call(cp.url, 'GET', '/readyz')).status).toBe(200);
    await call(cp.url, 'GET', '/api/v1/resources/Application?namespace=default&limit=1');
    const m = await call(cp.url, 'GET', '/metrics');
    expect(m.status).toBe(200);
    expect(m.body).toMatch(
      /kos_controlplane_requests_total\{method="GET",route="\/api\/v1\/resources\/\{kind\}",status="200"\} \d+/,
    );
    expect(m.body).toContain('kos_controlplane_request_duration_seconds_bucket');
    expect(m.body).toContain('process_cpu_user_seconds_total');
  });

  it('/api/v1/openapi.json describes the routes with the Schemas and lists every error code', async () => {
    const doc = await call(cp.url, 'GET', '/api/v1/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toBe('3.1.0');
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining([
        '/api/v1/resources/{kind}',
        '/api/v1/resources/{kind}/{name}',
        '/api/v1/plan-requests',
        '/api/v1/apply-requests',
        '/api/v1/action-requests',
        '/api/v1/discovery',
      ]),
    );
    expect(doc.body.components.schemas.ErrorEnvelope.properties.error.required).toEqual(
      expect.arrayContaining(['code', 'message', 'stage', 'object', 'retryable', 'requiresUserAction', 'sideEffects']),
    );
    expect(doc.body.paths['/api/v1/resources/{kind}'].post.responses['409'].description).toContain('object_exists');
  });

  it('graceful shutdown: apply work accepted before close() reaches its terminal state before close() returns', async () => {
    const other = await startTestController();
    const names = Array.from({ length: 30 }, (_, i) => `shut-${i}`);
    const desired = { objects: names.map((n) => app(ns.name, n, { replicas: 1 })) };
    const plan = await call(other.url, 'POST', '/api/v1/plan-requests', desired);
    expect(plan.status).toBe(200);
    const accepted = await call(other.url, 'POST', '/api/v1/apply-requests', {
      ...desired,
      planDigest: plan.body.digest,
    });
    expect(accepted.status).toBe(202);
    await other.close();
    const stored = await appVersions(ns.name);
    expect(names.filter((n) => stored[n] !== undefined)).toHaveLength(30);
    await expect(fetch(`${other.url}/healthz`)).rejects.toThrow();
  });

  it('the start script runs the server as a process: notice at start-up, graceful stop on SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--conditions=@homelab/source',
        join(import.meta.dirname, '../src/main.ts'),
        '--port',
        '0',
        '--modules=kos',
      ],
      {
        cwd: join(import.meta.dirname, '..'),
        env: {
          ...process.env,
          HOMELAB_TESTBED_STATE: join(import.meta.dirname, '../../../.testbed/state.json'),
          KUBECONFIG: '',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start-up line: ${out}`)), 60_000);
      child.stdout.on('data', () => {
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m && out.includes('loopback only')) {
          clearTimeout(timer);
          resolve(m[1] as string);
        }
      });
    });
    expect((await call(url, 'GET', '/readyz')).status).toBe(200);
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(out).toContain('shutting down');
    expect(out).toContain('stopped');
  });
});

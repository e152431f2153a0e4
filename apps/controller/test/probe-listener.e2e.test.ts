// Issue 26 item 6: health and metrics on their own port. The API (loopback without identity, Host-guarded) and a
// probe listener (`--health-port`, `--health-host`) that answers only GET /healthz, /readyz and /metrics, whatever the
// Host header — a kubelet names the pod IP, Prometheus scrapes by address — and stops with the API on close().
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ControllerHandle, parseConfig } from '../src/index.js';
import { prepareCluster, startTestController } from './support.js';

/** A GET with an explicit Host header (fetch does not let a caller set it). */
const get = (base: string, path: string, host: string): Promise<{ status: number; body: string }> =>
  new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });

const podAddress = '10.244.1.17:9090';
let cp: ControllerHandle;
const lines: string[] = [];
/** The message of each JSON log line (decision 0291). */
const messages = (jsonLines: readonly string[]): string[] =>
  jsonLines.map((l) => (JSON.parse(l) as { message: string }).message);

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController({ health: { host: '127.0.0.1', port: 0 } }, { log: (l) => lines.push(l) });
});
afterAll(async () => cp?.close());

describe('probe listener (--health-port)', () => {
  it('is a second listener, named at start-up', () => {
    expect(cp.healthUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(cp.healthUrl).not.toBe(cp.url);
    expect(messages(lines)).toContain(`health and metrics listening on ${cp.healthUrl} (/healthz /readyz /metrics)`);
  });

  it('/healthz, /readyz and /metrics answer a request that names the pod address; the API listener refuses /metrics then', async () => {
    const health = cp.healthUrl as string;
    expect(await get(health, '/healthz', podAddress)).toEqual({ status: 200, body: 'ok\n' });
    expect(await get(health, '/readyz', podAddress)).toEqual({ status: 200, body: 'ready\n' });
    const metrics = await get(health, '/metrics', podAddress);
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('process_cpu_user_seconds_total');
    // probe requests are counted like the API's
    expect(metrics.body).toMatch(/kos_controlplane_requests_total\{method="GET",route="\/readyz",status="200"\} \d+/);
    // the API's own listener keeps its Host guard for everything but the probes
    const refused = await get(cp.url, '/metrics', podAddress);
    expect(refused.status).toBe(421);
    expect(JSON.parse(refused.body).error.code).toBe('misdirected_request');
  });

  it('serves nothing else: the API routes are 404 there, whatever the Host', async () => {
    const health = cp.healthUrl as string;
    const host = new URL(health).host;
    const api = await get(health, '/api/v1/resources/Application?namespace=default&limit=1', host);
    expect(api).toEqual({ status: 404, body: 'not found: this listener serves /healthz, /readyz, /metrics\n' });
    expect((await get(health, '/api/v1/openapi.json', host)).status).toBe(404);
    // the same route on the API listener is served
    expect((await get(cp.url, '/api/v1/openapi.json', new URL(cp.url).host)).status).toBe(200);
  });

  it('flags and environment: --health-port alone binds loopback, --health-host without a port is refused', () => {
    expect(parseConfig([], {}).health).toBeNull();
    expect(parseConfig(['--health-port', '8081'], {}).health).toEqual({ host: '127.0.0.1', port: 8081 });
    expect(parseConfig(['--health-port=0', '--health-host=0.0.0.0'], {}).health).toEqual({
      host: '0.0.0.0',
      port: 0,
    });
    expect(parseConfig([], { CONTROLLER_HEALTH_PORT: '9443', CONTROLLER_HEALTH_HOST: '::' }).health).toEqual({
      host: '::',
      port: 9443,
    });
    expect(() => parseConfig(['--health-host', '0.0.0.0'], {})).toThrow('--health-host needs --health-port');
    expect(() => parseConfig(['--health-port', 'http'], {})).toThrow(
      'health port must be an integer from 0 to 65535, not "http"',
    );
  });

  it('a port already taken: the start fails naming --health-port, and nothing is left listening', async () => {
    const taken = new URL(cp.healthUrl as string);
    const failed: string[] = [];
    await expect(
      startTestController({ health: { host: '127.0.0.1', port: Number(taken.port) } }, { log: (l) => failed.push(l) }),
    ).rejects.toThrow(`--health-port ${taken.port} on 127.0.0.1: listen EADDRINUSE`);
    expect(messages(failed)).toContain('stopped');
    const api = messages(failed)
      .find((l) => l.startsWith('kos control plane listening on '))
      ?.split(' ')[5] as string;
    await expect(fetch(`${api}/healthz`)).rejects.toThrow();
  });

  it('close() stops the probe listener with the API', async () => {
    const health = cp.healthUrl as string;
    await cp.close();
    await expect(fetch(`${health}/healthz`)).rejects.toThrow();
    await expect(fetch(`${cp.url}/healthz`)).rejects.toThrow();
  });
});

// Issue 18 item 5 without the test bed: the controller's layer graph in this process against an API server that is
// not there (a kubeconfig naming a closed port) — an Ayatori module refused by its setup reports itself fatal, /readyz
// names it while /healthz stays 200, and closing the graph runs the shutdown order the graph gives: the server drains,
// the workers stop, then the pools close, and `stopped` is the last line. A refused start rejects with its typed error.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KubeAccessError, parseConfig, startController } from '../src/index.js';

/** A loopback port nothing listens on (bound, then released). */
const closedPort = async (): Promise<number> => {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
};

const dir = mkdtempSync(join(tmpdir(), 'controller-graph-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const kubeconfig = async () => {
  const file = join(dir, 'kubeconfig');
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: `https://127.0.0.1:${await closedPort()}` } }],
      users: [{ name: 'u', user: { token: 'unused' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  return file;
};

describe('the controller layer graph', () => {
  it('a module that stops on its own is fatal and named by /readyz; close() stops server, workers, pools in order', async () => {
    const lines: string[] = [];
    const fatal: string[] = [];
    const config = parseConfig(
      [
        '--port',
        '0',
        '--modules=ayatori',
        `--kubeconfig=${await kubeconfig()}`,
        '--database-secret-namespace=Not_A_Label',
      ],
      {},
    );
    const handle = await startController(config, { log: (l) => lines.push(l), onFatal: (r) => fatal.push(r) });
    try {
      for (let i = 0; i < 100 && fatal.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
      expect(fatal[0]).toContain('ayatori database controllers stopped');
      expect(handle.ayatori?.state()).toBe('failed');
      expect((await fetch(`${handle.url}/healthz`)).status).toBe(200);
      const ready = await fetch(`${handle.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.text()).toContain('the Ayatori database controllers are failed');
    } finally {
      await handle.close();
    }
    await handle.close(); // once only
    const messages = lines.map((l) => (JSON.parse(l) as { app: string; message: string }).message);
    const at = (m: string) => messages.findIndex((x) => x.startsWith(m));
    expect(at('shutting down')).toBeGreaterThan(at('controller (health and metrics only) listening on'));
    expect(at('ayatori database controllers stopped; closing PostgreSQL pools')).toBeGreaterThan(at('shutting down'));
    expect(at('stopped')).toBe(messages.length - 1);
    expect(messages.filter((m) => m === 'stopped')).toHaveLength(1);
    await expect(fetch(`${handle.url}/healthz`)).rejects.toThrow();
  });

  it('a kubeconfig that cannot be loaded rejects the start with KubeAccessError, after releasing what was built', async () => {
    const lines: string[] = [];
    const config = parseConfig(['--port', '0', '--modules=kos', `--kubeconfig=${join(dir, 'missing')}`], {});
    const refused = await startController(config, { log: (l) => lines.push(l) }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(KubeAccessError);
    expect((refused as KubeAccessError).message).toMatch(/^Kubernetes client: loading kube config: .*missing/);
    expect(lines.map((l) => (JSON.parse(l) as { message: string }).message)).toEqual(['stopped']);
  });
});

// ns-daemon main: thin wiring — SQLite store, Daemon flow, signed HTTP/SSE client of NSD, /healthz, /metrics,
// graceful shutdown. Never loads PostgreSQL or Kubernetes code.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Effect } from 'effect';
import client from 'prom-client';
import { fromHex, toHex } from '@homelab/service-control';
import { Daemon } from '@homelab/service-control/application';
import { openSqliteDaemonStore } from '@homelab/service-control/sqlite';
import { ReplayCache, type TransportSide, generateSigner, openStream, postUnary, signerFromPem, trustOnly } from '@homelab/service-control/transport';
import { loadConfig, readDeclarations } from './config.js';

const log = (event: string, fields: Record<string, unknown> = {}): void =>
  void process.stdout.write(`${JSON.stringify({ t: new Date().toISOString(), app: 'ns-daemon', event, ...fields })}\n`);

const config = loadConfig(process.env, process.argv.slice(2));
if (!existsSync(config.keyFile)) writeFileSync(config.keyFile, generateSigner().privateKeyPem, { mode: 0o600 });
const signer = signerFromPem(readFileSync(config.keyFile, 'utf8'));
// One replay cache for the whole runtime: kept across stream reconnects.
const side: TransportSide = { signer, trust: trustOnly(fromHex(config.nsdKey)), replay: new ReplayCache() };
const store = openSqliteDaemonStore(config.stateFile);
const kill = (point: string) => {
  if (config.fault === point) {
    log('fault', { point });
    process.kill(process.pid, 'SIGKILL');
  }
};

const daemon = new Daemon({
  store,
  identity: signer.machineId,
  networkId: fromHex(config.network),
  declarations: () => readDeclarations(config.declarationsFile),
  fault: kill,
  log,
  transport: {
    unary: (path, payload) => Effect.runPromise(postUnary(side, `${config.nsdUrl}${path}`, payload)),
    stream: (payload, onPayload, signal) =>
      openStream(side, `${config.nsdUrl}/v1/config.stream`, payload, { onPayload, onReject: (e) => log('event-rejected', { code: e.code }) }, signal),
  },
});

const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry });
new client.Gauge({ name: 'ns_snapshot_acks', help: 'snapshot.ack sent', registers: [registry], collect() { this.set(daemon.status.acks); } });
new client.Gauge({ name: 'ns_runtime_generation', help: 'runtime generation of this process', registers: [registry], collect() { this.set(Number(daemon.status.generation ?? 0)); } });
new client.Gauge({ name: 'ns_authority_epoch', help: 'adopted authority epoch', registers: [registry], collect() { this.set(Number(daemon.status.epoch ?? 0)); } });

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/healthz')
    return void res
      .writeHead(daemon.status.phase === 'failed' ? 503 : 200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ ...daemon.status, identity: toHex(signer.machineId) }));
  if (req.method === 'GET' && req.url === '/metrics') return void registry.metrics().then((m) => res.writeHead(200, { 'content-type': registry.contentType }).end(m));
  res.writeHead(404).end();
});
server.listen(config.port, config.host, () =>
  log('listening', { port: (server.address() as AddressInfo).port, identity: toHex(signer.machineId) }),
);

const ctl = new AbortController();
const running = daemon.run(ctl.signal).catch((e: unknown) => log('failed', { error: String(e), code: (e as { code?: string }).code }));

let stopping = false;
const shutdown = (signal: string) => {
  if (stopping) return;
  stopping = true;
  log('shutdown', { signal });
  ctl.abort();
  void running.finally(() => {
    server.close();
    store.close();
    process.exit(0);
  });
  setTimeout(() => process.exit(0), 5_000).unref();
};
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

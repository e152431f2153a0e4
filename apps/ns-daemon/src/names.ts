// Local names in ns-daemon (spec §7; decisions 0115–0119, 0175, 0176): the name table in the state file behind ONE
// `LocalNames` (it holds the resolver's caches, so a rebind made here clears what the DNS listener answers from),
// the loopback DNS listener (off unless a port is configured) and the local owner's name operations over the
// loopback HTTP listener. Every answer comes from `names/resolver.ts`; positive TTLs are bounded by the permit of the
// name's ServiceRef as this daemon's PermitEngine sees it now.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Context, Effect, Either, Layer } from 'effect';
import client from 'prom-client';
import { ServiceControlError } from '@homelab/service-control';
import { DaemonService } from '@homelab/service-control/application';
import { dnsServer } from '@homelab/service-control/dns';
import { LocalNameError, LocalNames, NameRefused, type NameEntry, type NameError, cryptoNameRng } from '@homelab/service-control/names';
import { openSqliteNameStore } from '@homelab/service-control/sqlite';

export class LocalNamesService extends Context.Tag('@homelab/ns-daemon/LocalNames')<LocalNamesService, LocalNames>() {}

/** The name table in the daemon's state file (decision 0115), closed with the scope. */
export const namesLayer = (stateFile: string, zone: string): Layer.Layer<LocalNamesService, ServiceControlError, DaemonService> =>
  Layer.scoped(
    LocalNamesService,
    Effect.gen(function* () {
      const daemon = yield* DaemonService;
      const store = yield* Effect.acquireRelease(
        Effect.try({ try: () => openSqliteNameStore(stateFile), catch: (e) => e as ServiceControlError }),
        (s) => Effect.sync(() => s.close()),
      );
      return new LocalNames(store, { zone, rng: cryptoNameRng, permitRemainingMs: (ref) => daemon.leases.permitRemainingMs(ref) });
    }),
  );

/** Queries handled, by transport and outcome (registered on the /metrics registry by main.ts). */
export const dnsQueries = new client.Counter({ name: 'ns_dns_queries_total', help: 'DNS packets handled by the local-name listener', labelNames: ['transport', 'outcome'], registers: [] });

export interface DnsConfig {
  readonly dnsHost: string;
  /** null: no DNS listener */
  readonly dnsPort: number | null;
  readonly dnsZone: string;
}

/** The loopback DNS listener (UDP + TCP on one port) while the scope is open; nothing when no port is configured. */
export const dnsLayer = (c: DnsConfig, log: (event: string, fields?: Record<string, unknown>) => void): Layer.Layer<never, Error, LocalNamesService> =>
  c.dnsPort === null
    ? Layer.empty
    : Layer.scopedDiscard(
        Effect.gen(function* () {
          const names = yield* LocalNamesService;
          const server = yield* dnsServer({
            host: c.dnsHost,
            port: c.dnsPort as number,
            // the caches only need a monotonic ms clock; the permit bound is read from the engine on every answer
            resolve: (q) => names.resolve(q, performance.now()),
            onQuery: (transport, r) => dnsQueries.inc({ transport, outcome: r.outcome }),
            onError: (e) => log('dns-error', { error: String(e) }),
          });
          log('dns-listening', { host: server.host, port: server.port, tcp: server.tcp, zone: c.dnsZone });
        }),
      );

const entryJson = (e: NameEntry) => ({ name: e.name, kind: e.kind, state: e.state, target: e.target, version: String(e.version) });

const errorJson = (e: NameError): { status: number; body: { error: string; detail: string | null } } =>
  e instanceof NameRefused
    ? { status: 409, body: { error: e.reason, detail: e.name } }
    : e instanceof LocalNameError
      ? { status: 409, body: { error: e.code, detail: e.detail } }
      : { status: e instanceof ServiceControlError && e.code === 'storage-unavailable' ? 503 : 409, body: { error: e.code, detail: e.detail ?? null } };

/**
 * `POST /v1/owner/names` — the local owner's name operations (loopback listener), JSON
 * `{op: 'allocate', ref, address}` | `{op: 'nickname' | 'rebind', name, ref, address}` | `{op: 'tombstone', name}`;
 * 200 `{entry}` (allocate: also `outcome`), 409 `{error, detail}` refused, 400 malformed. `GET` lists the table.
 */
export const ownerNames = (names: LocalNames, req: IncomingMessage, res: ServerResponse): void => {
  const reply = (status: number, body: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  if (req.method === 'GET') {
    const all = names.store.entries();
    return Either.isRight(all) ? reply(200, { entries: all.right.map(entryJson) }) : reply(503, { error: all.left.code, detail: all.left.detail });
  }
  let raw = '';
  req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
  req.on('end', (): void => {
    let b: Record<string, unknown>;
    try {
      b = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return reply(400, { error: 'invalid-encoding' });
    }
    const str = (k: string): string | null => (typeof b[k] === 'string' ? (b[k] as string) : null);
    const [op, name, ref, address] = [str('op'), str('name'), str('ref'), str('address')];
    const target = ref !== null && address !== null ? { ref, address } : null;
    const done = (r: Either.Either<NameEntry, NameError>) => (Either.isRight(r) ? reply(200, { entry: entryJson(r.right) }) : reply(errorJson(r.left).status, errorJson(r.left).body));
    if (op === 'allocate' && target !== null) {
      const r = names.allocate(target);
      return Either.isRight(r) ? reply(200, { entry: entryJson(r.right.entry), outcome: r.right.outcome }) : reply(errorJson(r.left).status, errorJson(r.left).body);
    }
    if (op === 'nickname' && name !== null && target !== null) return done(names.nickname(name, target));
    if (op === 'rebind' && name !== null && target !== null) return done(Either.map(names.rebind(name, target), (x) => x.entry));
    if (op === 'tombstone' && name !== null) return done(names.tombstone(name));
    reply(400, { error: 'invalid-encoding', detail: 'op allocate {ref, address} | nickname/rebind {name, ref, address} | tombstone {name}' });
  });
};

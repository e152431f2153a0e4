// Local names in ns-daemon (spec §7; decisions 0115–0119, 0175, 0176): the name table in the state file behind ONE
// `LocalNames` (it holds the resolver's caches, so a rebind made here clears what the DNS listener answers from),
// the loopback DNS listener (off unless a port is configured) and the local owner's name operations over the
// loopback HTTP listener. Every answer comes from `names/resolver.ts`; positive TTLs are bounded by the permit of the
// name's ServiceRef as this daemon's PermitEngine sees it now.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Context, Effect, Either, Layer, Schema } from 'effect';
import client from 'prom-client';
import { ServiceControlError, serviceRefText } from '@homelab/service-control';
import { DaemonService } from '@homelab/service-control/application';
import { dnsServer } from '@homelab/service-control/dns';
import {
  LocalNameError,
  LocalNames,
  NameRefused,
  type NameEntry,
  type NameError,
  type SelectorEntry,
  cryptoNameRng,
  selectedSource,
} from '@homelab/service-control/names';
import { openSqliteNameStore } from '@homelab/service-control/sqlite';

export class LocalNamesService extends Context.Tag('@homelab/ns-daemon/LocalNames')<LocalNamesService, LocalNames>() {}

/** The name table in the daemon's state file (decision 0115), closed with the scope. */
export const namesLayer = (
  stateFile: string,
  zone: string,
  log?: (event: string, fields?: Record<string, unknown>) => void,
): Layer.Layer<LocalNamesService, ServiceControlError, DaemonService> =>
  Layer.scoped(
    LocalNamesService,
    Effect.gen(function* () {
      const daemon = yield* DaemonService;
      const store = yield* Effect.acquireRelease(
        Effect.try({ try: () => openSqliteNameStore(stateFile), catch: (e) => e as ServiceControlError }),
        (s) => Effect.sync(() => s.close()),
      );
      const names = new LocalNames(store, {
        zone,
        rng: cryptoNameRng,
        permitRemainingMs: (ref) => daemon.leases.permitRemainingMs(ref),
      });
      // a service withdrawn from this node by B stops every multi-source entry that selected it (decision 0192). An
      // unwritable name table fails the snapshot event (no ACK, so it is delivered again); a corrupt selector row is
      // that name's problem only (it answers SERVFAIL) and must not hold up the node's snapshots
      daemon.onSourcesWithdrawn((refs) => {
        for (const ref of refs) {
          const out = names.sourceGone(serviceRefText(ref));
          if (Either.isRight(out)) {
            if (out.right.length > 0)
              log?.('name-sources-withdrawn', { ref: serviceRefText(ref), names: out.right.map((e) => e.name) });
          } else if (out.left._tag === 'ServiceControlError' && out.left.code === 'storage-unavailable') throw out.left;
          else
            log?.('name-source-withdrawal-failed', {
              ref: serviceRefText(ref),
              error: out.left._tag === 'NameRefused' ? out.left.reason : out.left.code,
            });
        }
      });
      return names;
    }),
  );

/** Queries handled, by transport and outcome (registered on the /metrics registry by main.ts). */
export const dnsQueries = new client.Counter({
  name: 'ns_dns_queries_total',
  help: 'DNS packets handled by the local-name listener',
  labelNames: ['transport', 'outcome'],
  registers: [],
});

export interface DnsConfig {
  readonly dnsHost: string;
  /** null: no DNS listener */
  readonly dnsPort: number | null;
  readonly dnsZone: string;
}

/** The loopback DNS listener (UDP + TCP on one port) while the scope is open; nothing when no port is configured. */
export const dnsLayer = (
  c: DnsConfig,
  log: (event: string, fields?: Record<string, unknown>) => void,
): Layer.Layer<never, Error, LocalNamesService> =>
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

const entryJson = (e: NameEntry) => ({
  name: e.name,
  kind: e.kind,
  state: e.state,
  target: e.target,
  version: String(e.version),
});

/** A multi-source name as the owner sees it: candidates, selection and what it answers now (decision 0192). */
const selectorJson = (s: SelectorEntry) => ({
  name: s.name,
  sources: s.sources,
  selection: s.selection,
  answering: selectedSource(s),
  version: String(s.version),
});

const errorJson = (e: NameError): { status: number; body: { error: string; detail: string | null } } =>
  e instanceof NameRefused
    ? { status: 409, body: { error: e.reason, detail: e.name } }
    : e instanceof LocalNameError
      ? { status: 409, body: { error: e.code, detail: e.detail } }
      : {
          status: e instanceof ServiceControlError && e.code === 'storage-unavailable' ? 503 : 409,
          body: { error: e.code, detail: e.detail ?? null },
        };

// The request bodies (Effect Schema; unknown fields are refused: `invalid-encoding`, 400).
const Text = Schema.String;
const Source = Schema.Struct({ ref: Text, address: Text });
export const OwnerNameRequest = Schema.Union(
  Schema.Struct({ op: Schema.Literal('allocate'), ref: Text, address: Text }),
  Schema.Struct({ op: Schema.Literal('nickname', 'rebind'), name: Text, ref: Text, address: Text }),
  Schema.Struct({ op: Schema.Literal('tombstone'), name: Text }),
  // multi-source names (decision 0192)
  Schema.Struct({ op: Schema.Literal('create-multi-source'), name: Text, sources: Schema.Array(Source) }),
  Schema.Struct({ op: Schema.Literal('add-source'), name: Text, ref: Text, address: Text }),
  Schema.Struct({ op: Schema.Literal('withdraw-source'), name: Text, ref: Text }),
  Schema.Struct({ op: Schema.Literal('select'), name: Text, ref: Text }),
  Schema.Struct({ op: Schema.Literal('source-gone'), ref: Text }),
);
export type OwnerNameRequest = typeof OwnerNameRequest.Type;
const decodeRequest = Schema.decodeUnknownEither(OwnerNameRequest, { onExcessProperty: 'error' });

const USAGE =
  'op allocate {ref, address} | nickname/rebind {name, ref, address} | tombstone {name} | create-multi-source {name, sources: [{ref, address}]} | add-source {name, ref, address} | withdraw-source {name, ref} | select {name, ref} | source-gone {ref}';

/** One decoded request through the one `LocalNames`: 200 with the result, or the typed refusal. */
const perform = (names: LocalNames, b: OwnerNameRequest): { status: number; body: unknown } => {
  const out = <A>(r: Either.Either<A, NameError>, json: (a: A) => unknown) =>
    Either.isRight(r) ? { status: 200, body: json(r.right) } : errorJson(r.left);
  const entry = (e: NameEntry) => ({ entry: entryJson(e) });
  const selector = (s: SelectorEntry) => ({ selector: selectorJson(s) });
  switch (b.op) {
    case 'allocate':
      return out(names.allocate({ ref: b.ref, address: b.address }), (a) => ({
        entry: entryJson(a.entry),
        outcome: a.outcome,
      }));
    case 'nickname':
      return out(names.nickname(b.name, { ref: b.ref, address: b.address }), entry);
    case 'rebind':
      return out(
        Either.map(names.rebind(b.name, { ref: b.ref, address: b.address }), (x) => x.entry),
        entry,
      );
    case 'tombstone':
      return out(names.tombstone(b.name), entry);
    case 'create-multi-source':
      return out(names.createSelector(b.name, b.sources), selector);
    case 'add-source':
      return out(names.addSource(b.name, { ref: b.ref, address: b.address }), selector);
    case 'withdraw-source':
      return out(names.withdrawSource(b.name, b.ref), selector);
    case 'select':
      return out(names.select(b.name, b.ref), selector);
    case 'source-gone':
      return out(names.sourceGone(b.ref), (xs) => ({ selectors: xs.map(selectorJson) }));
  }
};

/**
 * `POST /v1/owner/names` — the local owner's name operations (loopback listener), JSON bodies of `OwnerNameRequest`
 * (unknown fields refused). 200 `{entry}` (allocate: also `outcome`) or, for multi-source names, `{selector}`
 * (`source-gone`: `{selectors}`); 409 `{error, detail}` refused with the reason/code of decision 0117 / 0192; 400
 * `{error: 'invalid-encoding'}` malformed; 503 storage unavailable. `GET` lists the table and the selectors.
 */
export const ownerNames = (names: LocalNames, req: IncomingMessage, res: ServerResponse): void => {
  const reply = (status: number, body: unknown): void =>
    void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  if (req.method === 'GET') {
    const all = names.store.entries();
    const sel = names.store.selectors();
    if (Either.isLeft(all)) return reply(503, { error: all.left.code, detail: all.left.detail });
    if (Either.isLeft(sel)) return reply(503, { error: sel.left.code, detail: sel.left.detail });
    return reply(200, { entries: all.right.map(entryJson), selectors: sel.right.map(selectorJson) });
  }
  let raw = '';
  req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
  req.on('end', (): void => {
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch {
      return reply(400, { error: 'invalid-encoding', detail: 'body is not JSON' });
    }
    const b = decodeRequest(json);
    if (Either.isLeft(b)) return reply(400, { error: 'invalid-encoding', detail: `${USAGE}: ${b.left.message}` });
    const r = perform(names, b.right);
    reply(r.status, r.body);
  });
};

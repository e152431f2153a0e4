// report.replace in ONE autocommit statement where its rows are the ones this nsd remembers (decision 0670).
//
// The general path (decisions 0371/0372) reads `replace_rows` under the fence, decides in TypeScript (fences, scopes,
// declarations, acceptReport, the service rows, the P allocation) and writes with `replace_write` sent with the COMMIT:
// two round trips. The decision depends on nothing but the envelope, the body and `replace_rows`' row (plus fresh
// service ids), so the store remembers that row per (identity, Network) — as read, or as re-read after its own write
// in the same transaction — and a later replace of that scope is decided from the remembered row. `replace_fast` then
// takes the general path's locks in its order (the authority row FOR SHARE with its epoch, then `replace_rows` itself:
// runtime, report row, port lock, allocation rows), writes only where membership holds, the runtime row is the
// envelope's pair and every other row of `replace_rows` is exactly the remembered one (`replace_norm`: the arrays
// without an order of their own sorted), and then calls `replace_write` with the writes computed in TypeScript and
// returns the rows as they now are (the next remembered row). Anything else: `slow`, nothing written, with the rows
// as it read them (past the epoch fence): the caller decides once more from those, and a second `slow` goes the
// general path.
import type { ReplaceWrites } from '../../application/authority-store.js';
import { toHex } from '../../domain/bytes.js';
import { pgBytes as buf } from './batch.js';
import { allocationToJson, portWrites } from './port-store.js';

const S = 'service_control';

/** Appended to the authority store's migrations. */
export const replaceFastMigration = (): string =>
  `CREATE FUNCTION ${S}.replace_norm(x jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $fn$
     SELECT jsonb_build_object('report', x->'report', 'services', x->'services', 'allocations', x->'allocations',
       'sources', x->'sources',
       'ports', (SELECT coalesce(jsonb_agg(e ORDER BY (e->>'port')::int), '[]') FROM jsonb_array_elements(x->'ports') e),
       'versions', (SELECT coalesce(jsonb_agg(e ORDER BY e->>'service_id'), '[]') FROM jsonb_array_elements(x->'versions') e))
   $fn$;
   CREATE FUNCTION ${S}.replace_fast(e numeric, i bytea, n bytea, gen numeric, rid bytea, ir jsonb, services jsonb,
     allocations jsonb, port_upserts jsonb, port_released jsonb, rev numeric, digest bytea, reason text, prune boolean,
     OUT outcome text, OUT outbox bigint, OUT state json)
   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
   DECLARE cur numeric; r record;
   BEGIN
     outcome := 'slow';
     -- the store's fence: the authority row of the connection's shard FOR SHARE, its epoch the one this authority serves
     SELECT a.epoch INTO cur FROM ${S}.authority a WHERE a.id = ${S}.current_shard() FOR SHARE;
     IF cur IS DISTINCT FROM e THEN RETURN; END IF;
     -- the general path's read, its locks in its order (membership, runtime row, report row, port lock, allocation rows)
     SELECT * INTO r FROM ${S}.replace_rows(i, n);
     -- slow answers carry the rows as read here: the caller decides once more from them (a production or a port step
     -- since the last replace changed them) before it falls back to the general path
     state := row_to_json(r);
     IF r.member IS NOT TRUE THEN RETURN; END IF;
     -- checkFences: the current instance (the envelope's pair; the caller decided with a remembered row of this pair)
     IF r.runtime IS NULL OR (r.runtime->>'generation')::numeric <> gen OR r.runtime->>'runtime_id' <> encode(rid, 'hex')
     THEN RETURN; END IF;
     -- the report row (acceptReport's base revision and digest), the services, the port table, the allocation rows,
     -- the policy sources and versions: exactly the remembered ones the caller decided with
     IF ${S}.replace_norm(to_jsonb(r)) IS DISTINCT FROM ${S}.replace_norm(ir) THEN RETURN; END IF;
     outbox := ${S}.replace_write(i, n, services, allocations, port_upserts, port_released, rev, digest, reason, prune);
     -- the rows as they now are: the next remembered row
     SELECT row_to_json(x) INTO state FROM ${S}.replace_rows(i, n) x;
     outcome := 'written';
   END $fn$;`;

/** The general path's re-read after its write, queued before the COMMIT: the rows the scope's next replace names. */
export const replaceStateSql = (identity: string, networkId: string): string =>
  `SELECT row_to_json(x) AS state FROM ${S}.replace_rows(${identity}, ${networkId}) x`;

/** `replace_write`'s arguments for an accepted report (the port table's change checked: a bad release throws). */
export const replaceWriteArgs = (w: ReplaceWrites) => {
  const { upserts, released } = portWrites(w.ports.before, w.ports.after);
  // at most one allocation row per service (the last), as the former one-statement-per-row writes left it
  const allocations = new Map(w.allocations.map((a) => [toHex(a.serviceRef.serviceId), a]));
  return {
    services: w.services.map((s) => ({
      id: toHex(s.serviceId),
      key: s.declarationKey,
      decl: toHex(s.declaration),
      state: s.state,
      port: s.port === null ? null : Number(s.port),
      lrev: s.listenerRevision.toString(),
    })),
    allocs: [...allocations.values()].map((a) => ({
      id: toHex(a.serviceRef.serviceId),
      pub: toHex(a.publisher),
      value: allocationToJson(a),
    })),
    ports: upserts.map((e) => ({
      port: Number(e.port),
      kind: e.kind,
      nsd: toHex(e.serviceRef.nsdId),
      net: toHex(e.serviceRef.networkId),
      svc: toHex(e.serviceRef.serviceId),
    })),
    released: released.map(String),
  };
};

export type FastReplaceOutcome =
  | { readonly outcome: 'slow'; readonly state: Record<string, unknown> | null }
  | { readonly outcome: 'written'; readonly outbox: bigint; readonly state: Record<string, unknown> };

/** The one autocommit statement, a named prepared statement of each connection. */
export const replaceFastQuery = (
  epoch: bigint,
  w: ReplaceWrites,
  generation: bigint,
  runtimeId: Uint8Array,
  remembered: Record<string, unknown>,
  prune: boolean,
) => {
  const a = replaceWriteArgs(w);
  return {
    name: 'sc_replace_fast',
    text: `SELECT outcome, outbox, state FROM ${S}.replace_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
    values: [
      epoch.toString(),
      buf(w.publisher),
      buf(w.networkId),
      generation.toString(),
      buf(runtimeId),
      JSON.stringify(remembered),
      JSON.stringify(a.services),
      JSON.stringify(a.allocs),
      JSON.stringify(a.ports),
      JSON.stringify(a.released),
      w.report.revision.toString(),
      buf(w.report.digest),
      w.outboxReason,
      prune,
    ],
  };
};

/** `replace_rows`' row per (identity, Network), as last read or written by this store; at most `max`, oldest dropped. */
export class ReplaceMemo {
  private readonly rows = new Map<string, Record<string, unknown>>();
  constructor(private readonly max = 65_536) {}
  static key(identity: Uint8Array, networkId: Uint8Array): string {
    return `${toHex(identity)}:${toHex(networkId)}`;
  }
  get(key: string): Record<string, unknown> | undefined {
    return this.rows.get(key);
  }
  set(key: string, row: Record<string, unknown>): void {
    this.rows.delete(key);
    this.rows.set(key, row);
    if (this.rows.size > this.max) this.rows.delete(this.rows.keys().next().value as string);
  }
}

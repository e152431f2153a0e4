// report.replace in ONE autocommit statement (decision 0670) — withdrawn (decision 0690). On an idle machine the
// statement cost PostgreSQL more CPU than the round trip it saved (it calls `replace_rows` twice and compares the rows
// as normalized JSON, `replace_norm`), and replaces per second were lower at 1, 8 and 32 clients; every replace now
// takes the general path (decisions 0371/0372: `replace_rows`, then `replace_write` with the COMMIT).
//
// What is left here are the two migrations: the one that created `replace_norm` and `replace_fast` (kept verbatim:
// a database counts the migrations it ran by position, and a fresh one runs the same sequence as an upgraded one),
// and the one that drops them.

const S = 'service_control';

/** The migration that created them (decision 0670), as it ran: the authority store's migrations are counted by position. */
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

/** Decision 0690: the functions of 0670 dropped (every database that runs this ran the migration above). */
export const replaceFastDropMigration = (): string =>
  `DROP FUNCTION ${S}.replace_fast(numeric, bytea, bytea, numeric, bytea, jsonb, jsonb, jsonb, jsonb, jsonb, numeric,
     bytea, text, boolean);
   DROP FUNCTION ${S}.replace_norm(jsonb);`;

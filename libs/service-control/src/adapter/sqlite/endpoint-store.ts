// A's endpoint table on SQLite (spec §5.10): one table keyed by (full publisher identity, P) across all memberships,
// in the daemon's database file with the daemon store's conventions — WAL, synchronous=FULL, one checksummed row per
// record — plus a manifest row (row counts, checksummed) so that vanished rows are detected as an incomplete store.
// Every call is ONE serial `BEGIN IMMEDIATE` transaction: read the table under the write lock, run the pure step,
// write the changed rows and the manifest, COMMIT (durable when it returns). The caller sends or installs only after.
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import type { EndpointStore } from '../../application/port-arbiter.js';
import { fromHex, toHex } from '../../domain/bytes.js';
import { scError } from '../../domain/errors.js';
import { guardStorage as guard, openDaemonDatabase } from './database.js';
import type { ServiceRef } from '../../domain/ids.js';
import type {
  Endpoint,
  EndpointPhase,
  EndpointTable,
  ProposalEntry,
  ProposalRef,
  ProposalStatus,
} from '../../domain/port-endpoint.js';

const MIGRATIONS: readonly string[] = [
  `CREATE TABLE port_endpoint (key TEXT PRIMARY KEY, value TEXT NOT NULL, checksum TEXT NOT NULL) STRICT;
   CREATE TABLE port_proposal (key TEXT PRIMARY KEY, value TEXT NOT NULL, checksum TEXT NOT NULL) STRICT;
   CREATE TABLE port_floor (key TEXT PRIMARY KEY, value TEXT NOT NULL, checksum TEXT NOT NULL) STRICT;
   CREATE TABLE port_manifest (id INTEGER PRIMARY KEY CHECK (id = 1), value TEXT NOT NULL, checksum TEXT NOT NULL) STRICT;`,
];

const sum = (value: string): string => createHash('sha256').update(value).digest('hex');

type Row = { key: string; value: string; checksum: string };

const refOut = (r: ServiceRef) => [toHex(r.nsdId), toHex(r.networkId), toHex(r.serviceId)];
const refIn = (v: unknown): ServiceRef => {
  const [a, b, c] = v as [string, string, string];
  return { nsdId: fromHex(a), networkId: fromHex(b), serviceId: fromHex(c) };
};
const proposalOut = (p: ProposalRef) => ({
  r: refOut(p.serviceRef),
  lr: p.listenerRevision.toString(),
  d: toHex(p.intentDigest),
  ro: p.allocationRound.toString(),
  s: p.proposalSeq.toString(),
  id: toHex(p.proposalId),
  p: p.port.toString(),
});
const proposalIn = (v: Record<string, unknown>): ProposalRef => ({
  serviceRef: refIn(v['r']),
  listenerRevision: BigInt(v['lr'] as string),
  intentDigest: fromHex(v['d'] as string),
  allocationRound: BigInt(v['ro'] as string),
  proposalSeq: BigInt(v['s'] as string),
  proposalId: fromHex(v['id'] as string),
  port: BigInt(v['p'] as string),
});
const PHASES: readonly EndpointPhase[] = ['open', 'may-install', 'installed-closed', 'active', 'tombstoned'];
const STATUSES: readonly ProposalStatus[] = ['proposed', 'confirmed', 'terminated-pure'];

const endpointValue = (e: Endpoint): string =>
  JSON.stringify({
    pub: toHex(e.publisher),
    port: e.port.toString(),
    phase: e.phase,
    owner: e.owner === null ? null : refOut(e.owner),
    op: e.ownerProposalId === null ? null : toHex(e.ownerProposalId),
    inst: e.installed,
  });
const proposalValue = (p: ProposalEntry): string =>
  JSON.stringify({ pub: toHex(p.publisher), ref: proposalOut(p.ref), st: p.status });

export interface SqliteEndpointStoreOptions {
  /** Injected fault: called right after each COMMIT with the step's label (crash-point tests SIGKILL here). */
  readonly afterCommit?: (label: string) => void;
}

/** Open A's endpoint table in the daemon's SQLite file (its own tables and migration counter). */
export const openSqliteEndpointStore = (
  path: string,
  options: SqliteEndpointStoreOptions = {},
): EndpointStore & { readonly db: Database.Database } => {
  const db = openDaemonDatabase(path, { versionKey: 'endpoint_version', migrations: MIGRATIONS });
  const all = (table: string) => db.prepare<[], Row>(`SELECT key, value, checksum FROM ${table}`);
  const readEndpoints = all('port_endpoint');
  const readProposals = all('port_proposal');
  const readFloors = all('port_floor');
  const readManifest = db.prepare<[], { value: string; checksum: string }>(
    'SELECT value, checksum FROM port_manifest WHERE id = 1',
  );
  const put = (table: string) => db.prepare(`INSERT OR REPLACE INTO ${table} VALUES (?, ?, ?)`);
  const putEndpoint = put('port_endpoint');
  const putProposal = put('port_proposal');
  const putFloor = put('port_floor');
  const putManifest = db.prepare('INSERT OR REPLACE INTO port_manifest VALUES (1, ?, ?)');

  const corrupt = (what: string) => scError('state-inconsistent', `endpoint table: ${what}`);

  /** Read the whole table (inside the write transaction). Any checksum/shape/count mismatch → state-inconsistent. */
  const load = (): { table: EndpointTable; raw: Map<string, string> } => {
    const raw = new Map<string, string>();
    const check = (r: Row, kind: string): Record<string, unknown> => {
      if (sum(r.value) !== r.checksum) throw corrupt(`checksum mismatch in a ${kind} row`);
      raw.set(`${kind}/${r.key}`, r.value);
      try {
        return JSON.parse(r.value) as Record<string, unknown>;
      } catch {
        throw corrupt(`unparsable ${kind} row`);
      }
    };
    const endpoints = new Map<string, Endpoint>();
    const eRows = readEndpoints.all();
    for (const r of eRows) {
      const v = check(r, 'endpoint');
      const phase = v['phase'] as EndpointPhase;
      if (!PHASES.includes(phase)) throw corrupt('unknown endpoint phase');
      endpoints.set(r.key, {
        publisher: fromHex(v['pub'] as string),
        port: BigInt(v['port'] as string),
        phase,
        owner: v['owner'] === null ? null : refIn(v['owner']),
        ownerProposalId: v['op'] === null ? null : fromHex(v['op'] as string),
        installed: v['inst'] === true,
      });
    }
    const proposals = new Map<string, ProposalEntry>();
    const pRows = readProposals.all();
    for (const r of pRows) {
      const v = check(r, 'proposal');
      const status = v['st'] as ProposalStatus;
      if (!STATUSES.includes(status)) throw corrupt('unknown proposal status');
      proposals.set(r.key, {
        publisher: fromHex(v['pub'] as string),
        ref: proposalIn(v['ref'] as Record<string, unknown>),
        status,
      });
    }
    const floors = new Map<string, bigint>();
    const fRows = readFloors.all();
    for (const r of fRows) {
      const v = check(r, 'floor');
      floors.set(r.key, BigInt(v['floor'] as string));
    }
    const m = readManifest.get();
    const counts = { e: eRows.length, p: pRows.length, f: fRows.length };
    if (m === undefined) {
      if (counts.e + counts.p + counts.f > 0) throw corrupt('rows without a manifest');
    } else {
      if (sum(m.value) !== m.checksum) throw corrupt('manifest checksum mismatch');
      const want = JSON.parse(m.value) as { e: number; p: number; f: number };
      if (want.e !== counts.e || want.p !== counts.p || want.f !== counts.f)
        throw corrupt('rows are missing (incomplete store)');
    }
    return { table: { endpoints, proposals, floors }, raw };
  };

  const write = (next: EndpointTable, raw: ReadonlyMap<string, string>): void => {
    const row = (stmt: Database.Statement, kind: string, key: string, value: string) => {
      if (raw.get(`${kind}/${key}`) !== value) stmt.run(key, value, sum(value));
    };
    for (const [k, e] of next.endpoints) row(putEndpoint, 'endpoint', k, endpointValue(e));
    for (const [k, p] of next.proposals) row(putProposal, 'proposal', k, proposalValue(p));
    for (const [k, f] of next.floors) row(putFloor, 'floor', k, JSON.stringify({ floor: f.toString() }));
    const manifest = JSON.stringify({ e: next.endpoints.size, p: next.proposals.size, f: next.floors.size });
    putManifest.run(manifest, sum(manifest));
  };

  return {
    db,
    transact: (label, step) => {
      const out = guard(() =>
        db
          .transaction(() => {
            const { table, raw } = load();
            const r = step(table);
            if (r.table !== table) write(r.table, raw);
            return r.out;
          })
          .immediate(),
      );
      options.afterCommit?.(label);
      return out;
    },
    read: () => guard(() => db.transaction(() => load().table).deferred()),
    close: () => db.close(),
  };
};

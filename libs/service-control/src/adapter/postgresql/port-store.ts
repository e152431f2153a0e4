// B's P rows on PostgreSQL: the allocation record per service (one jsonb value: round, seq, current proposal,
// candidate_index, tried_ports, state, termination floor, confirmed P, served retry requests) and the port table keyed
// by (publisher, P). Runs inside the authority store's fenced transaction (same client, lock order authority row →
// runtime → scope rows → the publisher's advisory port lock → these rows). Rows are never deleted except a released
// pure reservation; tombstones and termination floors stay forever.
import type { PortTx } from '../../application/port-store.js';
import { fromHex, toHex } from '../../domain/bytes.js';
import { scError } from '../../domain/errors.js';
import type { ServiceRef } from '../../domain/ids.js';
import type {
  Allocation,
  AllocationState,
  PortDemand,
  PortEntry,
  PortEntryKind,
  PortTable,
} from '../../domain/port-allocation.js';
import { endpointKey } from '../../domain/port-endpoint.js';
import { type TxConnection, lit } from './batch.js';

const S = 'service_control';

/** Appended to the authority store's numbered migrations. */
export const PORT_MIGRATIONS: readonly string[] = [
  `CREATE TABLE ${S}.port_allocation (service_id bytea PRIMARY KEY, publisher bytea NOT NULL, value jsonb NOT NULL);
   CREATE TABLE ${S}.port_entry (publisher bytea NOT NULL, port integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
     kind text NOT NULL CHECK (kind IN ('reserved', 'owned', 'tombstoned')), nsd_id bytea NOT NULL, network_id bytea NOT NULL,
     service_id bytea NOT NULL, PRIMARY KEY (publisher, port));`,
];

const b = (v: unknown): Uint8Array => new Uint8Array(v as Buffer);

const refOut = (r: ServiceRef) => [toHex(r.nsdId), toHex(r.networkId), toHex(r.serviceId)];
const refIn = (v: unknown): ServiceRef => {
  const [n, w, s] = v as [string, string, string];
  return { nsdId: fromHex(n), networkId: fromHex(w), serviceId: fromHex(s) };
};

const STATES: readonly AllocationState[] = [
  'idle',
  'offered',
  'claimed',
  'ready',
  'released-pure',
  'recovery-required',
  'exhausted',
  'pool-exhausted',
  'tombstoned',
];

const demandOut = (d: PortDemand) => ({
  mode: d.mode,
  req: d.requestedPort === null ? null : d.requestedPort.toString(),
  backend: d.backendPort.toString(),
});
const flagIn = (v: unknown): boolean => {
  if (v === undefined || v === false) return false;
  if (v === true) return true;
  throw new Error('cancelling');
};
const demandIn = (v: unknown): PortDemand => {
  const d = v as Record<string, unknown>;
  if (d['mode'] !== 'fixed' && d['mode'] !== 'auto') throw new Error('pending mode');
  return {
    mode: d['mode'],
    requestedPort: d['req'] === null ? null : BigInt(d['req'] as string),
    backendPort: BigInt(d['backend'] as string),
  };
};

export const allocationToJson = (a: Allocation): unknown => ({
  ref: refOut(a.serviceRef),
  pub: toHex(a.publisher),
  lrev: a.listenerRevision.toString(),
  round: a.round.toString(),
  seq: a.proposalSeq.toString(),
  cur:
    a.current === null
      ? null
      : {
          ref: refOut(a.current.serviceRef),
          lrev: a.current.listenerRevision.toString(),
          digest: toHex(a.current.intentDigest),
          round: a.current.allocationRound.toString(),
          seq: a.current.proposalSeq.toString(),
          id: toHex(a.current.proposalId),
          port: a.current.port.toString(),
          idx: a.current.candidateIndex,
        },
  idx: a.candidateIndex,
  tried: a.triedPorts.map(String),
  state: a.state,
  floor: a.terminationFloor.toString(),
  confirmed: a.confirmedPort === null ? null : a.confirmedPort.toString(),
  exposed: a.exposed,
  retries: [...a.retries].map(([k, v]) => [k, v.round.toString(), v.proposalSeq.toString()]),
  // decision 0190; rows written before it have neither key (= no pending change, no cancel sent)
  pending: a.pending === null ? null : demandOut(a.pending),
  cancelling: a.cancelling,
  // rows written before it have no key (= no next candidate due)
  next: a.awaitingNext,
});

export const allocationFromJson = (j: unknown): Allocation => {
  try {
    const v = j as Record<string, unknown>;
    const c = v['cur'] as Record<string, unknown> | null;
    const state = v['state'] as AllocationState;
    if (!STATES.includes(state)) throw new Error('state');
    const idx = v['idx'] as number;
    if (!Number.isInteger(idx) || idx < 0 || idx > 8) throw new Error('candidate_index');
    return {
      serviceRef: refIn(v['ref']),
      publisher: fromHex(v['pub'] as string),
      listenerRevision: BigInt(v['lrev'] as string),
      round: BigInt(v['round'] as string),
      proposalSeq: BigInt(v['seq'] as string),
      current:
        c === null
          ? null
          : {
              serviceRef: refIn(c['ref']),
              listenerRevision: BigInt(c['lrev'] as string),
              intentDigest: fromHex(c['digest'] as string),
              allocationRound: BigInt(c['round'] as string),
              proposalSeq: BigInt(c['seq'] as string),
              proposalId: fromHex(c['id'] as string),
              port: BigInt(c['port'] as string),
              candidateIndex: c['idx'] as number,
            },
      candidateIndex: idx,
      triedPorts: (v['tried'] as string[]).map(BigInt),
      state,
      terminationFloor: BigInt(v['floor'] as string),
      confirmedPort: v['confirmed'] === null ? null : BigInt(v['confirmed'] as string),
      exposed: v['exposed'] === true,
      retries: new Map(
        (v['retries'] as [string, string, string][]).map(([k, r, s]) => [
          k,
          { round: BigInt(r), proposalSeq: BigInt(s) },
        ]),
      ),
      pending: v['pending'] === undefined || v['pending'] === null ? null : demandIn(v['pending']),
      cancelling: flagIn(v['cancelling']),
      awaitingNext: flagIn(v['next']),
    };
  } catch (e) {
    throw scError(
      'state-inconsistent',
      `port allocation row is corrupt (${e instanceof Error ? e.message : String(e)})`,
    );
  }
};

/**
 * What a port table change writes: the entries that are new or changed (kind or service), and the ports of released
 * pure reservations — any other entry that disappears is `state-inconsistent` (thrown, as the transaction's failure).
 */
export const portWrites = (
  before: PortTable,
  after: PortTable,
): { readonly upserts: readonly PortEntry[]; readonly released: readonly bigint[] } => {
  const upserts: PortEntry[] = [];
  const released: bigint[] = [];
  for (const [k, e] of after) {
    const old = before.get(k);
    if (old !== undefined && old.kind === e.kind && toHex(old.serviceRef.serviceId) === toHex(e.serviceRef.serviceId))
      continue;
    upserts.push(e);
  }
  for (const [k, e] of before)
    if (!after.has(k)) {
      if (e.kind !== 'reserved') throw scError('state-inconsistent', 'only a pure reservation is ever released');
      released.push(e.port);
    }
  return { upserts, released };
};

// Reads are queued statements and writes ride with the next round trip or the COMMIT (batch.ts, decision 0130): the
// port lock and the table read share one round trip, the table and allocation writes go with the COMMIT.
/**
 * The publisher's own allocation row of a service of the Network, locked (decision 0370): the keyed statement of a
 * ready/refresh, and the last lock `refresh_fast` takes (refresh-fast.ts). Arguments are SQL expressions.
 */
export const ownAllocationSql = (serviceId: string, publisher: string, networkId: string): string =>
  `SELECT a.value FROM ${S}.port_allocation a WHERE a.service_id = ${serviceId} AND a.publisher = ${publisher}
         AND EXISTS (SELECT 1 FROM ${S}.service s WHERE s.service_id = a.service_id AND s.publisher = a.publisher AND s.network_id = ${networkId})
       FOR UPDATE OF a`;

export const portTx = (c: Pick<TxConnection, 'statement' | 'write'>): PortTx => ({
  lockPorts: async (publisher) => {
    const pub = lit.bytea(publisher);
    const [, rows] = await Promise.all([
      c.statement(
        `SELECT pg_advisory_xact_lock(hashtextextended('${S}.port:' || encode(${pub}, 'hex'), 0))`,
        () => undefined,
      ),
      c.statement(
        `SELECT port, kind, nsd_id, network_id, service_id FROM ${S}.port_entry WHERE publisher = ${pub}`,
        (r) => r.rows as Record<string, unknown>[],
      ),
    ]);
    const table = new Map<
      string,
      { publisher: Uint8Array; port: bigint; kind: PortEntryKind; serviceRef: ServiceRef }
    >();
    for (const row of rows) {
      const port = BigInt(row['port'] as number);
      table.set(endpointKey(publisher, port), {
        publisher,
        port,
        kind: row['kind'] as PortEntryKind,
        serviceRef: { nsdId: b(row['nsd_id']), networkId: b(row['network_id']), serviceId: b(row['service_id']) },
      });
    }
    return table;
  },
  savePorts: async (publisher, before: PortTable, after: PortTable) => {
    const { upserts, released } = portWrites(before, after);
    for (const e of upserts)
      c.write(
        `INSERT INTO ${S}.port_entry VALUES (${lit.bytea(publisher)}, ${lit.num(e.port)}, ${lit.text(e.kind)}, ${lit.bytea(e.serviceRef.nsdId)},
           ${lit.bytea(e.serviceRef.networkId)}, ${lit.bytea(e.serviceRef.serviceId)})
         ON CONFLICT (publisher, port) DO UPDATE SET kind = excluded.kind, nsd_id = excluded.nsd_id, network_id = excluded.network_id,
           service_id = excluded.service_id`,
      );
    for (const port of released)
      c.write(
        `DELETE FROM ${S}.port_entry WHERE publisher = ${lit.bytea(publisher)} AND port = ${lit.num(port)} AND kind = 'reserved'`,
      );
  },
  // a queued statement: the ready/refresh path reads it in the same round trip as the fence (decision 0130)
  // the allocation rows are locked in one global order (service id) within a round trip (decision 0370)
  lockAllocation: (serviceId) =>
    c.statement(
      `SELECT value FROM ${S}.port_allocation WHERE service_id = ${lit.bytea(serviceId)} FOR UPDATE`,
      (r) => (r.rows[0] === undefined ? null : allocationFromJson(r.rows[0]['value'])),
      toHex(serviceId),
    ),
  lockOwnAllocation: (serviceId, publisher, networkId) =>
    c.statement(
      ownAllocationSql(lit.bytea(serviceId), lit.bytea(publisher), lit.bytea(networkId)),
      (r) => (r.rows[0] === undefined ? null : allocationFromJson(r.rows[0]['value'])),
      toHex(serviceId),
    ),
  lockNetworkAllocation: (serviceId, networkId) =>
    c.statement(
      `SELECT a.value FROM ${S}.port_allocation a WHERE a.service_id = ${lit.bytea(serviceId)}
         AND EXISTS (SELECT 1 FROM ${S}.service s WHERE s.service_id = a.service_id AND s.network_id = ${lit.bytea(networkId)})
       FOR UPDATE OF a`,
      (r) => (r.rows[0] === undefined ? null : allocationFromJson(r.rows[0]['value'])),
      toHex(serviceId),
    ),
  // the production's allocation rows with its other reads (decision 0590), WITHOUT a row lock (decision 0630): the
  // production's REPEATABLE READ snapshot is its consistency (0162), and a writer that commits after that snapshot
  // queues the production that publishes its change — so a production neither waits for nor blocks a replace
  activeAllocations: (networkId) =>
    c.statement(
      `SELECT encode(a.service_id, 'hex') AS id, a.value FROM ${S}.port_allocation a
       WHERE a.service_id IN (SELECT s.service_id FROM ${S}.service s WHERE s.network_id = ${lit.bytea(networkId)} AND s.state = 'active')`,
      (r) => new Map(r.rows.map((row) => [row['id'] as string, allocationFromJson(row['value'])])),
    ),
  saveAllocation: async (a) =>
    c.write(
      `INSERT INTO ${S}.port_allocation VALUES (${lit.bytea(a.serviceRef.serviceId)}, ${lit.bytea(a.publisher)}, ${lit.json(allocationToJson(a))})
       ON CONFLICT (service_id) DO UPDATE SET value = excluded.value`,
    ),
  awaitingNextCandidate: () =>
    c.statement(
      `SELECT value FROM ${S}.port_allocation WHERE value->>'state' = 'released-pure' AND value->'next' = 'true'::jsonb`,
      (r) => r.rows.map((row) => allocationFromJson(row['value'])),
    ),
});

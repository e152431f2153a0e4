// B's P rows on PostgreSQL: the allocation record per service (one jsonb value: round, seq, current proposal,
// candidate_index, tried_ports, state, termination floor, confirmed P, served retry requests) and the port table keyed
// by (publisher, P). Runs inside the authority store's fenced transaction (same client, lock order authority row →
// runtime → scope rows → the publisher's advisory port lock → these rows). Rows are never deleted except a released
// pure reservation; tombstones and termination floors stay forever.
import type { PortTx } from '../../application/port-store.js';
import { fromHex, toHex } from '../../domain/bytes.js';
import { scError } from '../../domain/errors.js';
import type { ServiceRef } from '../../domain/ids.js';
import type { Allocation, AllocationState, PortEntryKind, PortTable } from '../../domain/port-allocation.js';
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

export interface PortQuery {
  readonly query: (text: string, values?: unknown[]) => Promise<{ readonly rows: Record<string, unknown>[] }>;
}

const buf = (v: Uint8Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);
const b = (v: unknown): Uint8Array => new Uint8Array(v as Buffer);

const refOut = (r: ServiceRef) => [toHex(r.nsdId), toHex(r.networkId), toHex(r.serviceId)];
const refIn = (v: unknown): ServiceRef => {
  const [n, w, s] = v as [string, string, string];
  return { nsdId: fromHex(n), networkId: fromHex(w), serviceId: fromHex(s) };
};

const STATES: readonly AllocationState[] = ['idle', 'offered', 'claimed', 'ready', 'released-pure', 'recovery-required', 'exhausted', 'pool-exhausted'];

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
      retries: new Map((v['retries'] as [string, string, string][]).map(([k, r, s]) => [k, { round: BigInt(r), proposalSeq: BigInt(s) }])),
    };
  } catch (e) {
    throw scError('state-inconsistent', `port allocation row is corrupt (${e instanceof Error ? e.message : String(e)})`);
  }
};

export const portTx = (c: PortQuery & Pick<TxConnection, 'statement'>): PortTx => ({
  lockPorts: async (publisher) => {
    await c.query(`SELECT pg_advisory_xact_lock(hashtextextended('${S}.port:' || encode($1::bytea, 'hex'), 0))`, [buf(publisher)]);
    const r = await c.query(`SELECT port, kind, nsd_id, network_id, service_id FROM ${S}.port_entry WHERE publisher = $1`, [buf(publisher)]);
    const table = new Map<string, { publisher: Uint8Array; port: bigint; kind: PortEntryKind; serviceRef: ServiceRef }>();
    for (const row of r.rows) {
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
    for (const [k, e] of after) {
      const old = before.get(k);
      if (old !== undefined && old.kind === e.kind && toHex(old.serviceRef.serviceId) === toHex(e.serviceRef.serviceId)) continue;
      await c.query(
        `INSERT INTO ${S}.port_entry VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (publisher, port)
         DO UPDATE SET kind = $3, nsd_id = $4, network_id = $5, service_id = $6`,
        [buf(publisher), Number(e.port), e.kind, buf(e.serviceRef.nsdId), buf(e.serviceRef.networkId), buf(e.serviceRef.serviceId)],
      );
    }
    for (const [k, e] of before)
      if (!after.has(k)) {
        if (e.kind !== 'reserved') throw scError('state-inconsistent', 'only a pure reservation is ever released');
        await c.query(`DELETE FROM ${S}.port_entry WHERE publisher = $1 AND port = $2 AND kind = 'reserved'`, [buf(publisher), Number(e.port)]);
      }
  },
  // a queued statement: the ready/refresh path reads it in the same round trip as the fence (decision 0130)
  lockAllocation: (serviceId) =>
    c.statement(`SELECT value FROM ${S}.port_allocation WHERE service_id = ${lit.bytea(serviceId)} FOR UPDATE`, (r) =>
      r.rows[0] === undefined ? null : allocationFromJson(r.rows[0]['value']),
    ),
  saveAllocation: async (a) => {
    await c.query(
      `INSERT INTO ${S}.port_allocation VALUES ($1, $2, $3::jsonb) ON CONFLICT (service_id) DO UPDATE SET value = $3::jsonb`,
      [buf(a.serviceRef.serviceId), buf(a.publisher), JSON.stringify(allocationToJson(a))],
    );
  },
});

// B's service rows for one scope (seed §2.1): stable ServiceRef across display-name changes, a new Service ULID when
// the declaration key changes or a declaration is deleted and recreated, withdrawn rows kept as history and their
// P tombstoned so that no other service of the publisher identity ever gets it automatically (M6-19).
import type { Bytes } from './bytes.js';
import type { Declaration } from './declaration.js';

export interface ServiceRow {
  readonly serviceId: Bytes;
  readonly declarationKey: string;
  readonly declaration: Declaration;
  readonly state: 'active' | 'withdrawn';
  /** The confirmed P, if one was allocated (allocation itself is issue II). */
  readonly port: bigint | null;
}

export interface ReportApplication {
  readonly rows: readonly ServiceRow[];
  readonly created: readonly ServiceRow[];
  readonly updated: readonly ServiceRow[];
  readonly withdrawn: readonly ServiceRow[];
  /** Ports of withdrawn services: tombstoned for the publisher identity, never reused by another service. */
  readonly tombstonedPorts: readonly bigint[];
}

/** A Service ULID: 48-bit milliseconds + 80 random bits ([D] layout), 16 bytes. */
export const ulid = (nowMs: number, random80: Bytes): Bytes => {
  if (random80.length !== 10) throw new RangeError('ULID needs 10 random bytes');
  if (!Number.isSafeInteger(nowMs) || nowMs < 0 || nowMs >= 2 ** 48) throw new RangeError('ULID time out of range');
  const out = new Uint8Array(16);
  let t = BigInt(nowMs);
  for (let i = 5; i >= 0; i--) {
    out[i] = Number(t & 0xffn);
    t >>= 8n;
  }
  out.set(random80, 6);
  return out;
};

/**
 * Apply an accepted full report to the scope's service rows. `declarations` is the complete new set (an empty list
 * withdraws everything; a missing report never reaches this function). `newServiceId` is called once per created row.
 */
export const applyReport = (
  rows: readonly ServiceRow[],
  declarations: readonly Declaration[],
  newServiceId: () => Bytes,
): ReportApplication => {
  const active = new Map(rows.filter((r) => r.state === 'active').map((r) => [r.declarationKey, r]));
  const wanted = new Set(declarations.map((d) => d.declarationKey));
  const created: ServiceRow[] = [];
  const updated: ServiceRow[] = [];
  const withdrawn: ServiceRow[] = [];
  const out: ServiceRow[] = [];
  for (const r of rows) {
    if (r.state === 'active' && !wanted.has(r.declarationKey)) {
      const w = { ...r, state: 'withdrawn' as const };
      withdrawn.push(w);
      out.push(w);
    } else if (r.state === 'withdrawn') out.push(r);
  }
  for (const d of declarations) {
    const prev = active.get(d.declarationKey);
    if (prev !== undefined) {
      const u = { ...prev, declaration: d };
      updated.push(u);
      out.push(u);
    } else {
      const c: ServiceRow = {
        serviceId: newServiceId(),
        declarationKey: d.declarationKey,
        declaration: d,
        state: 'active',
        port: null,
      };
      created.push(c);
      out.push(c);
    }
  }
  const tombstonedPorts = withdrawn.flatMap((w) => (w.port === null ? [] : [w.port]));
  return { rows: out, created, updated, withdrawn, tombstonedPorts };
};

// Decision 0700: report.replace's `replace_write` runs no statement over an empty argument array (the allocation and
// port table upserts, the release delete, the service upsert of an empty report) and tests a withdrawal by jsonb
// containment; `prune_below_floor` reads the floor's three values in one statement. Both must leave exactly the rows
// of their former texts: two databases migrated alike, one with the former functions put back, get the same calls —
// services changed, withdrawn (with unreachable lease rows to prune) and none; allocations and port entries written,
// then none; a reservation released; snapshot revisions past the window with ACKs of an older and a newer session —
// and every table the functions write must hold the same rows on both after each call.
import { useDatabase } from '@homelab/testbed/vitest';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PG_SCHEMA as S,
  makePgAuthorityStore,
  replaceWriteFunction,
} from '../src/adapter/postgresql/authority-store.js';
import { REVISION_FLOOR_MIGRATIONS } from '../src/adapter/postgresql/revision-floor.js';
import { RETAINED_REVISION_WINDOW } from '../src/domain/snapshot.js';
import { toHex } from '../src/domain/bytes.js';
import { rid16 } from './wire.js';

const current = useDatabase('rw_skip_new');
const former = useDatabase('rw_skip_old');
const clients: pg.Client[] = [];

const P = rid16();
const NET = rid16();
const NSD = rid16();
const [A, B, C] = [rid16(), rid16(), rid16()];
const hex = (b: Uint8Array) => toHex(b);
const W = Number(RETAINED_REVISION_WINDOW);

beforeAll(async () => {
  for (const db of [current, former]) {
    const store = makePgAuthorityStore(db.config);
    await store.migrate();
    await store.close();
    const c = new pg.Client(db.config);
    await c.connect();
    clients.push(c);
  }
  // the texts before decision 0700
  await clients[1]!.query(replaceWriteFunction('CREATE OR REPLACE'));
  await clients[1]!.query(REVISION_FLOOR_MIGRATIONS[0]!.replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION'));
});
afterAll(async () => {
  for (const c of clients) await c.end();
});

/** Every row of the tables the two functions write, in a fixed order, per database (not the outbox's creation time). */
const TABLES = [
  'service',
  'port_allocation',
  'port_entry',
  'report',
  'outbox',
  'snapshot_history',
  'ack',
  'lease_snapshot_stamp',
  'lease_grant',
  'lease_mark',
];
const rows = async (c: pg.Client) => {
  const out: Record<string, unknown[]> = {};
  for (const t of TABLES)
    out[t] = (await c.query(`SELECT (to_jsonb(x) - 'created_at')::text AS r FROM ${S}.${t} x ORDER BY 1`)).rows.map(
      (r) => r.r,
    );
  return out;
};
/** The same SQL on both databases; then both hold the same rows (and something was written). */
const onBoth = async (sql: string, values: unknown[] = []) => {
  for (const c of clients) await c.query(sql, values);
  const [a, b] = [await rows(clients[0]!), await rows(clients[1]!)];
  expect(a).toEqual(b);
  return a;
};

const svc = (id: Uint8Array, state: string, port: number | null, d: string) => ({
  id: hex(id),
  key: `k${hex(id).slice(0, 4)}`,
  decl: Buffer.from(d).toString('hex'),
  state,
  port,
  lrev: '1',
});
const alloc = (id: Uint8Array, port: number) => ({ id: hex(id), pub: hex(P), value: { port, mode: 'fixed' } });
const entry = (port: number, kind: string, id: Uint8Array) => ({
  port,
  kind,
  nsd: hex(NSD),
  net: hex(NET),
  svc: hex(id),
});
let rev = 0;
const write = (services: unknown[], allocations: unknown[], ports: unknown[], released: string[], prune = true) =>
  onBoth(`SELECT ${S}.replace_write($1, $2, $3, $4, $5, $6, $7, $8, 'report', $9)`, [
    Buffer.from(P),
    Buffer.from(NET),
    JSON.stringify(services),
    JSON.stringify(allocations),
    JSON.stringify(ports),
    JSON.stringify(released),
    String(++rev),
    Buffer.alloc(32, rev),
    prune,
  ]);

describe('replace_write without the statements over empty arguments (decision 0700)', () => {
  it('writes the same service, allocation, port, report and outbox rows as its former text', async () => {
    let r = await write(
      [svc(A, 'active', 80, 'a1'), svc(B, 'active', 81, 'b1'), svc(C, 'active', null, 'c1')],
      [alloc(A, 80), alloc(B, 81)],
      [entry(80, 'owned', A), entry(81, 'owned', B), entry(82, 'reserved', C), entry(83, 'reserved', C)],
      [],
    );
    expect([r['service']!.length, r['port_allocation']!.length, r['port_entry']!.length]).toEqual([3, 2, 4]);
    // only a changed declaration: every other argument empty
    r = await write([svc(A, 'active', 80, 'a2')], [], [], []);
    expect(r['service']!.some((x) => String(x).includes(Buffer.from('a2').toString('hex')))).toBe(true);
    // an empty report: no service row, only the report and outbox rows
    r = await write([], [], [], []);
    expect(r['outbox']!.length).toBe(3);
    // a reservation released, nothing else
    r = await write([], [], [], ['82']);
    expect(r['port_entry']!.length).toBe(3);
    // an allocation changed, no service row
    await write([], [alloc(B, 84)], [entry(84, 'owned', B)], ['83']);
  });

  it('prunes the unreachable lease rows of a withdrawn service as its former text, and keeps them without prune', async () => {
    const leaseRows = async () =>
      onBoth(`INSERT INTO ${S}.lease_mark VALUES ($1, $2, $3, 1, $4, 1, $5, $6) ON CONFLICT DO NOTHING`, [
        Buffer.from(P),
        Buffer.from(NET),
        Buffer.from(B),
        Buffer.from(rid16()),
        Buffer.from(rid16()),
        Buffer.alloc(32),
      ]);
    let r = await leaseRows();
    expect(r['lease_mark']!.length).toBe(1);
    // withdrawn without prune: the lease rows stay
    r = await write([svc(B, 'withdrawn', 84, 'b2')], [], [], [], false);
    expect(r['lease_mark']!.length).toBe(1);
    // withdrawn again with prune: the mark no grant backs goes
    r = await write([svc(B, 'withdrawn', 84, 'b3')], [], [], []);
    expect(r['lease_mark']!.length).toBe(0);
    // active again: nothing pruned
    await leaseRows();
    r = await write([svc(B, 'active', 84, 'b4')], [], [], []);
    expect(r['lease_mark']!.length).toBe(1);
  });
});

describe('prune_below_floor with its reads in one statement (decision 0700)', () => {
  const T = Buffer.from(P);
  const N = Buffer.from(NET);
  const prune = () => onBoth(`SELECT ${S}.prune_below_floor($1, $2, $3)`, [T, N, String(W)]);
  const sql = async (q: string, v: unknown[]) => {
    for (const c of clients) await c.query(q, v);
  };
  const produce = async (revision: number) => {
    const d = Buffer.alloc(32, revision % 256);
    await sql(
      `INSERT INTO ${S}.snapshot VALUES ($1, $2, $3, $4, $4, $4) ON CONFLICT (target, network_id) DO UPDATE SET revision = excluded.revision`,
      [T, N, String(revision), d],
    );
    await sql(`INSERT INTO ${S}.snapshot_history VALUES ($1, $2, $3, $4)`, [T, N, String(revision), d]);
    await sql(`INSERT INTO ${S}.lease_snapshot_stamp VALUES ($1, $2, $3, $4, $5, 1, $4)`, [
      T,
      N,
      String(revision),
      d,
      Buffer.from(A),
    ]);
  };
  const ack = (seq: number, revision: number, enforced: boolean) =>
    sql(`INSERT INTO ${S}.ack VALUES ($1, $2, $3, $4, $5, true, $6, true)`, [
      T,
      N,
      String(seq),
      String(revision),
      Buffer.alloc(32, revision % 256),
      enforced,
    ]);
  const session = (seq: number) =>
    sql(
      `INSERT INTO ${S}.session_mark VALUES ($1, $2, 1, $3, $4, $3, 1) ON CONFLICT (identity, network_id) DO UPDATE SET seq = excluded.seq`,
      [T, N, Buffer.from(rid16()), String(seq)],
    );

  it('deletes the same history, ACK and stamp rows as its former text', async () => {
    // nothing produced: nothing to do
    await prune();
    // revisions within the window, no session: nothing goes
    for (let v = 1; v <= W; v++) await produce(v);
    let r = await prune();
    expect(r['snapshot_history']!.length).toBe(W);
    // past the window without a session mark: history and stamps go, no ACK row is there
    for (let v = W + 1; v <= W + 3; v++) await produce(v);
    r = await prune();
    expect(r['snapshot_history']!.length).toBe(W);
    // a session whose enforced ACK of an old revision is kept, and ACKs of an older session that are not its own
    await session(2);
    await ack(1, W + 2, true);
    await ack(2, W + 3, true);
    await ack(2, W + 4, false);
    for (let v = W + 4; v <= 2 * W + 6; v++) await produce(v);
    r = await prune();
    expect(r['snapshot_history']!.map((x) => JSON.parse(String(x)).revision)).toContain(W + 3);
    expect(r['ack']!.length).toBe(2);
  });
});

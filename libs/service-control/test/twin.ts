// The pruning twin tests (decisions 0165, 0191, 0196): the same requests go to a pruning store and to its unpruned
// twin, and the answers must be equal. Grant ids are drawn at random on each side, so an answer is compared with the
// side's own grant ids replaced by the order they were first seen in.
import type { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, expect } from 'vitest';
import { type Message, decodeMessage } from '../src/api/message.js';
import { listenerIntentOf, setPolicySource } from '../src/application/authority-lease.js';
import type { PolicySource } from '../src/application/lease-store.js';
import type { StoredService } from '../src/application/service-row.js';
import type { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { type PgAuthorityStoreOptions, makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { toHex } from '../src/domain/bytes.js';
import type { Who } from './wire.js';
import { type TwinSide, addRequesters, takeOverSide } from './fixtures/twin-sides.js';

export type { TwinAuthoritySide, TwinSide } from './fixtures/twin-sides.js';

/** An error as its code, a lease.result as its items with comparable grant ids, anything else as its kind. */
export const comparableAnswer = (s: TwinSide, m: Message): unknown => {
  if (m.kind === 'error') return { error: (m.body as { error: string }).error };
  if (m.kind !== 'lease.result') return m.kind;
  return m.body.results.map((r) => {
    let grant: number | null = null;
    if (r.grant_id !== null) {
      const k = toHex(r.grant_id);
      if (!s.grants.has(k)) s.grants.set(k, s.grants.size);
      grant = s.grants.get(k) as number;
    }
    return { result: r.result, remaining_ms: r.remaining_ms, grant };
  });
};

/** Send the request `f` builds to the pruned side, then to the twin; the answers must be equal. Returns the answer. */
export const sendToBoth =
  <S extends TwinSide>(pruned: S, twin: S, answer: (s: S, m: Message) => unknown = comparableAnswer) =>
  async (f: (s: S) => Promise<Message>): Promise<unknown> => {
    const a = answer(pruned, await f(pruned));
    expect(answer(twin, await f(twin))).toEqual(a);
    return a;
  };

/** What `openTwinSide` fills in. */
export interface OpenableSide {
  readonly db: ReturnType<typeof useDatabase>;
  store: AuthorityStore;
  authority: Authority;
  nsdId: Uint8Array;
  readonly who: Map<string, Who>;
}

/**
 * Open one side: its store on its own database (`storeOptions`: the switch the twin turns off), the epoch takeover, an
 * Authority on the shared lease clock, and each of `identities` a member of `networkId` with its envelope fields
 * (generation 1, runtime id filled with its position + 1; no epoch until it binds).
 */
export const openTwinSide = async (
  s: OpenableSide,
  storeOptions: Omit<PgAuthorityStoreOptions, keyof ReturnType<typeof useDatabase>['config']>,
  leaseNow: () => number,
  networkId: Uint8Array,
  identities: readonly Uint8Array[],
): Promise<void> => {
  s.store = makePgAuthorityStore({ ...s.db.config, ...storeOptions });
  await s.store.migrate();
  await takeOverSide(s, leaseNow);
  await addRequesters(s, networkId, identities);
};

/** The decoded reply of this side's authority to `bytes` from `w`. */
export const replyOn = async (s: { readonly authority: Authority }, w: Who, bytes: Uint8Array): Promise<Message> => {
  const r = decodeMessage(await s.authority.handle(w.identity, bytes));
  if (Either.isLeft(r)) throw r.left;
  return r.right;
};

type StoredSide = { readonly store: AuthorityStore; readonly authority: Authority };

/** The service `publisher` publishes on `networkId`, as this side stores it. */
export const publishedService = async (
  s: StoredSide,
  networkId: Uint8Array,
  publisher: Uint8Array,
): Promise<StoredService> => {
  const r = await s.store.transact(s.authority.epoch, async (tx) => Either.right(await tx.services(networkId)));
  if (Either.isLeft(r)) throw r.left;
  return r.right.find((x) => Buffer.from(x.publisher).equals(Buffer.from(publisher))) as StoredService;
};

/**
 * P is the port table's job: set `publisher`'s port to 40000 directly and drop the report's own offer (a service
 * without an allocation record keeps the P check only, as in lease-pg.it.test.ts).
 */
export const pinPublisherPort = async (sql: ReturnType<typeof sqlOn>, publisher: Uint8Array): Promise<void> => {
  await sql(`UPDATE service_control.service SET port = 40000 WHERE publisher = $1`, [Buffer.from(publisher)]);
  await sql(`DELETE FROM service_control.port_allocation`);
  await sql(`DELETE FROM service_control.port_entry`);
};

/** `consumer` may use `publisher`'s service on `networkId` (tcp, no expiry). */
export const allowConsumer = async (
  s: StoredSide,
  networkId: Uint8Array,
  publisher: Uint8Array,
  consumer: Uint8Array,
): Promise<void> => {
  await setPolicySource(
    { store: s.store, epoch: s.authority.epoch },
    (await publishedService(s, networkId, publisher)).serviceId,
    {
      consumer,
      protocols: ['tcp'],
      expiry: null,
    },
  );
};

/**
 * The listener intent of `publisher`'s service on `networkId` from the policy sources this side stores — required to
 * be the intent of exactly the authorization the test expects (`expected`, e.g. the consumer on tcp): the sources are
 * in the intent's enforcement digest, so a consumer allowed with another protocol (or not at all) fails here instead
 * of leasing on an intent nobody checked.
 */
export const authorizedIntent = async (
  s: StoredSide & { readonly nsdId: Uint8Array },
  networkId: Uint8Array,
  publisher: Uint8Array,
  expected: readonly PolicySource[],
) => {
  const svc = await publishedService(s, networkId, publisher);
  const r = await s.store.transact(s.authority.epoch, async (tx) =>
    Either.right(await tx.lease.policySources(svc.serviceId)),
  );
  if (Either.isLeft(r)) throw r.left;
  const li = listenerIntentOf(s.nsdId, svc, r.right);
  if (li === null) throw new Error('no listener');
  expect(li.fields.enforcement_policy_digest).toEqual(
    listenerIntentOf(s.nsdId, svc, expected)?.fields.enforcement_policy_digest,
  );
  return li;
};

/** After the file: each side's authority finishes its work, then its store closes. */
export const closeSidesAfterAll = (sides: readonly StoredSide[]): void =>
  afterAll(async () => {
    for (const s of sides) {
      await s.authority.idle();
      await s.store.close();
    }
  });

// Test fixture of the lease tests that need a whole Network Ready on PostgreSQL (group-commit.it's acquire twin, the
// group-crash child): publishers bound with one tcp service each, its P set directly (no allocation record: the ready
// check compares P only, as in lease-pg), consumers authorized by the policy stand-in, every publisher's listener
// snapshot and every consumer's consumer-view snapshot written and ACKed in session 1. P allocation and production are
// other modules' work.
import { Either } from 'effect';
import { type Message, decodeMessage } from '../src/api/message.js';
import { listenerIntentOf, setPolicySource } from '../src/application/authority-lease.js';
import type { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import type { PolicySource } from '../src/application/lease-store.js';
import { type Who, decl, msg, replaceBody, subScope } from './wire.js';
import { readyBody, writeListenerSnapshot, writeListenersSnapshot } from './listener-snapshot.js';
import { productionsSettled } from './fixtures/productions.js';

type Sql = (q: string, values?: unknown[]) => Promise<unknown[]>;
type Intent = NonNullable<ReturnType<typeof listenerIntentOf>>;
type At = { readonly revision: bigint; readonly digest: Uint8Array };

export interface NetworkPublisher {
  readonly w: Who;
  readonly li: Intent;
  readonly at: At;
}
export interface NetworkConsumer {
  readonly w: Who;
  readonly at: At;
}

const kindOrError = (m: Message): string =>
  m.kind === 'error' ? `error:${(m.body as { error: string }).error}` : m.kind;

/** No vitest here: the group-crash child process uses this file too. */
const check = (ok: boolean, what: string): void => {
  if (!ok) throw new Error(`lease network set-up: ${what}`);
};

const ackBody = (w: Who, at: At) => ({
  scope: subScope(w),
  snapshot_revision: at.revision,
  snapshot_digest: at.digest,
  accepted: true,
  enforcement_applied: true,
  dns_applied: false,
  errors: [],
});

/**
 * Publishers `publishers` (each with one service `web`, P 40000 + its index, its offer dropped) and consumers `consumers` of one Network
 * (every one of them a member, `epoch` unset), bound and in session 1 with ACKed snapshots; consumer `k` is authorized
 * (tcp) for publisher `i`'s service when `authorized(i, k)`. Nothing is granted yet.
 */
export const openLeaseNetwork = async (
  side: { readonly store: AuthorityStore; readonly authority: Authority; readonly nsdId: Uint8Array },
  sql: Sql,
  publishers: readonly Who[],
  consumers: readonly Who[],
  authorized: (publisher: number, consumer: number) => boolean,
  options: {
    /**
     * Keep the allocation rows nsd's own offers left (the deadlock tests: the rows refreshes and acquires lock); the
     * ready check then also compares the proposal, which these requests do not name (their answers are refusals).
     */
    readonly keepAllocations?: boolean;
    /** P of the first publisher (the next ones count up); 40000. */
    readonly firstPort?: number;
  } = {},
): Promise<{ readonly publishers: NetworkPublisher[]; readonly consumers: NetworkConsumer[] }> => {
  const { store, authority, nsdId } = side;
  const ask = async (w: Who, bytes: Uint8Array, kind: string): Promise<void> => {
    const r = decodeMessage(await authority.handle(w.identity, bytes));
    if (Either.isLeft(r)) throw r.left;
    check(kindOrError(r.right) === kind, `${kindOrError(r.right)} instead of ${kind}`);
  };
  const join = async (w: Who): Promise<void> => {
    const bind = msg(w, 'runtime.bind', { mode: 'normal', floor_request_id: null, owner_recovery: false });
    await ask(w, bind, 'runtime.bind.result');
    w.epoch = authority.epoch;
    await ask(w, msg(w, 'session.open', {}, { session_seq: 1n }), 'session.open.result');
  };
  // each report's production committed before the next report: productions queued while one runs are coalesced
  // (authority-production.ts), so how many there are — and every member's snapshot revisions after them — would
  // otherwise depend on how fast each production ran (a twin's two sides then count different revisions)
  for (const w of publishers) {
    await join(w);
    await ask(w, msg(w, 'report.replace', replaceBody(w, 1n, [decl('web', 'Web')])), 'report.accepted');
    await productionsSettled(authority);
  }
  for (const [i, w] of publishers.entries())
    await sql(`UPDATE service_control.service SET port = $1 WHERE publisher = $2`, [
      (options.firstPort ?? 40000) + i,
      Buffer.from(w.identity),
    ]);
  if (options.keepAllocations !== true) {
    await sql(`DELETE FROM service_control.port_allocation`);
    await sql(`DELETE FROM service_control.port_entry`);
  }
  const ready: NetworkPublisher[] = [];
  for (const [i, w] of publishers.entries()) {
    const row = (
      (await sql(`SELECT * FROM service_control.service WHERE publisher = $1`, [Buffer.from(w.identity)])) as Record<
        string,
        unknown
      >[]
    )[0] as Record<string, unknown>;
    const serviceId = new Uint8Array(row['service_id'] as Buffer);
    const sources: PolicySource[] = consumers.flatMap((c, k) =>
      authorized(i, k) ? [{ consumer: c.identity, protocols: ['tcp'], expiry: null }] : [],
    );
    for (const source of sources)
      check(
        Either.isRight(await setPolicySource({ store, epoch: authority.epoch }, serviceId, source)),
        'policy source',
      );
    const li = listenerIntentOf(
      nsdId,
      {
        serviceId,
        publisher: w.identity,
        networkId: w.networkId,
        declarationKey: row['declaration_key'] as string,
        declaration: new Uint8Array(row['declaration'] as Buffer),
        state: 'active',
        port: BigInt(row['port'] as number),
        listenerRevision: BigInt(row['listener_revision'] as string),
      },
      sources,
    );
    if (li === null) throw new Error('no listener');
    const at = await writeListenerSnapshot(store, authority.epoch, w.identity, w.networkId, subScope(w), li, false);
    await ask(w, msg(w, 'snapshot.ack', ackBody(w, at), { session_seq: 1n }), 'snapshot.ack.result');
    ready.push({ w, li, at });
  }
  const acked: NetworkConsumer[] = [];
  for (const w of consumers) {
    await join(w);
    const lis = ready.map((p) => p.li);
    const at = await writeListenersSnapshot(store, authority.epoch, w.identity, w.networkId, subScope(w), lis, true);
    await ask(w, msg(w, 'snapshot.ack', ackBody(w, at), { session_seq: 1n }), 'snapshot.ack.result');
    acked.push({ w, at });
  }
  return { publishers: ready, consumers: acked };
};

/** listener.ready of publisher `p` (seq 1, session 1). */
export const readyRequest = (p: NetworkPublisher, seq = 1n, kind = 'listener.ready'): Uint8Array =>
  msg(p.w, kind, readyBody(p.li, p.at, seq), { session_seq: 1n });

/**
 * A consumer's lease.acquire (session 1) of the services of `publishers`, sorted by service id as the wire requires;
 * `order`: the index (in `publishers`) of each item in request order.
 */
export const acquireRequest = (
  c: NetworkConsumer,
  publishers: readonly NetworkPublisher[],
  seq: bigint,
  sessionSeq = 1n,
): { readonly bytes: Uint8Array; readonly order: readonly number[] } => {
  const order = publishers
    .map((_, i) => i)
    .sort((x, y) =>
      Buffer.compare(
        Buffer.from((publishers[x] as NetworkPublisher).li.fields.service_ref.service_id),
        Buffer.from((publishers[y] as NetworkPublisher).li.fields.service_ref.service_id),
      ),
    );
  const services = order.map((i) => {
    const li = (publishers[i] as NetworkPublisher).li;
    return {
      service_ref: li.fields.service_ref,
      publisher_identity: li.fields.publisher_identity,
      listener_revision: li.fields.listener_revision,
      intent_digest: li.intentDigest,
    };
  });
  const body = { consumer_seq: seq, snapshot_revision: c.at.revision, snapshot_digest: c.at.digest, services };
  return { bytes: msg(c.w, 'lease.acquire', body, { session_seq: sessionSeq }), order };
};

// The pruning twin tests (decisions 0165, 0191, 0196): the same requests go to a pruning store and to its unpruned
// twin, and the answers must be equal. Grant ids are drawn at random on each side, so an answer is compared with the
// side's own grant ids replaced by the order they were first seen in.
import type { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { expect } from 'vitest';
import type { Message } from '../src/api/message.js';
import type { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { toHex } from '../src/domain/bytes.js';
import type { Who } from './wire.js';

export interface TwinSide {
  /** grant_id (hex) → the order it was first seen in on this side */
  readonly grants: Map<string, number>;
}

/** One side of a twin test: its own database, store and authority, and the requesters as this side knows them. */
export interface TwinAuthoritySide<Name extends string> extends TwinSide {
  readonly name: Name;
  readonly db: ReturnType<typeof useDatabase>;
  readonly sql: ReturnType<typeof sqlOn>;
  store: AuthorityStore;
  authority: Authority;
  nsdId: Uint8Array;
  /** identity (hex) → the requester's envelope fields on this side */
  readonly who: Map<string, Who>;
}

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

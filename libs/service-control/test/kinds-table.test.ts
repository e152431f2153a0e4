// The one table of message kinds (domain/kinds.ts, decision 0530): the wire validator (MessageCodecs) and the
// Authority's handler table are typed by it, so a kind without a codec or a handler fails to compile (the
// `@ts-expect-error` lines below are checked by `nx run service-control:typecheck`, which covers test files), and at
// run time every kind the authority answers reaches its own handler through the dispatch lookup.
import { Either } from 'effect';
import { describe, expect, expectTypeOf, it, vi } from 'vitest';
import { type CodecTable, type Message, type MessageOf, MessageCodecs } from '../src/api/message.js';
import { Authority, type AuthorityHandlers } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import type { DaemonEventHandlers } from '../src/application/daemon.js';
import {
  ALL_KINDS,
  AUTHORITY_REQUEST_KINDS,
  type AuthorityRequestKind,
  DAEMON_REQUEST_KINDS,
  type DaemonRequestKind,
  KINDS,
  type Kind,
  acceptsNullEpoch,
  acceptsNullRuntime,
  isStreamBound,
} from '../src/domain/kinds.js';
import { id16 } from './helpers.js';

const reply = async () => Either.right(new Uint8Array());

describe('the kinds table at compile time', () => {
  it('a handler table without a to-authority kind, or with another kind, does not compile', () => {
    const full: AuthorityHandlers = {
      'runtime.floor': reply,
      'runtime.bind': reply,
      'session.open': reply,
      'report.head': reply,
      'report.replace': reply,
      'snapshot.ack': reply,
      'listener.ready': reply,
      'lease.refresh': reply,
      'lease.acquire': reply,
      'port.result': reply,
      'service.retry-port': reply,
    };
    const { 'lease.acquire': _dropped, ...missing } = full;
    // @ts-expect-error — 'lease.acquire' has no handler
    const incomplete: AuthorityHandlers = missing;
    // @ts-expect-error — 'snapshot.push' is a request B sends to A, not one the authority answers
    const extra: AuthorityHandlers = { ...full, 'snapshot.push': reply };
    expect(Object.keys(incomplete)).not.toContain('lease.acquire');
    expect(Object.keys(extra)).toContain('snapshot.push');
    expectTypeOf<AuthorityRequestKind>().toEqualTypeOf<keyof AuthorityHandlers>();
  });

  it("the daemon's event table without a to-daemon kind, or with another kind, does not compile", () => {
    const entry = { takes: () => true, handle: async () => undefined };
    const full: DaemonEventHandlers = { 'snapshot.push': entry, 'port.cancel': entry, 'port.query': entry };
    const { 'port.query': _dropped, ...missing } = full;
    // @ts-expect-error — 'port.query' has no handler
    const incomplete: DaemonEventHandlers = missing;
    // @ts-expect-error — 'lease.refresh' is a request A sends to B, not one B sends on the stream
    const extra: DaemonEventHandlers = { ...full, 'lease.refresh': entry };
    expect(Object.keys(incomplete)).not.toContain('port.query');
    expect(Object.keys(extra)).toContain('lease.refresh');
    expectTypeOf<DaemonRequestKind>().toEqualTypeOf<keyof DaemonEventHandlers>();
    expect([...DAEMON_REQUEST_KINDS].sort()).toEqual(['port.cancel', 'port.query', 'snapshot.push']);
  });

  it('a codec table without a kind does not compile; each codec carries its own kind', () => {
    const { error: _dropped, ...missing } = MessageCodecs;
    // @ts-expect-error — 'error' has no codec
    const incomplete: CodecTable = missing;
    expect(Object.keys(incomplete)).not.toContain('error');
    expectTypeOf<keyof typeof MessageCodecs>().toEqualTypeOf<Kind>();
    expectTypeOf<MessageOf<'lease.acquire'>['kind']>().toEqualTypeOf<'lease.acquire'>();
  });

  it("a codec's nullable envelope values are those of its kind's class in the table", () => {
    expectTypeOf<MessageOf<'runtime.floor'>['runtime_generation']>().toEqualTypeOf<bigint | null>();
    expectTypeOf<MessageOf<'runtime.floor'>['authority_epoch']>().toEqualTypeOf<bigint | null>();
    expectTypeOf<MessageOf<'runtime.bind'>['runtime_generation']>().toEqualTypeOf<bigint>();
    expectTypeOf<MessageOf<'runtime.bind'>['authority_epoch']>().toEqualTypeOf<bigint | null>();
    expectTypeOf<MessageOf<'error'>['runtime_id']>().toEqualTypeOf<Uint8Array | null>();
    expectTypeOf<MessageOf<'report.head'>['authority_epoch']>().toEqualTypeOf<bigint>();
    expectTypeOf<MessageOf<'lease.refresh'>['session_seq']>().toEqualTypeOf<bigint>();
    expectTypeOf<MessageOf<'report.head'>>().not.toHaveProperty('session_seq');
  });
});

describe('the kinds table at run time', () => {
  it('the codecs, the fence rules and the stream-bound list follow the table', () => {
    expect(Object.keys(MessageCodecs).sort()).toEqual([...ALL_KINDS].sort());
    for (const k of ALL_KINDS) {
      const fields = MessageCodecs[k].fields as Record<string, unknown>;
      expect('session_seq' in fields, k).toBe(KINDS[k].stream);
      expect(isStreamBound(k), k).toBe(KINDS[k].stream);
    }
    expect(ALL_KINDS.filter(acceptsNullEpoch).sort()).toEqual([
      'runtime.bind',
      'runtime.floor',
      'runtime.floor.result',
    ]);
    expect(ALL_KINDS.filter(acceptsNullRuntime).sort()).toEqual(['runtime.floor', 'runtime.floor.result']);
  });

  it("the authority's dispatch sends every to-authority kind to its handler and refuses every other kind", async () => {
    const nsdId = id16(1);
    const signer = new Uint8Array(32).fill(7);
    const authority = new Authority({ store: {} as AuthorityStore, nsdId, epoch: 1n, now: () => 0 });
    // which private method answers each kind (the handler table's targets)
    const method: Record<AuthorityRequestKind, string> = {
      'runtime.floor': 'floor',
      'runtime.bind': 'bind',
      'session.open': 'sessionOpen',
      'report.head': 'reportHead',
      'report.replace': 'reportReplace',
      'snapshot.ack': 'snapshotAck',
      'listener.ready': 'lease',
      'lease.refresh': 'lease',
      'lease.acquire': 'lease',
      'port.result': 'port',
      'service.retry-port': 'port',
    };
    const spies = new Map(
      [...new Set(Object.values(method))].map((name) => {
        const answer = new TextEncoder().encode(name);
        return [name, vi.spyOn(authority as never, name as never).mockResolvedValue(Either.right(answer) as never)];
      }),
    );
    const dispatch = (m: Partial<Message>) =>
      (
        authority as unknown as {
          dispatch: (s: Uint8Array, m: Message) => Promise<Either.Either<Uint8Array, { code: string }>>;
        }
      ).dispatch(signer, { subject_identity: signer, nsd_id: nsdId, network_id: id16(2), ...m } as Message);
    for (const k of ALL_KINDS) {
      const out = await dispatch({ kind: k } as Partial<Message>);
      if (KINDS[k].role === 'to-authority') {
        expect(Either.isRight(out), k).toBe(true);
        if (Either.isRight(out)) expect(new TextDecoder().decode(out.right), k).toBe(method[k as AuthorityRequestKind]);
      } else {
        expect(Either.isLeft(out) && out.left.code, k).toBe('unsupported-field');
      }
    }
    expect([...AUTHORITY_REQUEST_KINDS].sort()).toEqual(Object.keys(method).sort());
    for (const spy of spies.values()) expect(spy).toHaveBeenCalled();
    authority.closeStreams();
  });
});

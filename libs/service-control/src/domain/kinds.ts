// The message kinds of the catalogue (spec §3.3) and their fencing class (spec §3.2).

/**
 * Who sends a kind (spec §3.3): a request A sends to B (the authority answers it through its handler table), a
 * request B sends to A on config.stream, or a reply.
 */
export type KindRole = 'to-authority' | 'to-daemon' | 'reply';
/**
 * Which envelope values a kind may carry as null (spec §3.2): none (`strict`), the epoch (`bind`), all three
 * (`bootstrap`); `echo` is the `error` reply, which echoes whatever the refused request carried (its codec takes nulls)
 * and is fenced like a strict kind.
 */
export type KindEnvelope = 'strict' | 'bind' | 'bootstrap' | 'echo';
export interface KindSpec {
  readonly role: KindRole;
  readonly envelope: KindEnvelope;
  /** Stream-bound: carries `session_seq`, checked against the session fence (spec §3.2). */
  readonly stream: boolean;
}

/**
 * THE table of message kinds (issue 25, decision 0530): every other list derives from it. `MessageCodecs` (the wire
 * validator, api/message.ts) must have a codec for each key and the Authority's handler table one handler for each
 * `to-authority` key — a kind added here without them, or either of them naming a kind not here, fails to compile.
 */
export const KINDS = {
  'runtime.floor': { role: 'to-authority', envelope: 'bootstrap', stream: false },
  'runtime.floor.result': { role: 'reply', envelope: 'bootstrap', stream: false },
  'runtime.bind': { role: 'to-authority', envelope: 'bind', stream: false },
  'runtime.bind.result': { role: 'reply', envelope: 'strict', stream: false },
  'session.open': { role: 'to-authority', envelope: 'strict', stream: true },
  'session.open.result': { role: 'reply', envelope: 'strict', stream: true },
  'report.head': { role: 'to-authority', envelope: 'strict', stream: false },
  'report.replace': { role: 'to-authority', envelope: 'strict', stream: false },
  'report.accepted': { role: 'reply', envelope: 'strict', stream: false },
  'snapshot.push': { role: 'to-daemon', envelope: 'strict', stream: true },
  'snapshot.ack': { role: 'to-authority', envelope: 'strict', stream: true },
  'snapshot.ack.result': { role: 'reply', envelope: 'strict', stream: true },
  'listener.ready': { role: 'to-authority', envelope: 'strict', stream: true },
  'lease.refresh': { role: 'to-authority', envelope: 'strict', stream: true },
  'lease.acquire': { role: 'to-authority', envelope: 'strict', stream: true },
  'lease.result': { role: 'reply', envelope: 'strict', stream: true },
  'port.result': { role: 'to-authority', envelope: 'strict', stream: true },
  'port.result.result': { role: 'reply', envelope: 'strict', stream: true },
  'port.cancel': { role: 'to-daemon', envelope: 'strict', stream: true },
  'port.query': { role: 'to-daemon', envelope: 'strict', stream: true },
  'service.retry-port': { role: 'to-authority', envelope: 'strict', stream: false },
  'service.retry-port.result': { role: 'reply', envelope: 'strict', stream: false },
  error: { role: 'reply', envelope: 'echo', stream: false },
} as const satisfies Record<string, KindSpec>;

export type Kind = keyof typeof KINDS;
type KindsWhere<P extends Partial<KindSpec>> = {
  [K in Kind]: (typeof KINDS)[K] extends P ? K : never;
}[Kind];
/** The requests A sends to B: exactly the keys of the Authority's handler table. */
export type AuthorityRequestKind = KindsWhere<{ role: 'to-authority' }>;
/** The requests B sends to A on config.stream: exactly the keys of the Daemon's event table. */
export type DaemonRequestKind = KindsWhere<{ role: 'to-daemon' }>;
export type RequestKind = KindsWhere<{ role: 'to-authority' | 'to-daemon' }>;
export type ResponseKind = KindsWhere<{ role: 'reply' }>;

export const ALL_KINDS = Object.keys(KINDS) as readonly Kind[];
const where = (p: (s: KindSpec) => boolean): readonly Kind[] => ALL_KINDS.filter((k) => p(KINDS[k]));
export const REQUEST_KINDS = where((s) => s.role !== 'reply') as readonly RequestKind[];
export const RESPONSE_KINDS = where((s) => s.role === 'reply') as readonly ResponseKind[];
export const AUTHORITY_REQUEST_KINDS = where((s) => s.role === 'to-authority') as readonly AuthorityRequestKind[];
export const DAEMON_REQUEST_KINDS = where((s) => s.role === 'to-daemon') as readonly DaemonRequestKind[];

export const isKind = (k: string): k is Kind => Object.hasOwn(KINDS, k);

/** Only the bootstrap kinds accept `authority_epoch = null` (seed §1 "仅bootstrap消息 runtime.floor 与 runtime.bind"). */
export const acceptsNullEpoch = (k: Kind): boolean => {
  const e = KINDS[k].envelope;
  return e === 'bootstrap' || e === 'bind';
};

/** Only runtime.floor (and its reply) accept null runtime_generation / runtime_id. */
export const acceptsNullRuntime = (k: Kind): boolean => KINDS[k].envelope === 'bootstrap';

/**
 * Stream-bound kinds carry `session_seq` and are checked against the session fence (spec §3.2); [D] the B→A
 * `port.cancel`/`port.query` too. `session.open` establishes the session and always carries the field.
 */
export const STREAM_BOUND_KINDS: readonly Kind[] = where((s) => s.stream);

export const isStreamBound = (k: Kind): boolean => KINDS[k].stream;

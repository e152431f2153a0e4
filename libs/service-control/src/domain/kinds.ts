// The message kinds of the catalogue (spec §3.3) and their fencing class (spec §3.2).

export const REQUEST_KINDS = [
  'runtime.floor',
  'runtime.bind',
  'session.open',
  'report.head',
  'report.replace',
  'snapshot.push',
  'snapshot.ack',
  'snapshot.ack.result',
  'listener.ready',
  'lease.refresh',
  'lease.acquire',
  'port.result',
  'port.cancel',
  'port.query',
  'service.retry-port',
] as const;

export const RESPONSE_KINDS = [
  'runtime.floor.result',
  'runtime.bind.result',
  'session.open.result',
  'report.accepted',
  'snapshot.ack.result',
  'lease.result',
  'service.retry-port.result',
  'port.result.result',
  'error',
] as const;

export type RequestKind = (typeof REQUEST_KINDS)[number];
export type ResponseKind = (typeof RESPONSE_KINDS)[number];
export type Kind = RequestKind | ResponseKind;

export const ALL_KINDS: readonly Kind[] = [...REQUEST_KINDS, ...RESPONSE_KINDS];

export const isKind = (k: string): k is Kind => (ALL_KINDS as readonly string[]).includes(k);

/** Only the bootstrap kinds accept `authority_epoch = null` (seed §1 "仅bootstrap消息 runtime.floor 与 runtime.bind"). */
export const acceptsNullEpoch = (k: Kind): boolean =>
  k === 'runtime.floor' || k === 'runtime.bind' || k === 'runtime.floor.result';

/** Only runtime.floor accepts null runtime_generation / runtime_id. */
export const acceptsNullRuntime = (k: Kind): boolean => k === 'runtime.floor' || k === 'runtime.floor.result';

/**
 * Stream-bound kinds carry `session_seq` and are checked against the session fence (spec §3.2); [D] the B→A
 * `port.cancel`/`port.query` too. `session.open` establishes the session and always carries the field.
 */
export const STREAM_BOUND_KINDS: readonly Kind[] = [
  'session.open',
  'session.open.result',
  'snapshot.push',
  'snapshot.ack',
  'listener.ready',
  'lease.refresh',
  'lease.acquire',
  'lease.result',
  'port.result',
  'port.cancel',
  'port.query',
  'port.result.result',
];

export const isStreamBound = (k: Kind): boolean => STREAM_BOUND_KINDS.includes(k);

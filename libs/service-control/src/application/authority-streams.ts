// B's stream hub (split out of authority.ts, issue 25, decision 0475): the open config.streams indexed by their scope
// (identity, Network), the B→A events on them (snapshot.push, port.cancel, port.query) and closing them. Delivery
// looks up the target's streams instead of scanning every stream, and a delivered snapshot body is decoded once for
// all the streams it goes to (after a failover every daemon's stream opens at once: a scan per target and a decode
// per stream made delivery quadratic in the number of streams).
import { randomBytes } from 'node:crypto';
import { type Bytes, toHex } from '../domain/bytes.js';
import type { ProposalRef } from '../domain/port-endpoint.js';
import { type Message, encodeMessage } from '../api/message.js';
import type { streamBindingFromWire } from '../api/convert.js';
import { SnapshotPushBody, type SnapshotPushBodyWire } from '../api/snapshot.js';

/** A connected config.stream. `send` returns false when the stream is gone. */
export interface StreamSink {
  readonly send: (payload: Uint8Array) => boolean;
  readonly close: () => void;
}

/** One open, admitted config.stream: its signer, Network, persisted session tuple and sink. */
export interface OpenStream {
  readonly identity: Bytes;
  readonly networkId: Bytes;
  readonly binding: ReturnType<typeof streamBindingFromWire>;
  readonly sink: StreamSink;
}

export interface StreamHubDeps {
  readonly nsdId: Bytes;
  readonly epoch: bigint;
  /** After a snapshot was written to a stream (its proposals' windows start, committed cancels go out). */
  readonly pushed?: (s: OpenStream, snapshot: SnapshotPushBodyWire, cancels: readonly ProposalRef[]) => void;
  /** The snapshot body's decoder (tests count its calls); default the wire codec. */
  readonly decode?: (body: Uint8Array) => SnapshotPushBodyWire;
}

const scopeKey = (identity: Bytes, networkId: Bytes): string => `${toHex(identity)}/${toHex(networkId)}`;

export class StreamHub {
  /** Open streams by scopeKey(identity, Network): usually one, two while a daemon's new stream replaces its old one. */
  private readonly byScope = new Map<string, Set<OpenStream>>();
  private count = 0;
  /** snapshot.push events written (a `send` that found the stream gone is not counted). */
  delivered = 0;

  constructor(private readonly d: StreamHubDeps) {}

  get size(): number {
    return this.count;
  }

  add(s: OpenStream): void {
    const k = scopeKey(s.identity, s.networkId);
    let set = this.byScope.get(k);
    if (set === undefined) this.byScope.set(k, (set = new Set()));
    if (set.has(s)) return;
    set.add(s);
    this.count++;
  }

  /** Forget a stream (it ended); true when it was open. */
  remove(s: OpenStream): boolean {
    const k = scopeKey(s.identity, s.networkId);
    const set = this.byScope.get(k);
    if (set === undefined || !set.delete(s)) return false;
    this.count--;
    if (set.size === 0) this.byScope.delete(k);
    return true;
  }

  /** The open streams of (identity, Network), a copy (callers may close and remove while iterating). */
  of(identity: Bytes, networkId: Bytes): readonly OpenStream[] {
    const set = this.byScope.get(scopeKey(identity, networkId));
    return set === undefined ? [] : [...set];
  }

  /** A new session of the scope was committed: its streams of any other session stop receiving config at once. */
  closeOtherSessions(identity: Bytes, networkId: Bytes, sessionSeq: bigint): void {
    for (const s of this.of(identity, networkId))
      if (s.binding.sessionSeq !== sessionSeq) {
        s.sink.close();
        this.remove(s);
      }
  }

  /**
   * Push `target`'s snapshot of the Network to each of its open streams of that Network. The body is decoded once,
   * and only when a stream is open (the event's envelope names each stream's own session tuple, so the message is
   * encoded per stream). Returns the number of streams it was written to.
   */
  deliver(target: Bytes, networkId: Bytes, body: Uint8Array, cancels: readonly ProposalRef[]): number {
    const streams = this.of(target, networkId);
    if (streams.length === 0) return 0;
    const snapshot = this.d.decode === undefined ? SnapshotPushBody.decodeOrThrow(body) : this.d.decode(body);
    let written = 0;
    for (const s of streams) {
      if (s.sink.send(this.streamMessage(s, 'snapshot.push', new Uint8Array(randomBytes(16)), snapshot))) {
        written++;
        this.delivered++;
      }
      // after the snapshot: its offered proposals start their windows, committed cancels are sent (decisions 0171, 0190)
      this.d.pushed?.(s, snapshot, cancels);
    }
    return written;
  }

  /** A B→A `port.cancel`/`port.query` on the target's open stream(s) of that Network (decision 0170); false if none. */
  send(
    identity: Bytes,
    networkId: Bytes,
    kind: 'port.cancel' | 'port.query',
    body: unknown,
    requestId: Bytes,
  ): boolean {
    const streams = this.of(identity, networkId);
    for (const s of streams) s.sink.send(this.streamMessage(s, kind, requestId, body));
    return streams.length > 0;
  }

  /** Close every stream (shutdown, authority lost). */
  closeAll(): void {
    for (const set of this.byScope.values()) for (const s of set) s.sink.close();
    this.byScope.clear();
    this.count = 0;
  }

  /** A B→A event on one stream: the envelope names exactly the stream's persisted session tuple (M6-13). */
  private streamMessage(
    s: OpenStream,
    kind: 'snapshot.push' | 'port.cancel' | 'port.query',
    requestId: Bytes,
    body: unknown,
  ): Uint8Array {
    return encodeMessage({
      schema: 1,
      kind,
      nsd_id: this.d.nsdId,
      network_id: s.networkId,
      subject_identity: s.identity,
      runtime_generation: s.binding.runtimeGeneration,
      runtime_id: s.binding.runtimeId,
      authority_epoch: this.d.epoch,
      request_id: requestId,
      session_seq: s.binding.sessionSeq,
      body,
    } as unknown as Message);
  }
}

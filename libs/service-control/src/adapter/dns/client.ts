// The client side of the same wire format, for tests and tools that ask the listener (no resolver library): build
// one query, read one reply. Pure. `decodeReply` reads only what this server sends (answers owned by a pointer or a
// plain name, an OPT record) and returns null for anything it cannot read.
import { CLASS_IN, HEADER_OCTETS, QTYPE, readName } from './message.js';

export interface QueryOptions {
  readonly id?: number;
  readonly rd?: boolean;
  readonly opcode?: number;
  readonly qclass?: number;
  /** add an OPT record (EDNS version `ednsVersion`, default 0) */
  readonly edns?: boolean;
  readonly ednsVersion?: number;
}

/** A query for `name` (dotted, ASCII labels; '' or '.' is the root) of type `qtype`. */
export const encodeQuery = (name: string, qtype: number, o: QueryOptions = {}): Uint8Array => {
  const labels = name
    .replace(/\.$/, '')
    .split('.')
    .filter((l) => l.length > 0);
  const nameBytes = [...labels.flatMap((l) => [l.length, ...Buffer.from(l, 'latin1')]), 0];
  const opt = o.edns ? [0, 0, QTYPE.OPT, 0x04, 0xd0, 0, o.ednsVersion ?? 0, 0, 0, 0, 0] : [];
  const flags = ((o.opcode ?? 0) << 11) | (o.rd === false ? 0 : 0x0100);
  const id = o.id ?? 0x1234;
  const qclass = o.qclass ?? CLASS_IN;
  return Uint8Array.from([
    id >> 8,
    id & 0xff,
    flags >> 8,
    flags & 0xff,
    0,
    1,
    0,
    0,
    0,
    0,
    0,
    o.edns ? 1 : 0,
    ...nameBytes,
    qtype >> 8,
    qtype & 0xff,
    qclass >> 8,
    qclass & 0xff,
    ...opt,
  ]);
};

export interface DecodedReply {
  readonly id: number;
  readonly qr: boolean;
  readonly opcode: number;
  readonly aa: boolean;
  readonly tc: boolean;
  readonly rd: boolean;
  readonly ra: boolean;
  /** the full rcode (the OPT record's extended bits included) */
  readonly rcode: number;
  readonly question: { readonly name: string; readonly qtype: number; readonly qclass: number } | null;
  readonly answers: readonly {
    readonly name: string;
    readonly type: number;
    readonly ttl: number;
    readonly rdata: Uint8Array;
  }[];
  readonly authority: number;
  readonly opt: { readonly payload: number; readonly version: number } | null;
}

export const decodeReply = (b: Uint8Array): DecodedReply | null => {
  if (b.length < HEADER_OCTETS) return null;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const flags = v.getUint16(2);
  const [qd, an, ns, ar] = [v.getUint16(4), v.getUint16(6), v.getUint16(8), v.getUint16(10)];
  let pos = HEADER_OCTETS;
  let question: DecodedReply['question'] = null;
  if (qd > 1) return null;
  if (qd === 1) {
    const n = readName(b, pos);
    if ('error' in n || n.end + 4 > b.length) return null;
    question = { name: n.name, qtype: v.getUint16(n.end), qclass: v.getUint16(n.end + 2) };
    pos = n.end + 4;
  }
  const records: { name: string; type: number; cls: number; ttl: number; rdata: Uint8Array }[] = [];
  for (let i = 0; i < an + ns + ar; i++) {
    const n = readName(b, pos);
    if ('error' in n || n.end + 10 > b.length) return null;
    const rdlen = v.getUint16(n.end + 8);
    if (n.end + 10 + rdlen > b.length) return null;
    records.push({
      name: n.name,
      type: v.getUint16(n.end),
      cls: v.getUint16(n.end + 2),
      ttl: v.getUint32(n.end + 4),
      rdata: b.slice(n.end + 10, n.end + 10 + rdlen),
    });
    pos = n.end + 10 + rdlen;
  }
  if (pos !== b.length) return null;
  const optRecord = records.slice(an + ns).find((r) => r.type === QTYPE.OPT);
  return {
    id: v.getUint16(0),
    qr: (flags & 0x8000) !== 0,
    opcode: (flags >> 11) & 0xf,
    aa: (flags & 0x0400) !== 0,
    tc: (flags & 0x0200) !== 0,
    rd: (flags & 0x0100) !== 0,
    ra: (flags & 0x0080) !== 0,
    rcode: (flags & 0xf) | (optRecord === undefined ? 0 : (optRecord.ttl >>> 24) << 4),
    question,
    answers: records.slice(0, an).map(({ name, type, ttl, rdata }) => ({ name, type, ttl, rdata })),
    authority: ns,
    opt: optRecord === undefined ? null : { payload: optRecord.cls, version: (optRecord.ttl >>> 16) & 0xff },
  };
};

/** 16 octets → the eight groups in lowercase hex joined by ':' (uncompressed; for comparisons in tests and logs). */
export const ipv6Groups = (b: Uint8Array): string =>
  Array.from({ length: 8 }, (_, i) => (((b[2 * i] as number) << 8) | (b[2 * i + 1] as number)).toString(16)).join(':');

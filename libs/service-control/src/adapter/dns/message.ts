// RFC 1035 wire format of the local-name DNS listener, written here (no dependency): a strict parser of ONE query and
// an encoder of the few replies the listener sends (decision 0175). Pure — bytes in, values out — and total: no input
// makes it throw. What it accepts is deliberately narrow: a standard query with exactly one question, no answer or
// authority records and at most one EDNS OPT record (what `dig` and stub resolvers send); anything else is FORMERR,
// NOTIMP or dropped, never guessed at.

export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5, BADVERS: 16 } as const;
export const QTYPE = { A: 1, AAAA: 28, OPT: 41, IXFR: 251, AXFR: 252, MAILB: 253, MAILA: 254, ANY: 255 } as const;
export const CLASS_IN = 1;
export const HEADER_OCTETS = 12;
export const MAX_LABEL_OCTETS = 63;
/** RFC 1035 §3.1: a name is at most 255 octets on the wire (length octets and the root label included). */
export const MAX_NAME_OCTETS = 255;
/** The UDP payload size this server advertises in EDNS replies (the 2020 DNS flag day value). */
export const EDNS_PAYLOAD = 1232;

export interface Question {
  /** presentation form without the trailing dot ('' is the root): letters, digits, '-' and '_' as they are, any other
   * octet as `\DDD` — so a label can never smuggle a '.' into the text the resolver splits on */
  readonly name: string;
  readonly qtype: number;
  readonly qclass: number;
}

/** What the header of a reply copies from the query. */
export interface QueryHeader {
  readonly id: number;
  readonly opcode: number;
  readonly rd: boolean;
}

export type ParsedQuery =
  /** a standard query the listener answers; `questionBytes` is the question section as sent (echoed verbatim) */
  | {
      readonly kind: 'query';
      readonly header: QueryHeader;
      readonly question: Question;
      readonly questionBytes: Uint8Array;
      readonly edns: boolean;
    }
  /** answered with a header-only error reply (`edns`: the query carried a valid OPT, so the reply carries one) */
  | {
      readonly kind: 'error';
      readonly header: QueryHeader;
      readonly rcode: number;
      readonly edns: boolean;
      readonly reason: string;
    }
  /** no reply at all: too short to hold a header, or a response (answering responses invites loops) */
  | { readonly kind: 'drop'; readonly reason: 'short' | 'response' };

const u16 = (b: Uint8Array, at: number): number => ((b[at] as number) << 8) | (b[at + 1] as number);
const u32 = (b: Uint8Array, at: number): number => (u16(b, at) * 0x10000 + u16(b, at + 2)) >>> 0;

const PLAIN = /^[A-Za-z0-9_-]$/;
const labelText = (b: Uint8Array, from: number, len: number): string => {
  let out = '';
  for (let i = from; i < from + len; i++) {
    const c = String.fromCharCode(b[i] as number);
    out += PLAIN.test(c) ? c : `\\${String(b[i]).padStart(3, '0')}`;
  }
  return out;
};

/**
 * Read a name at `at`. A compression pointer must point before itself, before the target of the pointer followed
 * last, and never into the header: the targets strictly decrease, so no loop is possible. The 255-octet limit counts
 * the expanded name. Returns the text and the offset just past the name where it started, or why it is malformed.
 */
export const readName = (
  b: Uint8Array,
  at: number,
): { readonly name: string; readonly end: number } | { readonly error: string } => {
  const labels: string[] = [];
  let octets = 1; // the root label
  let pos = at;
  let end: number | null = null;
  let limit = Number.POSITIVE_INFINITY;
  for (;;) {
    if (pos >= b.length) return { error: 'truncated name' };
    const len = b[pos] as number;
    const tag = len & 0xc0;
    if (tag === 0xc0) {
      if (pos + 1 >= b.length) return { error: 'truncated pointer' };
      const target = ((len & 0x3f) << 8) | (b[pos + 1] as number);
      if (target >= pos || target >= limit || target < HEADER_OCTETS)
        return { error: 'compression pointer not strictly backward (loop)' };
      end ??= pos + 2;
      limit = target;
      pos = target;
      continue;
    }
    if (tag !== 0) return { error: `label length octet ${len}: over ${MAX_LABEL_OCTETS} (or an extended label type)` };
    if (len === 0) return { name: labels.join('.'), end: end ?? pos + 1 };
    if (pos + 1 + len > b.length) return { error: 'truncated label' };
    octets += 1 + len;
    if (octets > MAX_NAME_OCTETS) return { error: `name over ${MAX_NAME_OCTETS} octets` };
    labels.push(labelText(b, pos + 1, len));
    pos += 1 + len;
  }
};

/** Parse one query message. Total: every byte string gets a result. */
export const parseQuery = (b: Uint8Array): ParsedQuery => {
  if (b.length < HEADER_OCTETS) return { kind: 'drop', reason: 'short' };
  const flags = u16(b, 2);
  if (flags & 0x8000) return { kind: 'drop', reason: 'response' };
  const header: QueryHeader = { id: u16(b, 0), opcode: (flags >> 11) & 0xf, rd: (flags & 0x0100) !== 0 };
  const error = (rcode: number, reason: string, edns = false): ParsedQuery => ({
    kind: 'error',
    header,
    rcode,
    edns,
    reason,
  });
  if (header.opcode !== 0) return error(RCODE.NOTIMP, `opcode ${header.opcode}`);
  const [qd, an, ns, ar] = [u16(b, 4), u16(b, 6), u16(b, 8), u16(b, 10)];
  if (qd !== 1) return error(RCODE.FORMERR, `QDCOUNT ${qd}`);
  if (an !== 0 || ns !== 0) return error(RCODE.FORMERR, 'answer or authority records in a query');
  if (ar > 1) return error(RCODE.FORMERR, `ARCOUNT ${ar}: only one OPT record is accepted`);

  const name = readName(b, HEADER_OCTETS);
  if ('error' in name) return error(RCODE.FORMERR, name.error);
  if (name.end + 4 > b.length) return error(RCODE.FORMERR, 'truncated question');
  const question: Question = { name: name.name, qtype: u16(b, name.end), qclass: u16(b, name.end + 2) };
  const questionEnd = name.end + 4;

  let pos = questionEnd;
  let edns: { readonly version: number } | null = null;
  if (ar === 1) {
    // RFC 6891: the OPT pseudo-record — root owner, type 41, CLASS = payload size, TTL = ext-rcode/version/flags
    if (b[pos] !== 0) return error(RCODE.FORMERR, 'additional record is not an OPT with the root owner');
    if (pos + 11 > b.length) return error(RCODE.FORMERR, 'truncated OPT record');
    if (u16(b, pos + 1) !== QTYPE.OPT) return error(RCODE.FORMERR, 'additional record is not an OPT');
    const ttl = u32(b, pos + 5);
    const rdlen = u16(b, pos + 9);
    const rdEnd = pos + 11 + rdlen;
    if (rdEnd > b.length) return error(RCODE.FORMERR, 'truncated OPT data');
    for (let o = pos + 11; o < rdEnd;) {
      if (o + 4 > rdEnd) return error(RCODE.FORMERR, 'truncated EDNS option');
      o += 4 + u16(b, o + 2);
      if (o > rdEnd) return error(RCODE.FORMERR, 'EDNS option overruns the OPT data');
    }
    edns = { version: (ttl >>> 16) & 0xff };
    pos = rdEnd;
  }
  if (pos !== b.length) return error(RCODE.FORMERR, 'trailing octets after the message');
  if (edns !== null && edns.version !== 0) return error(RCODE.BADVERS, `EDNS version ${edns.version}`, true);
  if (question.qclass !== CLASS_IN) return error(RCODE.NOTIMP, `class ${question.qclass}`, edns !== null);
  if (question.qtype === QTYPE.OPT) return error(RCODE.FORMERR, 'OPT as a question type', edns !== null);
  return { kind: 'query', header, question, questionBytes: b.slice(HEADER_OCTETS, questionEnd), edns: edns !== null };
};

/** One answer record; its owner is the question's name (a compression pointer to offset 12). */
export interface AnswerRecord {
  readonly type: number;
  readonly ttlSeconds: number;
  readonly rdata: Uint8Array;
}

export interface Reply {
  readonly header: QueryHeader;
  readonly rcode: number;
  /** authoritative: set for answers about managed names */
  readonly aa: boolean;
  /** the question section to echo (null: a header-only reply) */
  readonly questionBytes: Uint8Array | null;
  readonly answers: readonly AnswerRecord[];
  readonly edns: boolean;
}

/** TTLs on the wire: whole seconds in 0..2^31-1 (RFC 2181 §8); anything not finite is 0. */
const wireTtl = (s: number): number => (Number.isFinite(s) && s > 0 ? Math.min(Math.floor(s), 0x7fffffff) : 0);

export const encodeReply = (r: Reply): Uint8Array => {
  const q = r.questionBytes ?? new Uint8Array(0);
  const size = HEADER_OCTETS + q.length + r.answers.reduce((n, a) => n + 12 + a.rdata.length, 0) + (r.edns ? 11 : 0);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  // QR=1, opcode copied, AA, TC=0, RD copied, RA=0 (not a recursive resolver), Z/AD/CD=0, the low 4 bits of the rcode
  const flags =
    0x8000 | ((r.header.opcode & 0xf) << 11) | (r.aa ? 0x0400 : 0) | (r.header.rd ? 0x0100 : 0) | (r.rcode & 0xf);
  view.setUint16(0, r.header.id);
  view.setUint16(2, flags);
  view.setUint16(4, r.questionBytes === null ? 0 : 1);
  view.setUint16(6, r.answers.length);
  view.setUint16(8, 0);
  view.setUint16(10, r.edns ? 1 : 0);
  out.set(q, HEADER_OCTETS);
  let pos = HEADER_OCTETS + q.length;
  for (const a of r.answers) {
    view.setUint16(pos, 0xc000 | HEADER_OCTETS);
    view.setUint16(pos + 2, a.type);
    view.setUint16(pos + 4, CLASS_IN);
    view.setUint32(pos + 6, wireTtl(a.ttlSeconds));
    view.setUint16(pos + 10, a.rdata.length);
    out.set(a.rdata, pos + 12);
    pos += 12 + a.rdata.length;
  }
  if (r.edns) {
    out[pos] = 0; // root owner
    view.setUint16(pos + 1, QTYPE.OPT);
    view.setUint16(pos + 3, EDNS_PAYLOAD);
    view.setUint32(pos + 5, ((r.rcode >> 4) & 0xff) << 24); // extended rcode, version 0, no flags (DO clear)
    view.setUint16(pos + 9, 0);
  }
  return out;
};

/** Dotted-quad text → 4 octets, or null. */
export const ipv4Octets = (text: string): Uint8Array | null => {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255)) return null;
  return Uint8Array.from(parts.map(Number));
};

/** IPv6 text (with `::` and an optional dotted-quad tail; no zone id) → 16 octets, or null. */
export const ipv6Octets = (text: string): Uint8Array | null => {
  if (text.includes('%')) return null; // a scoped address means nothing to another host
  let groups = text;
  const tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    const v4 = ipv4Octets(text.slice(lastColon + 1));
    if (v4 === null) return null;
    tail.push(((v4[0] as number) << 8) | (v4[1] as number), ((v4[2] as number) << 8) | (v4[3] as number));
    const prefix = text.slice(0, lastColon + 1);
    groups = prefix.endsWith('::') ? prefix : prefix.slice(0, -1);
  }
  const halves = groups.split('::');
  if (halves.length > 2) return null;
  const part = (s: string): number[] | null => {
    if (s === '') return [];
    const out: number[] = [];
    for (const g of s.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = part(halves[0] as string);
  const rest = halves.length === 2 ? part(halves[1] as string) : [];
  if (head === null || rest === null) return null;
  const have = head.length + rest.length + tail.length;
  if (halves.length === 1 ? have !== 8 : have > 7) return null;
  const words = [...head, ...Array.from({ length: 8 - have }, () => 0), ...rest, ...tail];
  const out = new Uint8Array(16);
  words.forEach((w, i) => {
    out[2 * i] = w >> 8;
    out[2 * i + 1] = w & 0xff;
  });
  return out;
};

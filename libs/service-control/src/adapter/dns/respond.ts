// One DNS query → one reply, pure: the packet is parsed by `message.ts` and every answer about a name comes from the
// local resolver (`names/resolver.ts` through the `resolve` callback — there is no second rule set here). This file
// only maps the resolver's answer onto the wire (decision 0175):
// - answer → NOERROR with the A/AAAA record, TTL as the resolver gave it (≤ min(60 s, permit remaining));
// - nodata → NOERROR without records; nxdomain → NXDOMAIN; both without an SOA, so downstream caches do not keep the
//   negative answer (RFC 2308 §5) and the only negative cache is the resolver's own (≤ 5 s);
// - servfail → SERVFAIL; refused (not a managed name) → REFUSED: we are not a recursive resolver and never ask
//   public DNS. Other query types of a managed name get the name's existence (NODATA or NXDOMAIN); zone transfers and
//   ANY are not implemented;
// - stopped (a multi-source name without a valid selection, decision 0192) → REFUSED with AA set and no records: the
//   name is ours and closed by the owner's (missing or invalidated) selection. Not NXDOMAIN (it exists), not NODATA
//   (that would claim an empty record set), never another source's address; REFUSED carries nothing to cache.
import type { NameAnswer, NameQuery, QueryType } from '../../names/resolver.js';
import {
  type ParsedQuery,
  QTYPE,
  RCODE,
  type Reply,
  encodeReply,
  ipv4Octets,
  ipv6Octets,
  parseQuery,
} from './message.js';

export type DnsOutcome =
  'answer' | 'nodata' | 'nxdomain' | 'refused' | 'stopped' | 'servfail' | 'formerr' | 'notimp' | 'badvers' | 'dropped';

export interface DnsResponse {
  /** the bytes to send back, or null: send nothing */
  readonly reply: Uint8Array | null;
  readonly outcome: DnsOutcome;
  /** the question's name (presentation form) when there was one */
  readonly name: string | null;
  /** why a packet was refused as malformed, unsupported or dropped */
  readonly reason: string | null;
}

const ERROR_OUTCOME: Record<number, DnsOutcome> = {
  [RCODE.FORMERR]: 'formerr',
  [RCODE.NOTIMP]: 'notimp',
  [RCODE.BADVERS]: 'badvers',
};
const UNIMPLEMENTED_TYPES = new Set<number>([QTYPE.IXFR, QTYPE.AXFR, QTYPE.MAILA, QTYPE.MAILB, QTYPE.ANY]);

/** Answer one packet. Never throws: a resolver that throws is SERVFAIL. */
export const respond = (packet: Uint8Array, resolve: (query: NameQuery) => NameAnswer): DnsResponse => {
  const parsed: ParsedQuery = parseQuery(packet);
  if (parsed.kind === 'drop') return { reply: null, outcome: 'dropped', name: null, reason: parsed.reason };
  if (parsed.kind === 'error')
    return {
      reply: encodeReply({
        header: parsed.header,
        rcode: parsed.rcode,
        aa: false,
        questionBytes: null,
        answers: [],
        edns: parsed.edns,
      }),
      outcome: ERROR_OUTCOME[parsed.rcode] ?? 'formerr',
      name: null,
      reason: parsed.reason,
    };
  const { header, question, questionBytes, edns } = parsed;
  const reply = (rcode: number, aa: boolean, answers: Reply['answers'] = []): Uint8Array =>
    encodeReply({ header, rcode, aa, questionBytes, answers, edns });
  const done = (outcome: DnsOutcome, bytes: Uint8Array, reason: string | null = null): DnsResponse => ({
    reply: bytes,
    outcome,
    name: question.name,
    reason,
  });

  if (UNIMPLEMENTED_TYPES.has(question.qtype))
    return done('notimp', reply(RCODE.NOTIMP, false), `query type ${question.qtype}`);
  const asked: QueryType | null = question.qtype === QTYPE.AAAA ? 'AAAA' : question.qtype === QTYPE.A ? 'A' : null;
  let answer: NameAnswer;
  try {
    // another type of a managed name: only its existence matters, asked as AAAA (the family services are named in)
    answer = resolve({ name: question.name, type: asked ?? 'AAAA' });
  } catch {
    return done('servfail', reply(RCODE.SERVFAIL, false), 'resolver failed');
  }
  switch (answer.kind) {
    case 'refused':
      return done('refused', reply(RCODE.REFUSED, false));
    case 'stopped':
      return done('stopped', reply(RCODE.REFUSED, true), answer.reason);
    case 'servfail':
      return done('servfail', reply(RCODE.SERVFAIL, false), answer.reason);
    case 'nxdomain':
      return done('nxdomain', reply(RCODE.NXDOMAIN, true));
    case 'nodata':
      return done('nodata', reply(RCODE.NOERROR, true));
    case 'answer': {
      if (asked === null) return done('nodata', reply(RCODE.NOERROR, true));
      const rdata = answer.type === 'AAAA' ? ipv6Octets(answer.address) : ipv4Octets(answer.address);
      if (rdata === null)
        return done('servfail', reply(RCODE.SERVFAIL, false), `address ${answer.address} cannot be encoded`);
      return done(
        'answer',
        reply(RCODE.NOERROR, true, [
          { type: asked === 'AAAA' ? QTYPE.AAAA : QTYPE.A, ttlSeconds: answer.ttlSeconds, rdata },
        ]),
      );
    }
  }
};

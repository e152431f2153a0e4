// decodeMessage (one decode: the top-level kind chooses the codec, decision 0550) against decodeMessageOrdered (the
// path it replaced: a generic decode for the §3.2 order, then the kind's codec), on the same bytes in the same run,
// slices rotated across the cases so that both see the same machine noise. Prints the ratio new/old of the time per
// message (below 1 is faster) for a lease.refresh, a report.replace and a snapshot.ack, and for a refused message
// (schema 2: the one-pass decode refuses it, then the ordered path chooses the error — the cost of a refusal).
// Run: npm run bench:decode-message -w @homelab/service-control   (--quick: fewer slices)
import { topLevelText } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import { decodeMessage, decodeMessageOrdered, encodeMessage, type Message } from '../src/api/message.js';
import { reportDigest } from '../src/api/report.js';
import { decl, content, replaceBody, type Who } from '../test/wire.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const b = (n: number, fill: number): Uint8Array => new Uint8Array(n).fill(fill);
const who: Who = { identity: b(32, 1), nsdId: b(16, 2), networkId: b(16, 3), gen: 4n, rid: b(16, 5), epoch: 6n };
const envelope = {
  schema: 1,
  nsd_id: who.nsdId,
  network_id: who.networkId,
  subject_identity: who.identity,
  runtime_generation: 4n,
  runtime_id: b(16, 5),
  authority_epoch: 6n,
  request_id: b(16, 7),
};
const serviceRef = { nsd_id: who.nsdId, network_id: who.networkId, service_id: b(16, 8) };

const refresh = {
  ...envelope,
  kind: 'lease.refresh',
  session_seq: 9n,
  body: {
    service_ref: serviceRef,
    refresh_seq: 12n,
    listener_revision: 3n,
    intent_digest: b(32, 10),
    proposal_id: b(16, 11),
    allocation_round: 1n,
    proposal_seq: 1n,
    P: 40123,
    snapshot_revision: 17n,
    snapshot_digest: b(32, 12),
    proof: { installed_protocols: ['tcp'], installed_P: 40123, enforcement_policy_digest: b(32, 13) },
  },
} as unknown as Message;

const DECLARATIONS = Number(process.env['BENCH_DECLARATIONS'] ?? 5);
const decls = Array.from({ length: DECLARATIONS }, (_, i) => decl(`svc-${i}`, `Service ${i}`, 8000 + i));
const replace = { ...envelope, kind: 'report.replace', body: replaceBody(who, 2n, decls) } as unknown as Message;
if (
  replace.kind === 'report.replace' &&
  !Buffer.from(replace.body.report_digest).equals(reportDigest(content(who, decls)))
)
  throw new Error('report digest');

const ack = {
  ...envelope,
  kind: 'snapshot.ack',
  session_seq: 9n,
  body: {
    scope: { subject_identity: who.identity, nsd_id: who.nsdId, network_id: who.networkId },
    snapshot_revision: 17n,
    snapshot_digest: b(32, 12),
    accepted: true,
    enforcement_applied: true,
    dns_applied: true,
    errors: [],
  },
} as unknown as Message;

interface Case {
  readonly name: string;
  readonly fn: () => unknown;
}

/** Rotates through the cases in slices of `sliceMs`, `slices` times; the median ops/s of each case over its slices. */
const measure = (cases: ReadonlyArray<Case>, sliceMs: number, slices: number): Map<string, number> => {
  const rates = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  const batch = new Map<string, number>();
  for (const c of cases) {
    let n = 1;
    for (;;) {
      const t = process.hrtime.bigint();
      for (let i = 0; i < n; i++) c.fn();
      if (Number(process.hrtime.bigint() - t) / 1e6 > sliceMs / 10 || n >= 1 << 20) break;
      n *= 2;
    }
    batch.set(c.name, n);
  }
  const limit = BigInt(Math.round(sliceMs * 1e6));
  for (let s = 0; s < slices; s++) {
    for (const c of cases) {
      const n0 = batch.get(c.name) ?? 1;
      let n = 0;
      const start = process.hrtime.bigint();
      let elapsed = 0n;
      while (elapsed < limit) {
        for (let i = 0; i < n0; i++) c.fn();
        n += n0;
        elapsed = process.hrtime.bigint() - start;
      }
      rates.get(c.name)?.push(n / (Number(elapsed) / 1e9));
    }
  }
  const out = new Map<string, number>();
  for (const [k, r] of rates) out.set(k, [...r].sort((x, y) => x - y)[Math.floor(r.length / 2)] ?? Number.NaN);
  return out;
};

const us = (opsPerSecond: number): string => `${(1e6 / opsPerSecond).toFixed(2)} µs`;

const quick = process.argv.includes('--quick');
const sliceMs = 25;
const slices = quick ? 8 : 40;
const kindHint = topLevelText('kind');

const schema2 = (m: Message): Uint8Array => {
  const bytes = encodeMessage(m);
  // `schema` is the fourth key; its value 0x01 follows the key's 7 bytes ("schema" with its header)
  const at = Buffer.from(bytes).indexOf(Buffer.from([0x66, ...Buffer.from('schema'), 0x01]));
  const out = bytes.slice();
  out[at + 7] = 0x02;
  return out;
};

const scenarios: ReadonlyArray<{ readonly label: string; readonly bytes: Uint8Array }> = [
  { label: 'lease.refresh', bytes: encodeMessage(refresh) },
  { label: `report.replace (${DECLARATIONS} declarations)`, bytes: encodeMessage(replace) },
  { label: 'snapshot.ack', bytes: encodeMessage(ack) },
  { label: 'refused: lease.refresh with schema 2', bytes: schema2(refresh) },
];

print(`node ${process.version}; ${slices} slices of ${sliceMs} ms per case, rotated; medians`);
print('| message | bytes | decodeMessage (new) | decodeMessageOrdered (old) | new/old | kind scan alone |');
print('|---|---|---|---|---|---|');
for (const s of scenarios) {
  const a = decodeMessage(s.bytes);
  const o = decodeMessageOrdered(s.bytes);
  const same = Either.isRight(a)
    ? Either.isRight(o) && Buffer.from(encodeMessage(a.right)).equals(encodeMessage(o.right))
    : Either.isLeft(o) && a.left.code === o.left.code && a.left.detail === o.left.detail;
  if (!same) throw new Error(`${s.label}: the two paths disagree`);
  const r = measure(
    [
      { name: 'new', fn: () => decodeMessage(s.bytes) },
      { name: 'old', fn: () => decodeMessageOrdered(s.bytes) },
      { name: 'scan', fn: () => kindHint(s.bytes) },
    ],
    sliceMs,
    slices,
  );
  const n = r.get('new') ?? Number.NaN;
  const old = r.get('old') ?? Number.NaN;
  print(
    `| ${s.label} | ${s.bytes.length} | ${us(n)} | ${us(old)} | ${(old / n).toFixed(2)} | ${us(r.get('scan') ?? Number.NaN)} |`,
  );
}

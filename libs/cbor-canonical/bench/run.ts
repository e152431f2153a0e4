// Benchmark: this library's canonical encode / strict decode against cbor-x (speed peer, not canonical) and cborg
// (strictness peer: length-first canonical encode, strict decode), measured in one run, ratios printed.
// Run: npx nx run @homelab/cbor-canonical:bench   (or: npm run bench -w @homelab/cbor-canonical)
import * as cborg from 'cborg';
import { Decoder, Encoder } from 'cbor-x';
import { type CborValue, decodeOrThrow, encodeOrThrow } from '../src/index.js';
import { LeaseEnvelope, leaseTyped, Report, reportTyped, Snapshot, snapshotTyped, toPlain } from './messages.js';

const cborx = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const cborxDecoder = new Decoder({ useRecords: false, mapsAsObjects: true });
const cborgStrict = { strict: true, rejectDuplicateMapKeys: true, allowIndefinite: false, allowUndefined: false, allowInfinity: false, allowNaN: false, allowBigInt: true } as const;

interface Case {
  readonly name: string;
  readonly fn: () => unknown;
}

/** Runs each case for about `ms` per round, interleaved over `rounds`; returns the best ops/s of each. */
const measure = (cases: ReadonlyArray<Case>, ms: number, rounds: number): Map<string, number> => {
  const best = new Map<string, number>();
  for (const c of cases) for (let i = 0; i < 200; i++) c.fn(); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (const c of cases) {
      let n = 0;
      let batch = 1;
      const start = process.hrtime.bigint();
      const limit = BigInt(ms) * 1_000_000n;
      let elapsed = 0n;
      while (elapsed < limit) {
        for (let i = 0; i < batch; i++) c.fn();
        n += batch;
        if (batch < 1 << 16) batch *= 2;
        elapsed = process.hrtime.bigint() - start;
      }
      const ops = n / (Number(elapsed) / 1e9);
      best.set(c.name, Math.max(best.get(c.name) ?? 0, ops));
    }
  }
  return best;
};

const fmt = (ops: number): string => (ops >= 1e6 ? `${(ops / 1e6).toFixed(2)} M/s` : ops >= 1e3 ? `${(ops / 1e3).toFixed(1)} k/s` : `${ops.toFixed(0)} /s`);
const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}×`;

const same = (a: Uint8Array, b: Uint8Array): boolean => Buffer.compare(a, b) === 0;

const scenarios = [
  { label: `report content, 1 declaration`, codec: Report as unknown as typeof Snapshot, typed: reportTyped as unknown as typeof snapshotTyped },
  { label: `lease.result envelope`, codec: LeaseEnvelope as unknown as typeof Snapshot, typed: leaseTyped as unknown as typeof snapshotTyped },
  { label: `snapshot, 1,000 resources`, codec: Snapshot, typed: snapshotTyped },
];

const quick = process.argv.includes('--quick');
const ms = quick ? 60 : 250;
const rounds = quick ? 2 : 5;

const rows: string[] = [];
console.log(`node ${process.version}; best of ${rounds} rounds of ${ms} ms per case\n`);
for (const s of scenarios) {
  const plain = toPlain(s.typed) as CborValue;
  const ours = encodeOrThrow(plain);
  const viaCodec = s.codec.encodeOrThrow(s.typed);
  const viaCborg = cborg.encode(plain);
  const viaCborx = cborx.encode(plain) as Uint8Array;
  if (!same(ours, viaCodec) || !same(ours, viaCborg)) throw new Error(`${s.label}: encodings disagree`);
  console.log(`${s.label}: ${ours.length} bytes (cbor-x non-canonical: ${viaCborx.length} bytes)`);

  const results = measure(
    [
      { name: 'encode', fn: () => encodeOrThrow(plain) },
      { name: 'codec.encode', fn: () => s.codec.encodeOrThrow(s.typed) },
      { name: 'cbor-x encode', fn: () => cborx.encode(plain) },
      { name: 'cborg encode', fn: () => cborg.encode(plain) },
      { name: 'decode', fn: () => decodeOrThrow(ours) },
      { name: 'codec.decode', fn: () => s.codec.decodeOrThrow(ours) },
      { name: 'cbor-x decode', fn: () => cborxDecoder.decode(viaCborx) },
      { name: 'cborg strict decode', fn: () => cborg.decode(ours, cborgStrict) },
    ],
    ms,
    rounds,
  );
  const g = (k: string): number => results.get(k) ?? Number.NaN;
  console.table(
    Object.fromEntries(
      [...results].map(([k, v]) => [k, { 'ops/s': fmt(v) }]),
    ),
  );
  for (const [op, peerFast, peerStrict, goalFast, goalStrict] of [
    ['encode', 'cbor-x encode', 'cborg encode', 0.8, 3],
    ['codec.encode', 'cbor-x encode', 'cborg encode', 0.8, 3],
    ['decode', 'cbor-x decode', 'cborg strict decode', 0.5, 1.5],
    ['codec.decode', 'cbor-x decode', 'cborg strict decode', 0.5, 1.5],
  ] as const) {
    const vsFast = g(op) / g(peerFast);
    const vsStrict = g(op) / g(peerStrict);
    const line = `| ${s.label} | ${op} | ${fmt(g(op))} | ${ratio(g(op), g(peerFast))} (goal ≥${goalFast}) ${vsFast >= goalFast ? 'met' : 'MISSED'} | ${ratio(g(op), g(peerStrict))} (goal ≥${goalStrict}) ${vsStrict >= goalStrict ? 'met' : 'MISSED'} |`;
    rows.push(line);
  }
  console.log('');
}
console.log('| message | operation | this library | vs cbor-x | vs cborg (canonical / strict) |');
console.log('|---|---|---|---|---|');
for (const r of rows) console.log(r);

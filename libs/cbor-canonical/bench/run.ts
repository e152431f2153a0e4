// Benchmark: this library's canonical encode / strict decode against cbor-x (speed peer, not canonical) and cborg
// (strictness peer: length-first canonical encode, strict decode), measured in one run, ratios printed.
// Run: npx nx run @homelab/cbor-canonical:bench   (or: npm run bench -w @homelab/cbor-canonical)
import * as cborg from 'cborg';
import { Decoder, Encoder } from 'cbor-x';
import { type CborValue, decodeOrThrow, encodeOrThrow } from '../src/index.js';
import { LeaseEnvelope, leaseTyped, Report, reportTyped, Snapshot, snapshotTyped, toPlain } from './messages.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const cborx = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const cborxDecoder = new Decoder({ useRecords: false, mapsAsObjects: true });
const cborgStrict = {
  strict: true,
  rejectDuplicateMapKeys: true,
  allowIndefinite: false,
  allowUndefined: false,
  allowInfinity: false,
  allowNaN: false,
  allowBigInt: true,
} as const;

interface Case {
  readonly name: string;
  readonly fn: () => unknown;
}

/**
 * Rotates through the cases in short slices (`sliceMs` each, `slices` times per case), so that every case sees the
 * same machine noise; returns the median and the best ops/s of each case over its slices.
 */
const measure = (
  cases: ReadonlyArray<Case>,
  sliceMs: number,
  slices: number,
): Map<string, { median: number; best: number }> => {
  const rates = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  const batch = new Map<string, number>();
  for (const c of cases) {
    // warm-up, and a batch size that takes about a tenth of a slice
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
      const b = batch.get(c.name) ?? 1;
      let n = 0;
      const start = process.hrtime.bigint();
      let elapsed = 0n;
      while (elapsed < limit) {
        for (let i = 0; i < b; i++) c.fn();
        n += b;
        elapsed = process.hrtime.bigint() - start;
      }
      rates.get(c.name)?.push(n / (Number(elapsed) / 1e9));
    }
  }
  const out = new Map<string, { median: number; best: number }>();
  for (const [k, r] of rates) {
    const sorted = [...r].sort((a, b) => a - b);
    out.set(k, {
      median: sorted[Math.floor(sorted.length / 2)] ?? Number.NaN,
      best: sorted[sorted.length - 1] ?? Number.NaN,
    });
  }
  return out;
};

const fmt = (ops: number): string =>
  ops >= 1e6 ? `${(ops / 1e6).toFixed(2)} M/s` : ops >= 1e3 ? `${(ops / 1e3).toFixed(1)} k/s` : `${ops.toFixed(0)} /s`;
const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}×`;

const same = (a: Uint8Array, b: Uint8Array): boolean => Buffer.compare(a, b) === 0;

const scenarios = [
  {
    label: `report content, 1 declaration`,
    codec: Report as unknown as typeof Snapshot,
    typed: reportTyped as unknown as typeof snapshotTyped,
  },
  {
    label: `lease.result envelope`,
    codec: LeaseEnvelope as unknown as typeof Snapshot,
    typed: leaseTyped as unknown as typeof snapshotTyped,
  },
  { label: `snapshot, 1,000 resources`, codec: Snapshot, typed: snapshotTyped },
];

const quick = process.argv.includes('--quick');
const sliceMs = 25;
const slices = quick ? 8 : 40;

const rows: string[] = [];
print(
  `node ${process.version}; ${slices} slices of ${sliceMs} ms per case, rotated across cases; ratios of medians (best in brackets)\n`,
);
for (const s of scenarios) {
  const plain = toPlain(s.typed) as CborValue;
  const ours = encodeOrThrow(plain);
  const viaCodec = s.codec.encodeOrThrow(s.typed);
  const viaCborg = cborg.encode(plain);
  const viaCborx = cborx.encode(plain) as Uint8Array;
  if (!same(ours, viaCodec) || !same(ours, viaCborg)) throw new Error(`${s.label}: encodings disagree`);
  print(`${s.label}: ${ours.length} bytes (cbor-x non-canonical: ${viaCborx.length} bytes)`);

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
    sliceMs,
    slices,
  );
  const g = (k: string): number => results.get(k)?.median ?? Number.NaN;
  const gb = (k: string): number => results.get(k)?.best ?? Number.NaN;
  for (const [k, v] of results) print(`${k}: median ${fmt(v.median)} ops/s, best ${fmt(v.best)} ops/s`);
  for (const [op, peerFast, peerStrict, goalFast, goalStrict] of [
    ['encode', 'cbor-x encode', 'cborg encode', 0.8, 3],
    ['codec.encode', 'cbor-x encode', 'cborg encode', 0.8, 3],
    ['decode', 'cbor-x decode', 'cborg strict decode', 0.5, 1.5],
    ['codec.decode', 'cbor-x decode', 'cborg strict decode', 0.5, 1.5],
  ] as const) {
    const vsFast = g(op) / g(peerFast);
    const vsStrict = g(op) / g(peerStrict);
    const line = `| ${s.label} | ${op} | ${fmt(g(op))} | ${ratio(g(op), g(peerFast))} [${ratio(gb(op), gb(peerFast))}] (≥${goalFast}: ${vsFast >= goalFast ? 'met' : 'MISSED'}) | ${ratio(g(op), g(peerStrict))} [${ratio(gb(op), gb(peerStrict))}] (≥${goalStrict}: ${vsStrict >= goalStrict ? 'met' : 'MISSED'}) |`;
    rows.push(line);
  }
  print('');
}
print(
  '| message | operation | this library (median) | vs cbor-x: median [best] | vs cborg canonical / strict: median [best] |',
);
print('|---|---|---|---|---|');
for (const r of rows) print(r);

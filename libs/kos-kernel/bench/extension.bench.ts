// kos-kernel extension bench (issue 23): the activation fixpoint (`loadExtensions`) over 100 declared components
// with chained dependencies (each needs the previous one's capability and component), declared in the worst load order
// (reverse), against its peer in the same run: the same 100 components without dependencies (one pass, no waiting).
// Goal from the issue: ≤ 50 ms for the chained case.
import { checkDeclaration, type ComponentFacts, loadExtensions } from '../src/index.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const N = Number(process.env['BENCH_N'] ?? 100);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 50);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
};

const declaration = (i: number, chained: boolean) => ({
  id: `ext-${i}`,
  version: '1.0.0',
  framework: '^1.0.0',
  dependencies:
    chained && i > 0
      ? {
          capabilities: [{ name: `ext-${i - 1}/cap`, range: '^1.0.0' }],
          components: [{ id: `ext-${i - 1}`, range: '>=1.0.0 <2.0.0' }],
        }
      : {},
  contributes: {
    kinds: [{ group: `ext-${i}.example.org`, version: 'v1', kind: 'Thing', plural: 'things' }],
    capabilities: [{ name: 'cap' }],
    pages: [{ id: 'main', title: 'Main', path: `/ext-${i}`, roles: ['Owner'] }],
    settings: [{ id: `ext-${i}.s`, scope: 'cluster', type: 'number', writer: 'user' }],
  },
});

const facts = (chained: boolean): ComponentFacts[] =>
  Array.from({ length: N }, (_, k) => {
    const i = N - 1 - k; // reverse: each component is created before the one it depends on
    return {
      name: `c-${i}`,
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, k)).toISOString(),
      ownership: 'managed',
      disabled: false,
      package: { _tag: 'Verified', declaration: checkDeclaration(declaration(i, chained)) },
    };
  });

const chained = facts(true);
const flat = facts(false);
const tChained: number[] = [];
const tFlat: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  let t0 = process.hrtime.bigint();
  const a = loadExtensions(chained);
  tChained.push(Number(process.hrtime.bigint() - t0) / 1e6);
  t0 = process.hrtime.bigint();
  const b = loadExtensions(flat);
  tFlat.push(Number(process.hrtime.bigint() - t0) / 1e6);
  if (r === 0) {
    const active = (x: typeof a) => x.components.filter((c) => c.outcome._tag === 'Active').length;
    if (active(a) !== N || active(b) !== N) throw new Error(`not all active: ${active(a)} / ${active(b)}`);
  }
}
print(`activation fixpoint, ${N} components, median of ${ROUNDS} (declarations checked beforehand):`);
print(`  chained (reverse order)   ${median(tChained).toFixed(2)} ms  (goal ≤ 50 ms)`);
print(`  independent (peer)        ${median(tFlat).toFixed(2)} ms`);
print(`  ratio chained / peer      ${(median(tChained) / median(tFlat)).toFixed(1)}x`);

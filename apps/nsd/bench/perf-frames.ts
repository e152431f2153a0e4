// Where one thread's on-CPU samples went, by JavaScript frame and V8 tier (decision 0570): reads `perf script` output
// (recorded with `perf record -k CLOCK_MONOTONIC -e cpu-clock -g`, node run with `--perf-basic-prof
// --interpreted-frames-native-stack`) and charges each sample of thread `tid` inside [fromS, toS] (CLOCK_MONOTONIC
// seconds; BENCH_MARKS or the bench's log give them) to the innermost JavaScript frame on its stack — builtins, ICs
// and runtime calls count for the frame that called them. Usage:
//   perf script -i perf.data -F pid,tid,time,ip,sym,dso --pid <pid> | \
//     node --import tsx bench/perf-frames.ts <tid> [fromS toS] [top]
import { createInterface } from 'node:readline';

const [tidArg, fromArg, toArg, topArg] = process.argv.slice(2);
if (tidArg === undefined) throw new Error('usage: perf script … | perf-frames.ts <tid> [fromS toS] [top]');
const from = fromArg === undefined ? -Infinity : Number(fromArg);
const to = toArg === undefined ? Infinity : Number(toArg);
const top = Number(topArg ?? 30);

/** V8's perf-map markers: `*` TurboFan, `+` Maglev, `^` Sparkplug, `~` Ignition. */
const tierOf = (frame: string): string => {
  const m = /^(?:JS|Function):([*+^~])/.exec(frame);
  if (m === null) return 'no JS frame (libuv, GC, native)';
  return { '*': 'optimized', '+': 'maglev', '^': 'baseline', '~': 'interpreted' }[m[1] as '*' | '+' | '^' | '~'];
};

const frames = new Map<string, number>();
const tiers = new Map<string, number>();
let samples = 0;
let inSample = false;
let counted = false;
let frame: string | null = null;
const close = () => {
  if (!inSample || !counted) return;
  const f = frame ?? '(no JS frame)';
  frames.set(f, (frames.get(f) ?? 0) + 1);
  const t = tierOf(f);
  tiers.set(t, (tiers.get(t) ?? 0) + 1);
  samples++;
};

for await (const line of createInterface({ input: process.stdin })) {
  const head = /^\s*\S+\s+(\d+)\/(\d+)\s+([\d.]+):/.exec(line) ?? /^\s*(\d+)\/(\d+)\s+([\d.]+):/.exec(line);
  if (head !== null) {
    close();
    const t = Number(head[3]);
    inSample = true;
    counted = head[2] === tidArg && t >= from && t <= to;
    frame = null;
    continue;
  }
  if (!inSample || frame !== null || line.trim() === '') continue;
  const sym = line
    .trim()
    .replace(/^[0-9a-f]+ /, '')
    .replace(/ \(\/tmp\/perf-\d+\.map\)$/, '');
  if (/^(JS|Function|Eval):/.test(sym)) frame = sym;
}
close();

const pct = (n: number) => `${((100 * n) / Math.max(samples, 1)).toFixed(1).padStart(5)} %`;
process.stdout.write(`${samples} on-CPU samples of thread ${tidArg}\n`);
for (const [t, n] of [...tiers].sort((a, b) => b[1] - a[1])) process.stdout.write(`${pct(n)}  ${t}\n`);
process.stdout.write('innermost JavaScript frames:\n');
for (const [f, n] of [...frames].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(n)}  ${f}\n`);

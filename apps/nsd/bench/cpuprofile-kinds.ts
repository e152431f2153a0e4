// Where a V8 CPU profile of nsd went, by request kind (decision 0520): every non-idle sample is charged to the
// innermost frame on its stack that names a request handler or the snapshot production (the stack of an async
// handler resumed after an `await` still has the handler's own frame), else to a shared category (the envelope's
// Ed25519 verify/sign, the pg driver, HTTP/socket writes, GC, the rest). Usage:
//   node --import tsx bench/cpuprofile-kinds.ts <file.cpuprofile> [fromS toS]
// (the window in seconds from the profile's start; the failover bench's standby profile covers its standby wait too).
import { readFileSync } from 'node:fs';

interface Node {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly Node[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
}

const [file, fromArg, toArg] = process.argv.slice(2);
if (file === undefined) throw new Error('usage: cpuprofile-kinds.ts <file.cpuprofile> [fromS toS]');
const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

/** A request handler of the authority (its method names), innermost first wins. */
const handlers: ReadonlyArray<readonly [RegExp, string, RegExp?]> = [
  // the handlers live in authority-runtime.ts / authority-report.ts since decision 0680's split, declared as functions
  // so the profile names them (tsx wraps an arrow function in `__name(…)`, where V8 infers no name); the three machine
  // requests share `machineRequest` (past its first `await` their own frames are gone)
  [/^machineRequest$/, 'machine.* (heartbeat, register, auth)', /authority-runtime\.ts/],
  [/^serveBind$/, 'runtime.bind', /authority-runtime\.ts/],
  [/^serveSessionOpen$/, 'session.open', /authority-runtime\.ts/],
  [/^openConfigStream$/, 'config.stream (open)', /authority-runtime\.ts/],
  [/^(produceNow|produceFor|produce|produceNetwork)$/, 'snapshot production', /authority-production\.ts/],
  [/^deliver$/, 'snapshot delivery', /authority-streams\.ts/],
  [/^(serveReportReplace|serveReportHead)$/, 'report.*', /authority-report\.ts/],
  [/^serveSnapshotAck$/, 'snapshot.ack', /authority-report\.ts/],
];
/** Shared work, by the innermost matching frame (checked when no handler is on the stack). */
const shared: ReadonlyArray<readonly [RegExp, string]> = [
  [/^\(garbage collector\)$/, 'GC'],
  [/^(verifyOneShot|signOneShot|verify|sign)$/, 'Ed25519 verify/sign'],
  [/node_modules\/pg(-protocol|-pool)?\/|adapter\/postgresql\//, 'pg driver and adapter'],
  [/^(writev|writeBuffer|writeGeneric|_writeGeneric)$/, 'socket writes'],
  [/^(parserOnHeadersComplete|parserOnBody|parserOnMessageComplete|onParserExecute|resOnFinish)$/, 'HTTP parse'],
  [/cbor-canonical|domain\/(codec|reader|writer|bytes)\.ts/, 'CBOR'],
  [/transport\//, 'transport (envelope, routes)'],
];

const from = fromArg === undefined ? 0 : Number(fromArg) * 1e6;
const to = toArg === undefined ? Number.POSITIVE_INFINITY : Number(toArg) * 1e6;
const total = new Map<string, number>();
let t = 0;
let busy = 0;
for (let i = 0; i < p.samples.length; i++) {
  t += p.timeDeltas[i] ?? 0;
  if (t < from || t > to) continue;
  const dt = p.timeDeltas[i + 1] ?? 0; // the sample's weight: the time until the next one
  const leaf = byId.get(p.samples[i] as number);
  if (leaf === undefined) continue;
  const name = leaf.callFrame.functionName;
  if (name === '(idle)' || name === '(program)') {
    total.set(name, (total.get(name) ?? 0) + dt);
    continue;
  }
  busy += dt;
  let charged: string | null = null;
  let sharedHit: string | null = null;
  for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
    const f = (byId.get(id) as Node).callFrame;
    const h = handlers.find(([re, , url]) => re.test(f.functionName) && (url === undefined || url.test(f.url)));
    if (h !== undefined) {
      charged = h[1];
      break;
    }
    if (sharedHit === null) {
      const s = shared.find(([re]) => re.test(f.functionName) || re.test(f.url));
      if (s !== undefined) sharedHit = s[1];
    }
  }
  const key = charged ?? `shared: ${sharedHit ?? 'other'}`;
  total.set(key, (total.get(key) ?? 0) + dt);
}
const rows = [...total.entries()].sort((a, b) => b[1] - a[1]);
process.stdout.write(`non-idle ${(busy / 1e6).toFixed(2)} s of samples\n`);
for (const [k, us] of rows)
  process.stdout.write(
    `${k.padEnd(40)} ${(us / 1e6).toFixed(2).padStart(7)} s ${k.startsWith('(') ? '' : `${((100 * us) / busy).toFixed(1).padStart(5)} %`}\n`,
  );

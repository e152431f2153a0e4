// kos-kernel identity bench (issue 17): argon2id cost per login (@node-rs/argon2, the chosen implementation, against
// @noble/hashes' pure-JS argon2id with the same OWASP parameters), a whole login against one verification, and one
// audit append (Audits on the control-plane database: Effect, Clock, JSON object, WAL + synchronous=FULL) against a bare
// better-sqlite3 insert of a row of the same size into the same file, interleaved, in the same run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { argon2id as nobleArgon2id } from '@noble/hashes/argon2.js';
import { Effect, Layer, ManagedRuntime } from 'effect';
import {
  Audits,
  bootstrapOwner,
  ControlPlaneDb,
  Identity,
  IdentityModuleLive,
  OWASP_ARGON2ID,
  OwnedObjects,
  PasswordHasher,
} from '../src/index.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const N_AUDIT = Number(process.env['BENCH_N'] ?? 2000);
const N_HASH = Number(process.env['BENCH_HASH_N'] ?? 20);
const dir = mkdtempSync(join(tmpdir(), 'kos-identity-bench-'));
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
};
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

try {
  const owned = Layer.succeed(OwnedObjects, { ownedBy: () => Effect.succeed([]) });
  const runtime = ManagedRuntime.make(IdentityModuleLive({ path: join(dir, 'cp.db') }).pipe(Layer.provide(owned)));
  const hasher = await runtime.runPromise(PasswordHasher);
  const password = 'correct horse battery staple';
  const digest = await runtime.runPromise(hasher.hash(password));

  // argon2id: chosen implementation vs @noble/hashes, same parameters
  const salt = new Uint8Array(16).fill(7);
  const native: number[] = [];
  const noble: number[] = [];
  for (let i = 0; i < N_HASH; i++) {
    let t0 = process.hrtime.bigint();
    await runtime.runPromise(hasher.verify(digest, password));
    native.push(ms(t0));
    if (i < Math.max(3, N_HASH / 5)) {
      t0 = process.hrtime.bigint();
      nobleArgon2id(password, salt, { m: OWASP_ARGON2ID.memoryKiB, t: OWASP_ARGON2ID.iterations, p: 1, dkLen: 32 });
      noble.push(ms(t0));
    }
  }
  const p = OWASP_ARGON2ID;
  print(
    `argon2id m=${p.memoryKiB} KiB t=${p.iterations} p=${p.parallelism} (OWASP), median of ${N_HASH}/${noble.length}:`,
  );
  print(`  @node-rs/argon2 verify      ${median(native).toFixed(1)} ms  (off the event loop)`);
  print(`  @noble/hashes argon2id      ${median(noble).toFixed(1)} ms  (blocks the event loop)`);
  print(`  ratio noble / node-rs       ${(median(noble) / median(native)).toFixed(1)}x`);

  // a whole login (lockout read, account read, one verification, session insert) vs the verification alone
  const boot = await runtime.runPromise(bootstrapOwner());
  const logins: number[] = [];
  for (let i = 0; i < N_HASH; i++) {
    const t0 = process.hrtime.bigint();
    await runtime.runPromise(
      Effect.flatMap(Identity, (id) => id.login({ name: 'owner', password: boot?.oneTimePassword ?? '' })),
    );
    logins.push(ms(t0));
  }
  print(
    `login (whole use case)        ${median(logins).toFixed(1)} ms; argon2id share ${((100 * median(native)) / median(logins)).toFixed(0)} %`,
  );

  // audit append vs a bare insert into the same database file
  const audits = await runtime.runPromise(Audits);
  const cp = await runtime.runPromise(ControlPlaneDb);
  const bare = await runtime.runPromise(
    cp.use((db) => {
      db.exec(
        'CREATE TABLE IF NOT EXISTS bench_bare (seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER, actor TEXT, verb TEXT, object TEXT, result TEXT, source TEXT)',
      );
      return db.prepare('INSERT INTO bench_bare (at, actor, verb, object, result, source) VALUES (?, ?, ?, ?, ?, ?)');
    }),
  );
  const object = { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: 'apps', name: 'wiki' };
  const objectJson = JSON.stringify(object);
  const entry = { actor: 'alice', verb: 'create', object, result: 'accepted' as const, source: 'api' };
  const append = audits.append(entry);
  let bareMs = 0;
  let auditMs = 0;
  const rounds = 5;
  const per = Math.max(1, Math.floor(N_AUDIT / rounds));
  for (let r = 0; r < rounds; r++) {
    let t0 = process.hrtime.bigint();
    for (let i = 0; i < per; i++) bare.run(Date.now(), 'alice', 'create', objectJson, 'accepted', 'api');
    bareMs += ms(t0);
    t0 = process.hrtime.bigint();
    for (let i = 0; i < per; i++) runtime.runSync(append);
    auditMs += ms(t0);
  }
  const n = per * rounds;
  print(`audit append (${n} each, WAL + synchronous=FULL, interleaved in ${rounds} rounds):`);
  print(`  bare better-sqlite3 insert  ${((1000 * bareMs) / n).toFixed(1)} µs`);
  print(`  Audits.append               ${((1000 * auditMs) / n).toFixed(1)} µs`);
  print(`  ratio append / bare insert  ${(auditMs / bareMs).toFixed(2)}`);
  await runtime.dispose();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

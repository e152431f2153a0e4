// Crash points of the runtime-generation and session rows (spec §5.1, §5.3, §3.4; M6-58) between real processes: nsd
// on a fresh PostgreSQL database and ns-daemons on temp SQLite files, each SIGKILLed at an injected point
// (ns-daemon `NS_FAULT=<point>` after a durable write and before the request; nsd `NSD_FAULT=<kind>` after the commit
// and before the reply). Evidence: B's rows (`runtime_binding`, `session_mark`), the daemons' /healthz and both JSON
// logs, and signed requests of a test client holding A's key (the wire an ns-daemon speaks) for the stale-seq checks.
// The lost-state row (runtime.floor → recovery bind) is `M6-11 M6-20 M6-61 lost daemon state …` in pair.e2e.test.ts.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import { Effect, Either } from 'effect';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { type Message, decodeMessage, encodeMessage, fromHex } from '@homelab/service-control';
import { ReplayCache, postUnary, signerFromPem, trustOnly } from '@homelab/service-control/transport';
import { type Proc, healthz, processWorkspace, startNs, startNsd, until } from './processes.js';

const db = useDatabase('nsd_crash');
const ws = processWorkspace('nsd-crash');

/** One daemon identity per test, in its own Network, publishing one declaration. */
const daemon = (name: string) => {
  const id = ws.identity(name);
  writeFileSync(
    join(ws.dir, `${name}.json`),
    JSON.stringify([{ key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8080 }]),
  );
  return { ...id, name, net: randomBytes(16).toString('hex') };
};
type Daemon = ReturnType<typeof daemon>;
type Nsd = Awaited<ReturnType<typeof startNsd>>;

/** nsd for `members`, on `port` when given (a restart on the daemons' known URL), optionally with NSD_FAULT. */
const nsdFor = async (
  members: readonly Daemon[],
  opts: { readonly port?: number; readonly fault?: string } = {},
): Promise<Nsd> => {
  const n = await startNsd(
    ws,
    db,
    members.map((m) => `${m.hex}:${m.net}`),
    {
      ...(opts.port === undefined ? {} : { NSD_PORT: String(opts.port) }),
      ...(opts.fault === undefined ? {} : { NSD_FAULT: opts.fault }),
    },
  );
  return n;
};
const nsFor = (nsd: Nsd, who: Daemon, fault?: string) =>
  startNs(ws, nsd, who, who.name, who.net, fault === undefined ? {} : { NS_FAULT: fault });
const nsPort = async (p: Proc) => (await p.waitFor((x) => x['event'] === 'listening'))['port'] as number;
const streaming = (port: number, extra: (h: Record<string, unknown>) => boolean = () => true) =>
  until(
    () => healthz(port),
    (h) => h['phase'] === 'streaming' && Number(h['acks']) >= 1 && extra(h),
    90_000,
  );
const stop = async (p: Proc) => {
  p.child.kill('SIGTERM');
  expect((await p.exited).code).toBe(0);
};
const events = (p: Proc, event: string) => p.lines.filter((l) => l['event'] === event);

let c: pg.Client;
beforeAll(async () => {
  c = new pg.Client(db.config);
  await c.connect();
  ws.closers.push(() => c.end());
});
type BindingRow = { generation: string; runtime_id: Buffer };
const bindings = async (who: Daemon) =>
  (
    await c.query(`SELECT generation, runtime_id FROM service_control.runtime_binding WHERE identity = $1`, [
      Buffer.from(who.hex, 'hex'),
    ])
  ).rows as BindingRow[];
type MarkRow = { generation: string; runtime_id: Buffer; seq: string; epoch: string };
const marks = async (who: Daemon) =>
  (
    await c.query(`SELECT generation, runtime_id, seq, epoch FROM service_control.session_mark WHERE identity = $1`, [
      Buffer.from(who.hex, 'hex'),
    ])
  ).rows as MarkRow[];

/**
 * A signed session.open of A's identity (its key file) for the given instance and seq, sent once to nsd: the error
 * code, or `accepted`. A stand-in for a stale ns-daemon instance or a late retransmission of an old attempt.
 */
const sessionOpenAs = async (
  nsd: Nsd,
  who: Daemon,
  instance: { generation: bigint; runtimeId: Uint8Array; epoch: bigint },
  seq: bigint,
): Promise<string> => {
  const signer = signerFromPem(readFileSync(who.keyFile, 'utf8'));
  const m = {
    schema: 1,
    kind: 'session.open',
    nsd_id: fromHex(nsd.nsdId),
    network_id: fromHex(who.net),
    subject_identity: signer.machineId,
    runtime_generation: instance.generation,
    runtime_id: instance.runtimeId,
    authority_epoch: instance.epoch,
    request_id: new Uint8Array(randomBytes(16)),
    body: {},
    session_seq: seq,
  } as unknown as Message;
  const side = { signer, trust: trustOnly(fromHex(nsd.key)), replay: new ReplayCache() };
  const r = decodeMessage(
    await Effect.runPromise(postUnary(side, `${nsd.url}/v1/rpc`, encodeMessage(m), { attempts: 1 })),
  );
  if (Either.isLeft(r)) throw r.left;
  return r.right.kind === 'error'
    ? (r.right.body as { error: string }).error
    : r.right.kind === 'session.open.result'
      ? 'accepted'
      : r.right.kind;
};

describe('M6-58 crash points of the runtime and session rows (real processes)', () => {
  it('M6-58 M6-8 M6-11 ns-daemon SIGKILLed after persisting its new generation, before runtime.bind: the restart persists generation+1 again (the spent one is never reused), B binds it; a crash after persisting a recovering generation retries that same generation', async () => {
    const A = daemon('gen');
    const nsd = await nsdFor([A]);
    // a fresh identity: no record → runtime.floor → generation 1 persisted as `recovering` → crash before the bind
    const r1 = nsFor(nsd, A, 'after-persist-generation');
    expect(await r1.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(events(r1, 'fault')).toMatchObject([{ point: 'after-persist-generation' }]);
    expect(await bindings(A)).toEqual([]); // floor is read-only: B knows no instance
    // the restart retries the recovering generation unchanged (§5.1 step 4: no repeated self-increment)
    const r2 = nsFor(nsd, A);
    const h2 = await streaming(await nsPort(r2));
    expect(h2['generation']).toBe('1');
    await stop(r2);
    expect((await bindings(A)).map((b) => b.generation)).toEqual(['1']);

    // normal start: generation 2 persisted, crash before runtime.bind → B still has generation 1
    const r3 = nsFor(nsd, A, 'after-persist-generation');
    expect(await r3.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(events(r3, 'bound')).toEqual([]);
    expect((await bindings(A)).map((b) => b.generation)).toEqual(['1']);
    // the restart persists 3 (2 was spent by the crashed start, never sent and never reused) and B binds 3
    const r4 = nsFor(nsd, A);
    const h4 = await streaming(await nsPort(r4));
    expect([h4['generation'], h4['epoch']]).toEqual(['3', String(nsd.epoch)]);
    expect(events(r4, 'bound')).toMatchObject([{ generation: '3' }]);
    const [b4] = await bindings(A);
    expect(b4?.generation).toBe('3');
    expect((await marks(A)).map((m) => [m.generation, m.runtime_id.equals(b4!.runtime_id)])).toEqual([['3', true]]);
    await stop(r4);
    await stop(nsd.proc);
  });

  it("M6-58 M6-9 M6-8 nsd SIGKILLed after committing runtime.bind, before the reply: the restarted nsd (new epoch) gets the daemon's retry of the same generation and id → bound once, one consistent binding row", async () => {
    const A = daemon('bind');
    const nsd1 = await nsdFor([A]);
    const r1 = nsFor(nsd1, A);
    expect((await streaming(await nsPort(r1)))['generation']).toBe('1');
    await stop(r1);
    await stop(nsd1.proc);

    const faulty = await nsdFor([A], { port: nsd1.port, fault: 'runtime.bind' });
    const r2 = nsFor(faulty, A);
    const p2 = await nsPort(r2);
    await faulty.proc.waitFor((l) => l['event'] === 'fault');
    expect(await faulty.proc.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // committed, the reply never left: B holds generation 2 with the daemon's runtime id
    const committed = await bindings(A);
    expect(committed.map((b) => b.generation)).toEqual(['2']);
    expect(events(r2, 'bound')).toEqual([]);

    const nsd2 = await nsdFor([A], { port: nsd1.port });
    expect(nsd2.epoch).toBe(faulty.epoch + 1n);
    const h2 = await streaming(p2, (h) => h['epoch'] === String(nsd2.epoch));
    // the retry re-sent the same (generation, runtime_id): idempotent at B, no second generation spent
    expect(h2['generation']).toBe('2');
    expect(events(r2, 'bound')).toMatchObject([{ generation: '2', epoch: String(nsd2.epoch) }]);
    const after = await bindings(A);
    expect(after).toHaveLength(1);
    expect([after[0]?.generation, after[0]?.runtime_id.equals(committed[0]!.runtime_id)]).toEqual(['2', true]);
    expect((await marks(A)).map((m) => [m.generation, m.runtime_id.equals(committed[0]!.runtime_id), m.epoch])).toEqual(
      [['2', true, String(nsd2.epoch)]],
    );
    expect(nsd2.proc.lines.some((l) => l['event'] === 'refused' && l['code'] === 'stale-runtime')).toBe(false);
    await stop(r2);
    await stop(nsd2.proc);
  });

  it('M6-58 M6-11 nsd SIGKILLed after committing a recovery-mode runtime.bind, before the reply: the retry re-sends the same recovery bind (same generation, id and floor request) → idempotent, never refused against its own live instance', async () => {
    const A = daemon('recover');
    const faulty = await nsdFor([A], { fault: 'runtime.bind' });
    // a fresh identity: runtime.floor → generation 1 persisted as `recovering` → recovery bind committed → crash
    const r1 = nsFor(faulty, A);
    const p1 = await nsPort(r1);
    await faulty.proc.waitFor((l) => l['event'] === 'fault');
    expect(await faulty.proc.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const committed = await bindings(A);
    expect(committed.map((b) => b.generation)).toEqual(['1']);

    const nsd2 = await nsdFor([A], { port: faulty.port });
    const h = await streaming(p1, (x) => x['epoch'] === String(nsd2.epoch));
    expect(h['generation']).toBe('1');
    // a new floor + generation 2 would have been refused for 30 s against the committed, live generation 1
    expect(r1.lines.some((l) => l['event'] === 'retry' && l['error'] === 'runtime-recovery-required')).toBe(false);
    const after = await bindings(A);
    expect([after.length, after[0]?.generation, after[0]?.runtime_id.equals(committed[0]!.runtime_id)]).toEqual([
      1,
      '1',
      true,
    ]);
    await stop(r1);
    await stop(nsd2.proc);
  });

  it("M6-58 M6-13 ns-daemon SIGKILLed after reserving its session seq, before session.open: the restart reserves a higher seq, B accepts it, and the reserved seq (or an old instance's session, however high) is refused later", async () => {
    const A = daemon('seq');
    const nsd = await nsdFor([A]);
    const r1 = nsFor(nsd, A);
    expect((await streaming(await nsPort(r1)))['sessionSeq']).toBe('1');
    await stop(r1);
    const [old] = await bindings(A);

    // generation 2 bound, seq 2 reserved durably, crash before session.open: B's mark stays at generation 1, seq 1
    const r2 = nsFor(nsd, A, 'after-reserve-session');
    expect(await r2.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(events(r2, 'fault')).toMatchObject([{ point: 'after-reserve-session' }]);
    expect(events(r2, 'bound')).toMatchObject([{ generation: '2' }]);
    expect((await marks(A)).map((m) => [m.generation, m.seq])).toEqual([['1', '1']]);

    const r3 = nsFor(nsd, A);
    const h3 = await streaming(await nsPort(r3));
    expect([h3['generation'], h3['sessionSeq']]).toEqual(['3', '3']);
    const [cur] = await bindings(A);
    expect((await marks(A)).map((m) => [m.generation, m.seq, m.runtime_id.equals(cur!.runtime_id)])).toEqual([
      ['3', '3', true],
    ]);

    // the reserved-but-never-sent seq 2, sent late by the current instance: fenced by the higher accepted seq
    const now = { generation: 3n, runtimeId: new Uint8Array(cur!.runtime_id), epoch: nsd.epoch };
    expect(await sessionOpenAs(nsd, A, now, 2n)).toBe('stale-session');
    // the replaced instance (generation 1) never comes back, however high its seq
    expect(
      await sessionOpenAs(
        nsd,
        A,
        { generation: 1n, runtimeId: new Uint8Array(old!.runtime_id), epoch: nsd.epoch },
        1000n,
      ),
    ).toBe('stale-runtime');
    // nothing changed: the daemon's session is still the current one
    expect((await marks(A)).map((m) => [m.generation, m.seq])).toEqual([['3', '3']]);
    expect((await healthz(await nsPort(r3)))['sessionSeq']).toBe('3');
    await stop(r3);
    await stop(nsd.proc);
  });

  it('M6-58 M6-13 M6-12 nsd SIGKILLed after committing session.open, before the reply: the restarted nsd (new epoch) → the daemon re-binds the same instance, opens a higher seq, B accepts; the committed seq is refused later', async () => {
    const A = daemon('open');
    const faulty = await nsdFor([A], { fault: 'session.open' });
    const r1 = nsFor(faulty, A);
    const p1 = await nsPort(r1);
    await faulty.proc.waitFor((l) => l['event'] === 'fault');
    expect(await faulty.proc.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // committed at B, the reply never reached the daemon
    const committed = await marks(A);
    expect(committed.map((m) => [m.generation, m.seq, m.epoch])).toEqual([['1', '1', String(faulty.epoch)]]);
    expect(events(r1, 'session-open')).toEqual([]);

    const nsd2 = await nsdFor([A], { port: faulty.port });
    expect(nsd2.epoch).toBe(faulty.epoch + 1n);
    const h = await streaming(p1, (x) => x['epoch'] === String(nsd2.epoch));
    // the same instance (generation 1, same runtime id) under the new epoch, in a session above the committed one
    expect(h['generation']).toBe('1');
    const seq = BigInt(h['sessionSeq'] as string);
    expect(seq > 1n).toBe(true);
    const [b] = await bindings(A);
    expect(b?.runtime_id.equals(committed[0]!.runtime_id)).toBe(true);
    expect((await marks(A)).map((m) => [m.generation, m.seq, m.epoch])).toEqual([
      ['1', String(seq), String(nsd2.epoch)],
    ]);
    // the committed-but-unanswered session 1 is fenced, in the new epoch as in the old one
    const inst = { generation: 1n, runtimeId: new Uint8Array(b!.runtime_id) };
    expect(await sessionOpenAs(nsd2, A, { ...inst, epoch: nsd2.epoch }, 1n)).toBe('stale-session');
    expect(await sessionOpenAs(nsd2, A, { ...inst, epoch: faulty.epoch }, seq + 1n)).toBe('stale-epoch');
    expect((await marks(A)).map((m) => m.seq)).toEqual([String(seq)]);
    await stop(r1);
    await stop(nsd2.proc);
  });

  it('M6-58 M6-23 nsd SIGKILLed after committing a snapshot.ack in its one round trip (decision 0198), before the reply: the ACK row is durable, the restarted nsd (new epoch) fences the old session and the daemon ACKs its snapshot again in a new session', async () => {
    const A = daemon('ack');
    const faulty = await nsdFor([A], { fault: 'snapshot.ack' });
    const r1 = nsFor(faulty, A);
    const p1 = await nsPort(r1);
    await faulty.proc.waitFor((l) => l['event'] === 'fault');
    expect(await faulty.proc.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // committed at B (a valid first ACK: the one-statement path), the reply never reached the daemon
    const acks = async () =>
      (
        await c.query(
          `SELECT session_seq::text AS q, revision::text AS r, accepted FROM service_control.ack WHERE target = $1 ORDER BY 1, 2`,
          [Buffer.from(A.hex, 'hex')],
        )
      ).rows as { q: string; r: string; accepted: boolean }[];
    const before = await acks();
    expect(before).toHaveLength(1);
    expect(before[0]).toMatchObject({ q: '1', accepted: true });
    expect(events(r1, 'snapshot-acked')).toEqual([]);

    const nsd2 = await nsdFor([A], { port: faulty.port });
    expect(nsd2.epoch).toBe(faulty.epoch + 1n);
    const h = await streaming(p1, (x) => x['epoch'] === String(nsd2.epoch));
    const seq = BigInt(h['sessionSeq'] as string);
    expect(seq > 1n).toBe(true);
    // the new session's ACK is recorded; the old session's records went with the new session mark (decision 0191)
    const after = await until(acks, (rows) => rows.some((r) => r.q === String(seq)));
    expect(after.every((r) => r.q === String(seq) && r.accepted)).toBe(true);
    expect(
      nsd2.proc.lines.some(
        (l) =>
          l['event'] === 'refused' &&
          l['kind'] === 'snapshot.ack' &&
          l['code'] !== 'stale-epoch' &&
          l['code'] !== 'stale-session',
      ),
    ).toBe(false);
    await stop(r1);
    await stop(nsd2.proc);
  });
});

// Node registration (spec §3.13, decision 0272) between real processes: nsd on the test's PostgreSQL database and an
// ns-daemon. The daemon registers `node_local_names.v1` before runtime.bind (and again at every re-bind after an nsd
// restart); nsd stores the capabilities. A registration with the legacy `requested_hostname`, signed by a member and
// sent to the real nsd, is refused with `unsupported-field` and stores nothing; a non-member is `unauthorized`.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MachineHeartbeatResultCodec, NodeRegisterRequestCodec } from '@homelab/service-control';
import { ReplayCache, postUnary, signerFromPem, trustOnly } from '@homelab/service-control/transport';
import { sqlOn, useDatabase } from '@homelab/testbed/vitest';
import { Effect } from 'effect';
import { describe, expect, it } from 'vitest';
import { healthz, processWorkspace, startNs, startNsd, until } from './processes.js';

const db = useDatabase('nsd_node_reg');
const { dir, procs, identity } = processWorkspace('nsd-node-reg');
const ws = { dir, procs };
const sql = sqlOn(db);

const NET = randomBytes(16).toString('hex');
const a = identity('a');
const b = identity('b');
const outsider = identity('outsider');
writeFileSync(join(dir, 'a.json'), JSON.stringify([]));

const capabilitiesOf = async (who: { hex: string }) =>
  (
    await sql(
      `SELECT capabilities FROM service_control.node_registration WHERE identity = decode('${who.hex}', 'hex') AND network_id = decode('${NET}', 'hex')`,
    )
  ).map((r) => r['capabilities']);

/** A signed node.register from `who` straight to nsd (the library's transport client): B's answer. */
const register = async (
  nsd: { readonly url: string; readonly key: string },
  who: { readonly keyFile: string },
  body: { readonly capabilities: readonly string[]; readonly requested_hostname?: string },
) => {
  const side = {
    signer: signerFromPem(readFileSync(who.keyFile, 'utf8')),
    trust: trustOnly(new Uint8Array(Buffer.from(nsd.key, 'hex'))),
    replay: new ReplayCache(),
  };
  const payload = NodeRegisterRequestCodec.encodeOrThrow({
    network_id: new Uint8Array(Buffer.from(NET, 'hex')),
    ...body,
  });
  const answer = await Effect.runPromise(postUnary(side, `${nsd.url}/v1/node.register`, payload));
  return MachineHeartbeatResultCodec.decodeOrThrow(answer);
};

describe('node registration between nsd and ns-daemon (§3.13)', () => {
  it('§3.13 the daemon registers node_local_names.v1 before runtime.bind, nsd stores it; the re-bind of the same process after an nsd restart does not repeat it (decision 0520) and the stored registration survives', async () => {
    const nsd = await startNsd(ws, db, [`${a.hex}:${NET}`, `${b.hex}:${NET}`]);
    const ns = startNs(ws, nsd, a, 'a', NET);
    const reg = await ns.waitFor((l) => l['event'] === 'node-registered');
    const bound = await ns.waitFor((l) => l['event'] === 'bound');
    expect(ns.lines.indexOf(reg)).toBeLessThan(ns.lines.indexOf(bound));
    expect(reg['capabilities']).toEqual(['node_local_names.v1']);
    expect(await capabilitiesOf(a)).toEqual([['node_local_names.v1']]);
    // nsd restarts on the same port (a new epoch): the same daemon process re-binds without registering again
    // (decision 0520); the registration stays stored across the restart
    const port = (await ns.waitFor((l) => l['event'] === 'listening'))['port'] as number;
    await until(
      () => healthz(port),
      (h) => h['phase'] === 'streaming',
    );
    nsd.proc.child.kill('SIGTERM');
    await nsd.proc.exited;
    const nsd2 = await startNsd(ws, db, [`${a.hex}:${NET}`, `${b.hex}:${NET}`], { NSD_PORT: String(nsd.port) });
    expect(nsd2.epoch).toBeGreaterThan(nsd.epoch);
    await until(
      async () => ns.lines.filter((l) => l['event'] === 'bound').length,
      (n) => n >= 2,
    );
    await until(
      () => healthz(port),
      (h) => h['phase'] === 'streaming',
    );
    expect(ns.lines.filter((l) => l['event'] === 'node-registered')).toHaveLength(1);
    expect(await capabilitiesOf(a)).toEqual([['node_local_names.v1']]);
    ns.child.kill('SIGTERM');
    nsd2.proc.child.kill('SIGTERM');
    await Promise.all([ns.exited, nsd2.proc.exited]);
  });

  it('§3.13 a registration with the legacy requested_hostname is refused by nsd with unsupported-field and stores nothing; the same without it is stored; a non-member is unauthorized', async () => {
    const nsd = await startNsd(ws, db, [`${a.hex}:${NET}`, `${b.hex}:${NET}`]);
    expect(
      await register(nsd, b, { capabilities: ['node_local_names.v1'], requested_hostname: 'legacy-node-b' }),
    ).toEqual({ accepted: false, error: 'unsupported-field' });
    expect(await capabilitiesOf(b)).toEqual([]);
    expect(await register(nsd, b, { capabilities: ['node_local_names.v1'] })).toEqual({ accepted: true, error: null });
    expect(await capabilitiesOf(b)).toEqual([['node_local_names.v1']]);
    expect(await register(nsd, outsider, { capabilities: ['node_local_names.v1'] })).toEqual({
      accepted: false,
      error: 'unauthorized',
    });
    expect(await capabilitiesOf(outsider)).toEqual([]);
  });
});

// A's endpoint table on SQLite (temp files) and the PortArbiter over it: durability, corruption, and SIGKILL between
// the MayInstall commit and the install call (M6-38).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteEndpointStore } from '../src/adapter/sqlite/endpoint-store.js';
import { PortArbiter, SimulatedListenerInstaller, portResultBody } from '../src/application/port-arbiter.js';
import { ServiceControlError } from '../src/domain/errors.js';
import { endpointOf, registerProposal } from '../src/domain/port-endpoint.js';
import { fromHex } from '../src/domain/bytes.js';
import { PortResultBody } from '../src/api/port.js';
import { PUB, proposal, sref } from './port-fixtures.js';
import { ok } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'ns-endpoint-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const file = () => join(dir, `state-${n++}.db`);

const crashChild = (f: string, killAt: string) => {
  const marker = `${f}.installed`;
  const r = spawnSync(
    process.execPath,
    ['--import', 'tsx', join(import.meta.dirname, 'fixtures/endpoint-crash.ts'), f, killAt, marker],
    {
      encoding: 'utf8',
      cwd: join(import.meta.dirname, '..'),
    },
  );
  const id = fromHex((JSON.parse(r.stdout.split('\n')[0] as string) as { id: string }).id);
  return { r, installCalled: existsSync(marker), ref: proposal(sref(1), 40001n, 3n, { proposalId: id }) };
};

describe('A: endpoint table on SQLite', () => {
  it('opens in WAL with synchronous=FULL; every record survives a reopen exactly', async () => {
    const f = file();
    const s = openSqliteEndpointStore(f);
    expect(s.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(s.db.pragma('synchronous', { simple: true })).toBe(2);
    const inst = new SimulatedListenerInstaller();
    const a = new PortArbiter(s, inst);
    const p = proposal(sref(1), 40010n, 2n);
    const answers = await a.onProposal(PUB, p);
    expect(answers.map((x) => x.result)).toEqual(['installed']);
    const fenced = proposal(sref(2), 40011n, 7n);
    expect((await a.onCancel(PUB, fenced)).result).toBe('terminated-pure');
    const before = s.read();
    s.close();
    const r = openSqliteEndpointStore(f);
    expect(r.read()).toEqual(before);
    expect(endpointOf(r.read(), PUB, 40010n).phase).toBe('installed-closed');
    r.close();
  });

  it('M6-38 SIGKILL between the MayInstall commit and the install call: after restart the P is owned, never purely released', async () => {
    const f = file();
    const { r, installCalled, ref } = crashChild(f, 'before-install');
    expect(r.signal).toBe('SIGKILL');
    expect(installCalled).toBe(false); // the kill came before the install call …
    const s = openSqliteEndpointStore(f);
    const ep = endpointOf(s.read(), PUB, 40001n);
    expect(ep.phase).toBe('may-install'); // … and MayInstall was already durable
    expect(ep.owner).toEqual(sref(1));
    const inst = new SimulatedListenerInstaller();
    const a = new PortArbiter(s, inst);
    // port.query: possibly installed, not absent
    expect(a.onQuery(PUB, ref).result).toBe('claimed');
    // recovery reinstalls the same resource with the gate closed
    await a.recover();
    expect(inst.calls).toEqual([{ op: 'install', port: 40001n }]);
    expect(endpointOf(s.read(), PUB, 40001n).phase).toBe('installed-closed');
    // a cancel now tombstones (never terminated-pure); another service never gets the P
    const c = await a.onCancel(PUB, ref);
    expect(c.result).toBe('installed');
    expect(c.terminationFloor).toBeNull();
    expect(endpointOf(s.read(), PUB, 40001n).phase).toBe('tombstoned');
    const other = await a.onProposal(PUB, proposal(sref(2, 2), 40001n));
    expect(other.map((x) => x.result)).toEqual(['conflict']);
    s.close();
  }, 60_000);

  it('M6-38 M6-40 SIGKILL right after the Proposed commit: the proposal is registered but not owned; a cancel fences it purely', async () => {
    const f = file();
    const { r, installCalled, ref } = crashChild(f, 'proposed');
    expect(r.signal).toBe('SIGKILL');
    expect(installCalled).toBe(false);
    const s = openSqliteEndpointStore(f);
    const a = new PortArbiter(s, new SimulatedListenerInstaller());
    expect(a.onQuery(PUB, ref).result).toBe('proposed');
    const c = await a.onCancel(PUB, ref);
    expect(c.result).toBe('terminated-pure');
    expect(PortResultBody.encode(portResultBody(c))._tag).toBe('Right');
    // the late original snapshot is refused by the fence, the proof is re-sent
    expect((await a.onProposal(PUB, ref)).map((x) => x.result)).toEqual(['terminated-pure']);
    s.close();
  }, 60_000);

  it('M6-40 M6-60 a corrupt or incomplete endpoint table cannot prove anything: state-inconsistent, nothing written', async () => {
    const f = file();
    const s = openSqliteEndpointStore(f);
    const a = new PortArbiter(s, new SimulatedListenerInstaller());
    await a.onProposal(PUB, proposal(sref(1), 40020n));
    const unknown = proposal(sref(3), 40021n, 4n);
    s.db.prepare("UPDATE port_proposal SET value = value || ' '").run();
    await expect(a.onCancel(PUB, unknown)).rejects.toSatisfy(
      (e: unknown) => e instanceof ServiceControlError && e.code === 'state-inconsistent',
    );
    s.db.prepare("UPDATE port_proposal SET checksum = 'x'").run();
    expect(() => a.onQuery(PUB, unknown)).toThrow(ServiceControlError);
    s.close();
    const g = file();
    const t = openSqliteEndpointStore(g);
    const b = new PortArbiter(t, new SimulatedListenerInstaller());
    await b.onProposal(PUB, proposal(sref(1), 40030n));
    t.db.prepare('DELETE FROM port_endpoint').run(); // a vanished row: the manifest disagrees
    await expect(b.onCancel(PUB, proposal(sref(4), 40031n))).rejects.toSatisfy(
      (e: unknown) => e instanceof ServiceControlError && e.code === 'state-inconsistent',
    );
    expect(t.db.prepare('SELECT count(*) FROM port_proposal').pluck().get()).toBe(1);
    t.close();
  });

  it('an install failure after MayInstall keeps the ownership and answers apply-failed', async () => {
    const s = openSqliteEndpointStore(file());
    const inst = new SimulatedListenerInstaller(new Set([22n]));
    inst.failNext = true;
    const a = new PortArbiter(s, inst);
    const p = proposal(sref(1), 40040n);
    expect((await a.onProposal(PUB, p)).map((x) => x.result)).toEqual(['apply-failed']);
    expect(endpointOf(s.read(), PUB, 40040n).owner).toEqual(sref(1));
    expect((await a.onCancel(PUB, p)).result).toBe('installed');
    // a system listener blocks MayInstall
    expect((await a.onProposal(PUB, proposal(sref(2), 22n))).map((x) => x.result)).toEqual(['conflict']);
    expect(ok(registerProposal(s.read(), PUB, proposal(sref(5), 40041n))).out.kind).toBe('registered');
    s.close();
  });
});

// End to end on loopback for `ns service retry-port` (decision 0128): NSD (fresh PostgreSQL database) and two
// ns-daemons as real processes; the CLI is the ns-daemon bin's `service retry-port` subcommand talking to its running
// daemon, which relays `service.retry-port` to NSD. B's first offer is not produced by NSD yet (issue 8 gap): the test
// writes it, and A's confirmation, through the PortAllocator on the same database under NSD's current epoch.
import { spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { uuidText } from '@homelab/service-control';
import { PortAllocator, proposalToWire } from '@homelab/service-control/application';
import { makePgAuthorityStore } from '@homelab/service-control/postgresql';
import { type Proc, healthz, start, until } from './processes.js';

const db = useDatabase('nsd_port');
const dir = mkdtempSync(join(tmpdir(), 'nsd-port-'));
const procs: Proc[] = [];
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of closers) await c();
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const NET = randomBytes(16).toString('hex');
const identity = (name: string) => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const keyFile = join(dir, `${name}.pem`);
  writeFileSync(keyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }));
  return { keyFile, hex: Buffer.from(privateKey.export({ format: 'jwk' }).x as string, 'base64url').toString('hex') };
};
const a = identity('a');
const b = identity('b');
writeFileSync(join(dir, 'a.json'), JSON.stringify([{ key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8080 }]));
writeFileSync(join(dir, 'b.json'), JSON.stringify([]));

/** Run `ns-daemon service retry-port …` (the bin's subcommand) and collect its exit code and output. */
const cli = (args: string[]): Promise<{ code: number | null; out: string }> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts', ...args], {
      cwd: join(import.meta.dirname, '../../ns-daemon'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });

describe('ns service retry-port against real processes', () => {
  it('M6-45 M6-47 the CLI asks the running daemon, which relays service.retry-port: refused while the proposal is unconfirmed, round+1 after, idempotent per request id, foreign daemon refused', async () => {
    const nsd = start('nsd', {
      NSD_PORT: '0',
      NSD_DB_HOST: db.host,
      NSD_DB_PORT: String(db.port),
      NSD_DB_USER: db.user,
      NSD_DB_NAME: db.database,
      NSD_KEY_FILE: join(dir, 'nsd.pem'),
      NSD_MEMBERS: `${a.hex}:${NET},${b.hex}:${NET}`,
    });
    procs.push(nsd);
    const l = await nsd.waitFor((x) => x['event'] === 'listening');
    const epoch = BigInt(l['epoch'] as string);
    const ns = (who: { keyFile: string }, name: string) => {
      const p = start('ns-daemon', {
        NS_NSD_URL: `http://127.0.0.1:${l['port'] as number}`,
        NS_NSD_KEY: l['nsd_key'] as string,
        NS_NETWORK: NET,
        NS_KEY_FILE: who.keyFile,
        NS_STATE_FILE: join(dir, `${name}.db`),
        NS_DECLARATIONS: join(dir, `${name}.json`),
        NS_PORT: '0',
      });
      procs.push(p);
      return p;
    };
    const na = ns(a, 'a');
    const nb = ns(b, 'b');
    const pa = (await na.waitFor((x) => x['event'] === 'listening'))['port'] as number;
    const pb = (await nb.waitFor((x) => x['event'] === 'listening'))['port'] as number;
    await until(() => healthz(pa), (h) => h['phase'] === 'streaming' && h['acceptedRevision'] === '1');
    await until(() => healthz(pb), (h) => h['phase'] === 'streaming');

    const c = new pg.Client(db.config);
    await c.connect();
    closers.push(() => c.end());
    const row = (await c.query(`SELECT s.service_id, s.network_id, a.nsd_id FROM service_control.service s, service_control.authority a WHERE s.publisher = $1`, [Buffer.from(a.hex, 'hex')])).rows[0] as Record<string, Buffer>;
    const ref = { nsdId: new Uint8Array(row['nsd_id'] as Buffer), networkId: new Uint8Array(row['network_id'] as Buffer), serviceId: new Uint8Array(row['service_id'] as Buffer) };
    const refText = `${uuidText(ref.nsdId)}/${uuidText(ref.networkId)}/${uuidText(ref.serviceId)}`;

    // B's offer (persisted under NSD's epoch), not confirmed yet
    const store = makePgAuthorityStore(db.config);
    closers.unshift(() => store.close());
    const alloc = new PortAllocator({ store, rng: Math.random, newProposalId: () => new Uint8Array(randomBytes(16)), intentDigestFor: () => new Uint8Array(32).fill(1) });
    const offered = await alloc.offer(epoch, ref, Buffer.from(a.hex, 'hex'), { mode: 'auto', requestedPort: null, backendPort: 8080n });
    if (Either.isLeft(offered) || offered.right.proposal === null) throw new Error('offer failed');
    const p = offered.right.proposal;

    const rid = randomUUID();
    const refused = await cli(['service', 'retry-port', refText, '--request-id', rid, `--port=${pa}`]);
    expect(refused.code).toBe(1);
    expect(refused.out).toContain('"error":"recovery-required"');

    // A's confirmation (as the daemon's port.result would carry it), then the owner's retry opens round 2
    const confirmed = await alloc.onResult(epoch, Buffer.from(a.hex, 'hex'), { ...proposalToWire(p), result: 'installed', termination_floor: null });
    expect(Either.isRight(confirmed)).toBe(true);
    const rid2 = randomUUID();
    const r1 = await cli(['service', 'retry-port', refText, '--request-id', rid2, `--port=${pa}`]);
    expect(r1.code).toBe(0);
    expect(r1.out).toContain(`"allocation_round":"2","proposal_seq":"${p.proposalSeq + 1n}"`);
    // the same request id again (after an uncertain result): the same answer, no second round
    const r2 = await cli(['service', 'retry-port', refText, '--request-id', rid2, `--port=${pa}`]);
    expect(r2.code).toBe(0);
    expect(r2.out).toContain(`"allocation_round":"2","proposal_seq":"${p.proposalSeq + 1n}"`);
    // another node's daemon relaying a retry for a's service: refused with the category only
    const foreign = await cli(['service', 'retry-port', refText, '--request-id', randomUUID(), `--port=${pb}`]);
    expect(foreign.code).toBe(1);
    expect(foreign.out).toContain('"error":"unauthorized","detail":null');
    // usage errors never reach the daemon
    expect((await cli(['service', 'retry-port', 'not-a-ref', '--request-id', rid])).code).toBe(2);
    expect(nsd.lines.some((x) => x['event'] === 'refused' && x['kind'] === 'service.retry-port' && x['code'] === 'recovery-required')).toBe(true);
  });
});

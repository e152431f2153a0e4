// The SCRAM PostgreSQL cluster's life outside a clean stop (decision 0420): `testbed status` logs in to it (TLS
// verified against the CA, scram-sha-256) and reports it ready or NOT READY like the other services; a cluster whose
// owner was SIGKILLed is found by the next start or `testbed down` and stopped and removed. Every cluster here is this
// file's own (the shared test bed's cluster is never stopped); the orphan is made under a temporary directory of
// this file's (TMPDIR), so the reaper this file calls sees only the file's clusters.
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Effect, Exit, Scope } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  clusterDirPrefix,
  processStartTime,
  reapOrphanedScramClusters,
  scramHealth,
  scramQuery,
  startStandaloneScramPostgres,
  type ScramPostgres,
} from '../src/scram-postgres.js';

const testbedDir = join(import.meta.dirname, '..');
const root = mkdtempSync(join(tmpdir(), 'testbed-scram-life-'));
chmodSync(root, 0o755); // the clusters' own directories inside are the postgres user's
const scope = Effect.runSync(Scope.make());
let live: ScramPostgres;

beforeAll(async () => {
  live = await Effect.runPromise(startStandaloneScramPostgres().pipe(Scope.extend(scope)));
}, 120_000);
afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void));
  reapOrphanedScramClusters(() => undefined, root); // only if a test failed half-way
  rmSync(root, { recursive: true, force: true });
}, 60_000);

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
const dataDirectory = async (cluster: ScramPostgres) =>
  String(
    (await scramQuery(cluster, "SELECT setting FROM pg_catalog.pg_settings WHERE name = 'data_directory'"))[0]?.[
      'setting'
    ],
  );

/** `testbed status` (the CLI as a process) on a state file naming this cluster; its SCRAM line. */
const statusLine = async (cluster: ScramPostgres) => {
  const stateFile = join(root, `state-${cluster.port}.json`);
  writeFileSync(
    stateFile,
    JSON.stringify({
      pid: process.pid, // alive: status then checks each service
      startedAt: new Date().toISOString(),
      dataDir: root,
      kube: {
        server: 'https://127.0.0.1:1',
        token: 't',
        caCert: cluster.caCert,
        kubeconfig: '/x',
        version: 'v',
        etcd: 'e',
      },
      controllerManager: { pid: 0, port: 1, healthz: 'https://127.0.0.1:1/healthz', controllers: [], version: 'v' },
      postgres: { host: '127.0.0.1', port: 5432, user: 'postgres', database: 'postgres', version: '15' },
      openbao: { available: false, reason: 'not in this test' },
      scramPostgres: { available: true, ...cluster },
    }),
  );
  const { stderr } = await promisify(execFile)(process.execPath, ['bin/testbed.mjs', 'status'], {
    cwd: testbedDir,
    env: { ...process.env, HOMELAB_TESTBED_STATE: stateFile },
    timeout: 90_000,
  });
  return stderr.split('\n').find((l) => l.startsWith('testbed: postgresql (scram-sha-256, TLS only):'));
};

describe('the SCRAM PostgreSQL cluster in `testbed status` and after a SIGKILLed owner (decision 0420)', () => {
  it('an orphaned cluster (its owner SIGKILLed) keeps running until the reaper stops it and removes its directory; clusters whose owner lives, or without an owner record, are left', async () => {
    const pkiDir = mkdtempSync(join(root, 'pki-'));
    const owner = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/scram-owner.ts', pkiDir], {
      cwd: testbedDir,
      env: { ...process.env, TMPDIR: root },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => owner.once('exit', resolve));
    let out = '';
    const orphan = await new Promise<ScramPostgres>((resolve, reject) => {
      owner.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        if (out.includes('\n')) resolve(JSON.parse(out.slice(0, out.indexOf('\n'))) as ScramPostgres);
      });
      owner.once('exit', (code) => reject(new Error(`the owner exited (${code}) before its cluster answered`)));
    });
    const dataDir = await dataDirectory(orphan);
    const clusterDir = join(dataDir, '..');
    expect(clusterDir.startsWith(join(root, clusterDirPrefix))).toBe(true);
    owner.kill('SIGKILL');
    await exited;
    // what a SIGKILLed test bed leaves: its cluster still serving
    expect(await scramHealth(orphan)).toMatchObject({ ready: true });
    // beside it: a directory being set up (no owner record yet) and the live cluster of this process (elsewhere)
    const settingUp = join(root, `${clusterDirPrefix}settingup`);
    mkdirSync(settingUp);

    const lines: string[] = [];
    const reaped = reapOrphanedScramClusters((l) => lines.push(l), root);

    expect(reaped).toEqual([clusterDir]);
    expect(lines.join('\n')).toContain(`pid ${owner.pid}`);
    expect(await portOpen(orphan.port)).toBe(false);
    expect(existsSync(clusterDir)).toBe(false);
    expect(existsSync(settingUp)).toBe(true);
    expect(await scramHealth(live)).toMatchObject({ ready: true });
    // a second pass finds nothing more to do
    expect(reapOrphanedScramClusters(() => undefined, root)).toEqual([]);
    rmSync(settingUp, { recursive: true });
    rmSync(pkiDir, { recursive: true, force: true });
  }, 180_000);

  it('an owner record naming a live pid that another process now holds (other start time) is an orphan; the live owner itself is not', () => {
    const record = (name: string, startTime: string | null) => {
      const dir = join(root, `${clusterDirPrefix}${name}`);
      mkdirSync(dir);
      writeFileSync(
        join(dir, 'owner.json'),
        JSON.stringify({ pid: process.pid, startTime, bin: '/nonexistent', asPostgres: false }),
      );
      return dir;
    };
    const mine = record('mine', processStartTime(process.pid) ?? null);
    const reused = record('reused', '1');
    expect(reapOrphanedScramClusters(() => undefined, root)).toEqual([reused]);
    expect(readdirSync(root).filter((n) => n.startsWith(clusterDirPrefix))).toEqual([`${clusterDirPrefix}mine`]);
    rmSync(mine, { recursive: true });
  });

  it('`testbed status` logs in to the cluster: ready while it answers, NOT READY with a wrong password, NOT READY once it is down', async () => {
    expect(await scramHealth(live)).toEqual({ ready: true, version: live.version });
    expect(await statusLine(live)).toMatch(new RegExp(`127\\.0\\.0\\.1:${live.port} .*: ready$`));

    const wrong = { ...live, password: `${live.password}x` };
    expect(await scramHealth(wrong)).toMatchObject({ ready: false, reason: expect.stringMatching(/^28P01: /) });
    expect(await statusLine(wrong)).toMatch(/: NOT READY \(28P01: /);

    await Effect.runPromise(Scope.close(scope, Exit.void)); // this file's cluster, never the shared one
    expect(await scramHealth(live)).toMatchObject({ ready: false, reason: expect.stringMatching(/ECONNREFUSED/) });
    expect(await statusLine(live)).toMatch(new RegExp(`127\\.0\\.0\\.1:${live.port} .*: NOT READY \\(ECONNREFUSED`));
  }, 180_000);
});

// The state file's schema: a state written before the SCRAM cluster existed (decision 0382) still decodes, so tests
// on a test bed started by older code fall back to a cluster of their own instead of failing to read the state.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import { readState } from '../src/state.js';

const dir = mkdtempSync(join(tmpdir(), 'testbed-state-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const older = {
  pid: 1,
  startedAt: '2026-12-06T04:32:00.000Z',
  dataDir: '/tmp/x',
  kube: { server: 'https://127.0.0.1:1', token: 't', caCert: 'c', kubeconfig: '/tmp/k', version: 'v', etcd: 'e' },
  controllerManager: { pid: 2, port: 3, healthz: 'h', controllers: [], version: 'v' },
  postgres: { host: '127.0.0.1', port: 5432, user: 'postgres', database: 'postgres', version: '15' },
  openbao: { available: false, reason: 'not built' },
};
const read = (state: unknown) => {
  const file = join(dir, `${Math.random()}.json`);
  writeFileSync(file, JSON.stringify(state));
  return Effect.runPromise(readState(file));
};

describe('test bed state file', () => {
  it('a state without scramPostgres (written by the test bed before decision 0382) decodes, the field absent', async () => {
    expect((await read(older)).scramPostgres).toBeUndefined();
  });

  it('a state with the SCRAM cluster, available or not, decodes; a malformed one is refused', async () => {
    const available = {
      available: true,
      host: 'localhost',
      hostaddr: '127.0.0.1',
      port: 40000,
      superuser: 'postgres',
      password: 'p',
      caCert: 'c',
      version: '15.8',
    };
    expect((await read({ ...older, scramPostgres: available })).scramPostgres).toEqual(available);
    expect(
      (await read({ ...older, scramPostgres: { available: false, reason: 'no binaries' } })).scramPostgres,
    ).toEqual({ available: false, reason: 'no binaries' });
    await expect(read({ ...older, scramPostgres: { available: true, port: 'x' } })).rejects.toThrow(/scramPostgres/);
  });
});

// Issue 21: the controller PROCESS is SIGKILLed after every single step of provisioning, of a rotation and of a
// Delete reclaim, then restarted, and everything converges with no orphan role, database or KV version.
//
// How the kill point is chosen: the test-only entry `test/fixtures/crashing-controller.ts` (decision 0253) runs the
// real controller with the provisioning ports wrapped; every mutating call is printed (`ayatori-test-call <name>`)
// and `AYATORI_TEST_CRASH=after:<name>:<N>` SIGKILLs the process right after the N-th call of that name answered.
// 1. A traced process (no kill) runs the three flows one after the other on a reference Tenant; its printed calls,
//    cut where each flow was requested, are the steps.
// 2. For every step k of a flow, a Tenant of its own and a crashing process that sees only that Tenant (label
//    selector) and dies right after step k — i.e. between step k and step k+1; its own calls must be the flow's
//    first k+1 steps.
// 3. One clean process (`src/main.ts`) then converges all of them, and the test checks the one outcome: provisioned
//    Tenants Ready with one role, one database, one KV version and the same password in PostgreSQL, OpenBao and the
//    Secret; rotated Tenants on exactly one new version (the old password refused by the verifier); deleted Tenants
//    leave nothing (no Secret, role, database, KV metadata, Database, Tenant).
// Every process runs from an esbuild bundle of its entry made once for the file (decision 0381), not under tsx.
import { join } from 'node:path';
import { eventually, kubeRequest } from '@homelab/testbed/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AyatoriObj as Obj,
  ayatoriProcessFile,
  ayatoriRunning as running,
  bundleEntry,
  readyCondition as ready,
  scramMatches as passwordMatches,
  spawnController,
  stopProcess as stop,
} from './support.js';

const file = ayatoriProcessFile('ctrl-aykill', {
  provisioning: true,
  instanceLabels: (label) => ({ [label]: 'yes', [`${label}-step`]: 'instance' }),
});
const { suffix, label, children, sessions, databases, tenantPath, isReady, assertProvisioned, assertGone, rotate } =
  file;
const { get } = file.objects;
const stepLabel = `${label}-step`;
/** The crashing test-only entry, bundled once for the file (decision 0381; `src/main.ts` is bundled by the fixture). */
let crashEntry = '';
let removeBundle = () => undefined as void;

/** Only the Instance and the Tenants labelled `step` (each crashing process sees its own Tenant only). */
const only = (...steps: string[]) => `${label}=yes,${stepLabel} in (instance,${steps.join(',')})`;
const callsOf = (text: string) => [...text.matchAll(/^ayatori-test-call (.+)$/gm)].map((m) => m[1] as string);
/** Each call with its occurrence number among the calls of the same name: the crash spec that hits it. */
const numbered = (calls: ReadonlyArray<string>) => {
  const seen = new Map<string, number>();
  return calls.map((name) => {
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    return `${name}:${n}`;
  });
};

/**
 * The steps between which a kill is meaningful in a slice of a process's calls: from the first mutating call (a
 * process first presents the Tenant's current status, which changes nothing) up to the call `last` that completes
 * the flow (a kill after it leaves nothing to do); undefined while `last` has not been printed.
 */
const flowSteps = (calls: ReadonlyArray<string>, last: string) => {
  const from = calls.findIndex((c) => c !== 'present');
  const end = from < 0 ? -1 : calls.indexOf(last, from);
  return end < 0 ? undefined : numbered(calls).slice(from, end);
};
/**
 * A crashing process for one Tenant, killed right after `steps[k]`; resolves once it is dead. Its own calls, from its
 * first mutating one, must be exactly `steps[0..k]`: the fresh process counted the same calls the traced one did, so
 * the kill fell between step k and step k+1.
 */
const crashAfter = async (step: string, steps: ReadonlyArray<string>, k: number) => {
  const point = steps[k] as string;
  const proc = spawnController(file.flags(only(step)), children, {
    entry: crashEntry,
    env: { AYATORI_TEST_CRASH: `after:${point}` },
  });
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 120_000);
  const code = await proc.exited;
  clearTimeout(timer);
  expect(proc.output.text, `the process reached ${point}`).toContain(
    `ayatori-test-crash after ${point.replace(/:(\d+)$/, ' $1')}`,
  );
  expect(code).toBe(null); // killed by a signal, no exit code
  const calls = numbered(callsOf(proc.output.text));
  expect(calls.slice(calls.findIndex((c) => !c.startsWith('present:'))), `${step}: its calls`).toEqual(
    steps.slice(0, k + 1),
  );
};
/**
 * A clean process (`src/main.ts`) for every Tenant of the file, four rounds at a time (`--database-workers`, decision
 * 0421: each Tenant's round is still one at a time, and the restarted process converges the same).
 */
const clean = () =>
  spawnController([...file.flags(`${label}=yes`), '--database-workers=4'], children, { entry: file.mainEntry() });
/** The process serves the workers it was given (controller-runtime's gauge). */
const assertWorkers = async (proc: ReturnType<typeof clean>, n: number) => {
  const metrics = await (await fetch(`${await proc.listening}/metrics`)).text();
  expect(metrics).toContain(`controller_runtime_max_concurrent_reconciles{controller="database-binding"} ${n}`);
};
/** At most `n` at a time (each is a process of its own on a 2-core machine). */
const limited = async <A>(items: ReadonlyArray<A>, n: number, work: (a: A) => Promise<void>) => {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) await work(items[next++] as A);
    }),
  );
};

/**
 * The file's Tenants and every Database, one LIST each: the convergence waits poll 28 Tenants, and a GET per object
 * every 100 ms would load the shared 2-core machine's API server more than the controller under test does.
 */
const listed = async () => {
  const items = async (path: string) => ((await kubeRequest('GET', path)).json() as { items?: Obj[] }).items ?? [];
  const [tenants, dbs] = await Promise.all([
    items(`${file.tenantsPath()}?labelSelector=${encodeURIComponent(`${label}=yes`)}`),
    items(databases),
  ]);
  return {
    tenant: (name: string) => tenants.find((t) => t.metadata.name === name),
    database: (name: string) => dbs.find((db) => db.metadata.name === name),
  };
};
const createTenant = (name: string, step: string) => file.createTenant(name, { [label]: 'yes', [stepLabel]: step });
/** Reclaim policy Delete, a session open as the role, then the Tenant deleted. */
const deleteWithSession = (name: string) => file.deleteTenant(name, { session: true });

beforeAll(async () => {
  const crashing = await bundleEntry(join(import.meta.dirname, 'fixtures/crashing-controller.ts'));
  crashEntry = crashing.file;
  removeBundle = crashing.remove;
}, 120_000);

afterAll(() => removeBundle());

describe('the controller process SIGKILLed between every pair of steps (issue 21)', () => {
  it('provision, rotation and Delete: a kill right after each single step, then a restarted process converges — no orphan role, database or KV version', async () => {
    // 1. The steps, as a traced process performs them on a reference Tenant: provisioning, a rotation, a Delete —
    //    one process for the three flows (decision 0381), its printed calls cut where each flow was requested.
    const traced = `kt${suffix}`;
    await createTenant(traced, 'trace');
    const trace = await running(
      spawnController(file.flags(only('trace')), children, {
        entry: crashEntry,
        env: { AYATORI_TEST_CRASH: 'trace' },
      }),
    );
    await eventually('traced Tenant Ready', () => isReady(traced), 90_000);
    const provisioning = callsOf(trace.output.text);
    const tracedBefore = await assertProvisioned(traced, 1);
    const rotationFrom = trace.output.text.length;
    await rotate(traced, 'trace');
    await eventually(
      'traced rotation done',
      async () => (await get(`${databases}/${tracedBefore.database.metadata.name}`))?.status?.rotation === 'trace',
      90_000,
    );
    // The Tenant stays Ready through a rotation: the round's end is its closing `present` in the output (reading
    // the output as soon as the status shows the rotation done could miss that line, still in the pipe).
    await eventually(
      'traced rotation round ended',
      () => flowSteps(callsOf(trace.output.text.slice(rotationFrom)), 'present') !== undefined,
      90_000,
    );
    await eventually('traced Tenant Ready', () => isReady(traced), 90_000);
    const rotation = callsOf(trace.output.text.slice(rotationFrom));
    await assertProvisioned(traced, 2);
    expect(await passwordMatches(traced, tracedBefore.password)).toBe(false);
    const reclaimFrom = trace.output.text.length;
    const tracedGone = await deleteWithSession(traced);
    await eventually('traced Tenant gone', async () => (await get(tenantPath(traced))) === undefined, 90_000);
    await stop(trace);
    const reclaim = callsOf(trace.output.text.slice(reclaimFrom));
    await assertGone(traced, tracedGone.databaseName, tracedGone.path);

    // The flows' shapes are the contract's (decisions 0230, 0233, 0234).
    const provisionSteps = flowSteps(provisioning, 'present') ?? [];
    const rotationSteps = flowSteps(rotation, 'present') ?? [];
    const reclaimSteps = flowSteps(reclaim, 'releaseTenant') ?? [];
    expect(provisionSteps).toEqual([
      'record:Provisioning:Reconciling:1',
      'sql:CreateRole:1',
      'sql:GrantMembership:1',
      'sql:CreateDatabase:1',
      'sql:RevokePublicConnect:1',
      'kv:create:1',
      'sql:SetPassword:1',
      'record:Available:Available:1',
      'deliver:1',
    ]);
    expect(rotationSteps).toEqual([
      'record:Available:Available:1',
      'kv:replace:1',
      'sql:SetPassword:1',
      'deliver:1',
      'record:Available:Available:2',
    ]);
    expect(reclaimSteps.map((s) => s.replace(/:\d+$/, '')).filter((s) => !s.startsWith('record:'))).toEqual([
      'removeProjection',
      'sql:BlockLogins',
      'sql:TerminateSessions',
      'sql:DropDatabase',
      'sql:DropRole',
      'kv:remove',
      'finishDatabase',
    ]);

    // 2. Provisioning: one Tenant per step, its process killed right after that step. Rotation and Delete Tenants
    //    are created now too (their own labels: no crashing process sees them yet).
    const p = provisionSteps.map((point, i) => ({
      name: `kp${i}x${suffix}`,
      step: `p${i}`,
      point,
      steps: provisionSteps,
      i,
    }));
    const r = rotationSteps.map((point, i) => ({
      name: `kr${i}x${suffix}`,
      step: `r${i}`,
      point,
      steps: rotationSteps,
      i,
    }));
    const d = reclaimSteps.map((point, i) => ({
      name: `kd${i}x${suffix}`,
      step: `d${i}`,
      point,
      steps: reclaimSteps,
      i,
    }));
    await Promise.all([...p, ...r, ...d].map((t) => createTenant(t.name, t.step)));
    await limited(p, 3, (t) => crashAfter(t.step, t.steps, t.i));
    for (const t of p) expect(await isReady(t.name), `${t.name} after ${t.point}`).toBe(false);

    // 3. A clean process converges the killed provisionings (and provisions the rotation and Delete Tenants).
    const clean1 = await running(clean());
    await eventually(
      'every Tenant Ready',
      async () => {
        const now = await listed();
        return [...p, ...r, ...d].every((t) => ready(now.tenant(t.name))?.status === 'True');
      },
      180_000,
    );
    await assertWorkers(clean1, 4);
    await stop(clean1);
    await Promise.all(p.map((t) => assertProvisioned(t.name, 1)));

    // 4. Rotation and Delete: each process killed right after its step; then a clean process converges.
    const before = new Map<string, string>();
    const gone = new Map<string, { databaseName: string; path: string }>();
    await Promise.all([
      ...r.map(async (t) => {
        before.set(t.name, (await assertProvisioned(t.name, 1)).password);
        await rotate(t.name, `k-${t.step}`);
      }),
      ...d.map(async (t) => gone.set(t.name, await deleteWithSession(t.name))),
    ]);
    await limited([...r, ...d], 3, (t) => crashAfter(t.step, t.steps, t.i));
    const clean2 = await running(clean());
    await eventually(
      'every rotation done and every deleted Tenant gone',
      async () => {
        const now = await listed();
        return (
          r.every((t) => {
            const tenant = now.tenant(t.name);
            const database = now.database(`tenant-${tenant?.metadata.uid}`);
            return database?.status?.rotation === `k-${t.step}` && ready(tenant)?.status === 'True';
          }) && d.every((t) => now.tenant(t.name) === undefined)
        );
      },
      180_000,
    );
    await stop(clean2);
    await Promise.all([
      ...r.map(async (t) => {
        await assertProvisioned(t.name, 2);
        expect(await passwordMatches(t.name, before.get(t.name) as string), `${t.name}: old password`).toBe(false);
      }),
      ...d.map(async (t) => {
        const g = gone.get(t.name) as { databaseName: string; path: string };
        await assertGone(t.name, g.databaseName, g.path);
      }),
    ]);
    for (const s of sessions) await expect(s.query('SELECT 1')).rejects.toThrow();
  }, 900_000);
});

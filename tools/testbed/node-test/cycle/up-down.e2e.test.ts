// The node leaves the machine as it found it (issue 27): two `up --node` / `down` cycles through the CLI, each with a
// running pod so the node really writes outside its data directory (pod log links, CNI results, kubepods cgroups,
// the kubelet's device-plugin socket, containerd's shim sockets, the bridge, changed sysctls), and after each `down`
// nothing of it is left; `up --node` twice answers with the running one. Then the faults: a second node while one runs is refused, and a node whose test bed was
// SIGKILLed is cleaned up by the next `up`. Root only (as on the machines and in CI).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { kubeCall } from '../../src/kube-api.js';
import { nodeTraces, trackedSysctls } from '../../src/node.js';
import { isAlive, type TestbedState } from '../../src/state.js';

const cli = join(import.meta.dirname, '..', '..', 'bin', 'testbed.mjs');
const work = mkdtempSync(join(tmpdir(), 'testbed-node-cycle-'));
const sysctls = () =>
  Object.fromEntries(trackedSysctls.map((s) => [s, readFileSync(join('/proc/sys', ...s.split('.')), 'utf8').trim()]));

const testbed = (stateFile: string, ...args: string[]) =>
  spawnSync(process.execPath, [cli, ...args], {
    encoding: 'utf8',
    env: { ...process.env, HOMELAB_TESTBED_STATE: stateFile },
    timeout: 300_000,
  });

const stateOf = (stateFile: string): TestbedState => JSON.parse(readFileSync(stateFile, 'utf8')) as TestbedState;

/**
 * The services of a test bed this file started: their command line names its data directory, or (OpenBao, whose HOME
 * it is) their environment does.
 */
const processesOf = (dataDir: string): number[] =>
  readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return (
          readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(dataDir) ||
          readFileSync(`/proc/${d}/environ`, 'utf8').split('\0').includes(`HOME=${dataDir}`)
        );
      } catch {
        return false;
      }
    })
    .map(Number);

const crashed: string[] = [];
afterAll(() => {
  // The services a SIGKILLed test bed left running (etcd, kube-apiserver, …), found by its own data directory.
  for (const dir of crashed) for (const pid of processesOf(dir)) process.kill(pid, 'SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

/** A pod that runs on the node and writes a log line; returns when it is Running. */
const runPod = async (state: TestbedState, name: string): Promise<void> => {
  const ns = 'default';
  for (let i = 0; i < 300; i++) {
    const sa = await kubeCall(state.kube, 'GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`);
    if (sa.status === 200) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const created = await kubeCall(state.kube, 'POST', `/api/v1/namespaces/${ns}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: state.node?.images.busybox,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', 'echo up; sleep 3600'],
        },
      ],
    },
  });
  expect(created.status, created.body).toBe(201);
  for (let i = 0; i < 600; i++) {
    const p = (await kubeCall(state.kube, 'GET', `/api/v1/namespaces/${ns}/pods/${name}`)).json() as {
      status?: { phase?: string };
    };
    if (p.status?.phase === 'Running') return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`pod ${name} not Running within 120 s`);
};

describe.sequential('testbed up --node / down (real node on this machine)', () => {
  const before = { traces: nodeTraces(), sysctls: sysctls() };

  it('two up/down cycles, each with a running pod, leave nothing of the node behind', async () => {
    for (const cycle of [1, 2]) {
      const stateFile = join(work, `cycle${cycle}`, 'state.json');
      const up = testbed(stateFile, 'up', '--node');
      expect(up.status, up.stderr).toBe(0);
      const state = stateOf(stateFile);
      expect(state.node?.name).toBe('localhost');
      await runPod(state, `cycle-${cycle}`);
      if (cycle === 1) {
        // `up --node` again on the running test bed: it answers with the running one and starts nothing.
        const kubelets = nodeTraces().filter((t) => t.startsWith('process ') && t.endsWith('/kubelet'));
        const again = testbed(stateFile, 'up', '--node');
        expect(again.status, again.stderr).toBe(0);
        expect(again.stderr).toContain(`already running (pid ${state.pid}, with a node)`);
        expect(stateOf(stateFile).startedAt).toBe(state.startedAt);
        expect(nodeTraces().filter((t) => t.startsWith('process ') && t.endsWith('/kubelet'))).toEqual(kubelets);
      }
      // While it runs, the node's traces are visible — so their absence afterwards means something.
      const during = nodeTraces();
      expect(during).toEqual(expect.arrayContaining(['/var/log/containers', 'link hltb0']));
      expect(during.some((t) => t.endsWith('/kubepods'))).toBe(true);
      const down = testbed(stateFile, 'down');
      expect(down.status, down.stderr).toBe(0);
      expect(nodeTraces()).toEqual(before.traces);
      expect(sysctls()).toEqual(before.sysctls);
      expect(existsSync(state.dataDir)).toBe(false);
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(state.dataDir);
    }
  });

  it('a second node while one runs is refused; a node whose test bed was SIGKILLed is cleaned by the next up', async () => {
    const firstState = join(work, 'crash', 'state.json');
    const up = testbed(firstState, 'up', '--node');
    expect(up.status, up.stderr).toBe(0);
    const first = stateOf(firstState);
    crashed.push(first.dataDir);
    await runPod(first, 'before-crash');

    const second = testbed(join(work, 'second', 'state.json'), 'up', '--node');
    expect(second.status).toBe(1);
    expect(second.stderr).toContain(`a test bed with a node is already running on this machine (pid ${first.pid})`);

    process.kill(first.pid, 'SIGKILL'); // the test bed this test started, by its pid: a crash
    for (let i = 0; i < 50 && isAlive(first.pid); i++) await new Promise((r) => setTimeout(r, 100));
    expect(isAlive(first.node?.kubelet.pid ?? -1)).toBe(true); // its node outlives it, as after a real crash

    const nextState = join(work, 'next', 'state.json');
    const next = testbed(nextState, 'up', '--node');
    expect(next.status, next.stderr).toBe(0);
    expect(readFileSync(join(work, 'next', 'testbed.log'), 'utf8')).toContain(
      `cleaned the node left by a test bed that is gone (pid ${first.pid})`,
    );
    expect(isAlive(first.node?.kubelet.pid ?? -1)).toBe(false);
    expect(existsSync(first.dataDir)).toBe(false);
    await runPod(stateOf(nextState), 'after-crash');
    const down = testbed(nextState, 'down');
    expect(down.status, down.stderr).toBe(0);
    expect(nodeTraces()).toEqual(before.traces);
    expect(sysctls()).toEqual(before.sysctls);
  });
});

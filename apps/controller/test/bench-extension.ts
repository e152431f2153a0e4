// Part of `npm run bench -w @homelab/controller` (issue 23 "Performance"): listing an extension kind's objects through
// the control plane against listing the same objects directly from the API server with the same KubeClient, in the
// same run (goal ≤ 1.5×, as for kernel kinds). The controller installs a generated package from its
// `--extension-dir` (a SystemComponent labelled for the bench's `--kos-label-selector`), serves its kind once the
// component is Active, and the bench lists BENCH_EXT_OBJECTS (1,000 = the control plane's largest page; extension
// kinds have no `continue`) objects in one page per list, alternating the two sides each round.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Effect } from 'effect';
import type { KubeClient } from '@homelab/kube';

export const EXT_GROUP = 'bench.example.org';
export const EXT_ID = 'bench-gadgets';
const API_VERSION = `${EXT_GROUP}/v1`;
const COMPONENT = 'bench-gadgets';

/** Write the package into `dir` and return the SystemComponent that installs it. */
export const benchPackage = (dir: string, labels: Record<string, string>) => {
  const bytes = Buffer.from(
    JSON.stringify({
      format: 'kos.extension/v1',
      declaration: {
        id: EXT_ID,
        version: '1.0.0',
        framework: '^1.0.0',
        // retain: delete — the bench's uninstall removes the CRD and its objects in one step
        contributes: {
          kinds: [{ group: EXT_GROUP, version: 'v1', kind: 'Gadget', plural: 'gadgets', retain: 'delete' }],
        },
      },
    }),
  );
  writeFileSync(join(dir, 'gadgets.json'), bytes);
  return {
    apiVersion: 'kos.tsic.top/v1beta1',
    kind: 'SystemComponent',
    metadata: { name: COMPONENT, labels: { ...labels, 'kos.tsic.top/managed-by': 'kos' } },
    spec: { package: { ref: 'file:gadgets.json', sha256: createHash('sha256').update(bytes).digest('hex') } },
  };
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const extensionListBench = async (input: {
  readonly url: string;
  readonly namespace: string;
  readonly objects: number;
  readonly rounds: number;
  readonly component: ReturnType<typeof benchPackage>;
  readonly kube: <A>(f: (k: KubeClient['Type']) => Effect.Effect<A, unknown>) => Promise<A>;
  readonly getText: (url: string) => Promise<string>;
  readonly print: (...parts: ReadonlyArray<unknown>) => void;
}) => {
  const { kube, getText, print, namespace: ns, objects: N } = input;
  await kube((k) => k.create(input.component as never));
  const listUrl = `${input.url}/api/v1/resources/gadgets?apiVersion=${API_VERSION}&namespace=${ns}&limit=${N}`;
  try {
    // the controller's Installer round activates the component and applies the CRD; then the kind is served
    const deadline = Date.now() + 120_000;
    for (;;) {
      const body = JSON.parse(await getText(listUrl)) as { items?: unknown[]; error?: { code: string } };
      if (body.items !== undefined) break;
      if (Date.now() > deadline) throw new Error(`the extension kind is not served: ${JSON.stringify(body)}`);
      await sleep(250);
    }
    await kube((k) => k.discovery.invalidate);
    await kube((k) =>
      Effect.forEach(
        Array.from({ length: N }, (_, i) => i),
        (i) =>
          k.create({
            apiVersion: API_VERSION,
            kind: 'Gadget',
            metadata: { name: `gadget-${i}`, namespace: ns },
            spec: { index: i, label: `gadget number ${i}` },
          } as never),
        { concurrency: 32, discard: true },
      ),
    );
    const direct = () =>
      kube((k) => k.list({ apiVersion: API_VERSION, kind: 'Gadget', namespace: ns }, { limit: N })).then(
        (l) => l.items.length,
      );
    const viaApi = async () => (JSON.parse(await getText(listUrl)) as { items: unknown[] }).items.length;
    await direct();
    await viaApi(); // warm both paths
    const d: number[] = [];
    const a: number[] = [];
    for (let r = 0; r < input.rounds * 2; r++) {
      // alternate which side goes first, so neither always runs after the other (GC, caches)
      const sides = r % 2 === 0 ? ([direct, d, viaApi, a] as const) : ([viaApi, a, direct, d] as const);
      for (const [f, into] of [
        [sides[0], sides[1]],
        [sides[2], sides[3]],
      ] as const) {
        const s = performance.now();
        if ((await f()) !== N) throw new Error('extension listing incomplete');
        into.push(performance.now() - s);
      }
    }
    print(
      `extension kind: list ${N} ${API_VERSION} Gadget (one page): direct median ${median(d).toFixed(1)} ms, control plane median ${median(a).toFixed(1)} ms, ratio ${(median(a) / median(d)).toFixed(2)}x (goal <= 1.5x)`,
    );
  } finally {
    // uninstall through the controller (retain: delete drops the CRD and the objects), else strip the gate
    await kube((k) => k.delete({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'SystemComponent', name: COMPONENT })).catch(
      () => undefined,
    );
    const until = Date.now() + 60_000;
    while (Date.now() < until) {
      const gone = await kube((k) =>
        k.get({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'SystemComponent', name: COMPONENT }),
      ).then(
        () => false,
        () => true,
      );
      if (gone) break;
      await sleep(250);
    }
    await kube((k) =>
      k.patch(
        { apiVersion: 'kos.tsic.top/v1beta1', kind: 'SystemComponent', name: COMPONENT },
        { type: 'merge', patch: { metadata: { finalizers: null } } },
        { fieldManager: 'kos-bench' },
      ),
    ).catch(() => undefined);
    await kube((k) =>
      k.delete({
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        name: `gadgets.${EXT_GROUP}`,
      }),
    ).catch(() => undefined);
  }
};

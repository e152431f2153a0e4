// `npm run bench -w @homelab/controller`: listing 5,000 Applications page by page through the control plane against
// listing them directly from the API server with the same KubeClient, in the same run (goal ≤ 1.5×), and
// single-object GET latency p50/p99 through the API against a direct GET; an extension kind's list (1,000 objects of
// a generated package's kind, bench-extension.ts) through the control plane against the direct list (goal ≤ 1.5×,
// issue 23). Then the identity module (issue 17), each
// against a peer in the same run: the same 5,000 listed by an authenticated Owner and Member (bearer token, role and
// visibility per request and object) against the loopback controller without identity (goal ≤ 1.2×); the audit
// append's share of a create through the API (goal ≤ 10 %); login latency with the argon2id verification printed
// separately, for a right password, a wrong one and an unknown name (no timing oracle). Needs the test bed
// (`npm run testbed -- up`).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, get, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect, ManagedRuntime } from 'effect';
import { KubeClient, layerFromToken } from '@homelab/kube';
import { type Bootstrap, Audits, kosCrds, PasswordHasher } from '@homelab/kos-kernel';
import { parseConfig, startController } from '../src/index.js';
import { benchPackage, extensionListBench } from './bench-extension.js';

/** The measured numbers, printed for the run's report (not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);
const printError = (...parts: ReadonlyArray<unknown>): void =>
  void process.stderr.write(
    `${parts.map((p) => (p instanceof Error ? (p.stack ?? p.message) : String(p))).join(' ')}\n`,
  );

const N = Number(process.env['BENCH_OBJECTS'] ?? 5000);
const PAGE = Number(process.env['BENCH_PAGE'] ?? 500);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const GETS = Number(process.env['BENCH_GETS'] ?? 500);
const EXT_OBJECTS = Number(process.env['BENCH_EXT_OBJECTS'] ?? 1000);

const state = JSON.parse(
  readFileSync(
    process.env['HOMELAB_TESTBED_STATE'] ?? join(import.meta.dirname, '../../../.testbed/state.json'),
    'utf8',
  ),
) as {
  kube: { server: string; token: string; caCert: string };
};
const kubeLayer = layerFromToken(state.kube, { maxSockets: 64 });
const rt = ManagedRuntime.make(kubeLayer);
const kube = <A>(f: (k: KubeClient['Type']) => Effect.Effect<A, unknown>) =>
  rt.runPromise(Effect.flatMap(KubeClient, f));

// node:http with keep-alive for the control-plane side, like the KubeClient's own transport on the direct side
// (undici's fetch alone costs more than the control plane's work for 300 kB pages).
const agent = new Agent({ keepAlive: true, maxSockets: 8 });
const getText = (url: string, headers: Record<string, string> = {}): Promise<string> =>
  new Promise((resolve, reject) => {
    get(url, { agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    }).on('error', reject);
  });

const send = (
  url: string,
  method: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> =>
  new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = request(
      url,
      {
        method,
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(text);
  });

/** The API alone: no discovery rounds, and the KOS reconcilers (running, as in production) select none of the bench's
 * objects, so they do not write statuses to the 5,000 Applications while they are listed. */
const QUIET = { discoveryIntervalMs: 3_600_000, kosLabelSelector: 'homelab.bench/reconcile=never' };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))] as number;

const main = async () => {
  const ns = `bench-${Date.now().toString(36)}`;
  print(`bench: ${N} Applications in namespace ${ns}, pages of ${PAGE}, ${ROUNDS} rounds`);
  for (const crd of kosCrds()) await kube((k) => k.apply(crd as never, { fieldManager: 'kos-bench', force: true }));
  await kube((k) => k.discovery.invalidate);
  await kube((k) => k.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }));
  const t0 = performance.now();
  await kube((k) =>
    Effect.forEach(
      Array.from({ length: N }, (_, i) => i),
      (i) =>
        k.create({
          apiVersion: 'kos.tsic.top/v1beta1',
          kind: 'Application',
          metadata: { name: `app-${i}`, namespace: ns },
          spec: { replicas: 1, owner: 'bench', visibility: { mode: 'all' }, config: { index: i } },
        }),
      { concurrency: 32, discard: true },
    ),
  );
  print(`created ${N} objects in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const extensionDir = mkdtempSync(join(tmpdir(), 'kos-bench-extensions-'));
  const cp = await startController(
    { ...parseConfig(['--port', '0', '--modules=kos', '--extension-dir', extensionDir], {}), ...QUIET },
    { kube: kubeLayer, log: () => undefined },
  );
  try {
    const direct = async () => {
      let count = 0;
      let token: string | undefined;
      do {
        const page = await kube((k) =>
          k.list(
            { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns },
            { limit: PAGE, ...(token ? { continue: token } : {}) },
          ),
        );
        count += page.items.length;
        token = page.metadata.continue || undefined;
      } while (token !== undefined);
      return count;
    };
    const listVia = async (base: string, headers: Record<string, string> = {}) => {
      let count = 0;
      let token: string | undefined;
      do {
        const body = JSON.parse(
          await getText(
            `${base}/api/v1/resources/Application?namespace=${ns}&limit=${PAGE}${token ? `&continue=${encodeURIComponent(token)}` : ''}`,
            headers,
          ),
        ) as { items: unknown[]; continue?: string };
        count += body.items.length;
        token = body.continue;
      } while (token !== undefined);
      return count;
    };
    const viaApi = () => listVia(cp.url);
    await direct();
    await viaApi(); // warm both paths
    const d: number[] = [];
    const a: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      let s = performance.now();
      if ((await direct()) !== N) throw new Error('direct listing incomplete');
      d.push(performance.now() - s);
      s = performance.now();
      if ((await viaApi()) !== N) throw new Error('control-plane listing incomplete');
      a.push(performance.now() - s);
    }
    print(
      `list ${N} (pages of ${PAGE}): direct median ${median(d).toFixed(0)} ms, control plane median ${median(a).toFixed(0)} ms, ratio ${(median(a) / median(d)).toFixed(2)}x (goal <= 1.5x)`,
    );

    const gd: number[] = [];
    const ga: number[] = [];
    for (let i = 0; i < GETS; i++) {
      const name = `app-${(i * 7919) % N}`;
      let s = performance.now();
      await kube((k) => k.get({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns, name }));
      gd.push(performance.now() - s);
      s = performance.now();
      JSON.parse(await getText(`${cp.url}/api/v1/resources/Application/${name}?namespace=${ns}`));
      ga.push(performance.now() - s);
    }
    print(
      `GET one object (${GETS}x): direct p50 ${pct(gd, 50).toFixed(2)} ms p99 ${pct(gd, 99).toFixed(2)} ms; control plane p50 ${pct(ga, 50).toFixed(2)} ms p99 ${pct(ga, 99).toFixed(2)} ms; p50 ratio ${(pct(ga, 50) / pct(gd, 50)).toFixed(2)}x`,
    );

    // issue 23: an extension kind's list through the control plane against the direct list, same run
    await extensionListBench({
      url: cp.url,
      namespace: ns,
      objects: EXT_OBJECTS,
      rounds: ROUNDS,
      component: benchPackage(extensionDir, { 'homelab.bench/reconcile': 'never' }),
      kube,
      getText,
      print,
    });

    await identityBench(listVia, viaApi, ns);
  } finally {
    rmSync(extensionDir, { recursive: true, force: true });
    agent.destroy();
    await cp.close();
    await kube((k) =>
      k
        .listAll({ apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns }, { limit: 500 })
        .pipe(
          Effect.flatMap((l) =>
            Effect.forEach(
              l.items,
              (o) => k.delete({ apiVersion: o.apiVersion, kind: o.kind, namespace: ns, name: o.metadata.name ?? '' }),
              { concurrency: 32, discard: true },
            ),
          ),
        ),
    );
    await kube((k) => k.delete({ apiVersion: 'v1', kind: 'Namespace', name: ns }));
    await rt.dispose();
  }
};

/** The identity module's three costs, each against its peer in this run (issue 17). */
const identityBench = async (
  listVia: (base: string, headers?: Record<string, string>) => Promise<number>,
  plainList: () => Promise<number>,
  ns: string,
) => {
  const dir = mkdtempSync(join(tmpdir(), 'kos-bench-identity-'));
  let boot: Bootstrap | undefined;
  const id = await startController(
    {
      ...parseConfig(['--port', '0', '--modules=kos', '--identity-db', join(dir, 'controlplane.db')], {}),
      ...QUIET,
    },
    { kube: kubeLayer, log: () => undefined, onBootstrap: (b) => (boot = b) },
  );
  const run = <A>(e: Effect.Effect<A, unknown, Audits | PasswordHasher>) =>
    (id.runtime as unknown as ManagedRuntime.ManagedRuntime<Audits | PasswordHasher, unknown>).runPromise(e);
  try {
    const password = 'correct horse battery staple';
    const loginAs = async (name: string, pw: string) => {
      const a = await send(`${id.url}/api/v1/auth/login`, 'POST', { name, password: pw });
      if (a.status !== 200) throw new Error(`login ${name}: ${a.status} ${a.text}`);
      return JSON.parse(a.text) as { token: string; passwordChangeRequired: boolean };
    };
    const firstLogin = async (name: string, oneTime: string) => {
      const first = await loginAs(name, oneTime);
      const changed = await send(
        `${id.url}/api/v1/auth/password`,
        'PUT',
        { currentPassword: oneTime, newPassword: password },
        { authorization: `Bearer ${first.token}` },
      );
      if (changed.status !== 200) throw new Error(`password change ${name}: ${changed.text}`);
      return first.token;
    };
    if (boot === undefined) throw new Error('no bootstrap Owner');
    const owner = await firstLogin(boot.name, boot.oneTimePassword);
    const created = await send(
      `${id.url}/api/v1/accounts`,
      'POST',
      { name: 'mel', role: 'Member' },
      { authorization: `Bearer ${owner}` },
    );
    const member = await firstLogin('mel', (JSON.parse(created.text) as { oneTimePassword: string }).oneTimePassword);

    // 1. Authorized list of N: Owner and Member (every object visible to both: mode all) vs no identity.
    const asOwner = () => listVia(id.url, { authorization: `Bearer ${owner}` });
    const asMember = () => listVia(id.url, { authorization: `Bearer ${member}` });
    for (const f of [plainList, asOwner, asMember]) if ((await f()) !== N) throw new Error('listing incomplete');
    const plain: number[] = [];
    const o: number[] = [];
    const m: number[] = [];
    // the order rotates each round, so none of the three always runs after the other two (GC, caches)
    const variants = [
      [plainList, plain],
      [asOwner, o],
      [asMember, m],
    ] as const;
    for (let r = 0; r < ROUNDS * 2; r++)
      for (let v = 0; v < variants.length; v++) {
        const [f, into] = variants[(v + r) % variants.length] as (typeof variants)[number];
        const s = performance.now();
        if ((await f()) !== N) throw new Error('listing incomplete');
        into.push(performance.now() - s);
      }
    print(
      `identity: list ${N} (pages of ${PAGE}): no identity median ${median(plain).toFixed(0)} ms; Owner ${median(o).toFixed(0)} ms, ratio ${(median(o) / median(plain)).toFixed(2)}x; Member ${median(m).toFixed(0)} ms, ratio ${(median(m) / median(plain)).toFixed(2)}x (goal <= 1.2x)`,
    );

    // 2. The audit append's share of a create through the API (the same controller, the same database file).
    const creates: number[] = [];
    const appends: number[] = [];
    const append = (await run(Audits)).append({
      actor: 'mel',
      verb: 'create',
      object: { apiVersion: 'kos.tsic.top/v1beta1', kind: 'Application', namespace: ns, name: 'x' },
      result: 'accepted',
      source: 'api',
    });
    const CREATES = Math.min(200, N);
    for (let i = 0; i < CREATES; i++) {
      let s = performance.now();
      const a = await send(
        `${id.url}/api/v1/resources/Application`,
        'POST',
        { kind: 'Application', metadata: { name: `id-${i}`, namespace: ns }, spec: { replicas: 1 } },
        { authorization: `Bearer ${member}` },
      );
      if (a.status !== 202) throw new Error(`create: ${a.status} ${a.text}`);
      creates.push(performance.now() - s);
      s = performance.now();
      await run(append);
      appends.push(performance.now() - s);
    }
    print(
      `identity: create through the API (${CREATES}x) median ${median(creates).toFixed(2)} ms; one audit append (WAL, synchronous=FULL) median ${median(appends).toFixed(3)} ms = ${((100 * median(appends)) / median(creates)).toFixed(1)} % of a create (goal <= 10 %)`,
    );

    // 3. Login latency and the argon2id verification inside it.
    const hasher = await run(PasswordHasher);
    const digest = await run(hasher.hash(password));
    // interleaved, so the verification and the logins share the machine's load
    const LOGINS = 20;
    const xs: Record<'verify' | 'right' | 'wrong' | 'unknown', number[]> = {
      verify: [],
      right: [],
      wrong: [],
      unknown: [],
    };
    const steps: ReadonlyArray<readonly [keyof typeof xs, (i: number) => Promise<unknown>]> = [
      ['verify', () => run(hasher.verify(digest, password))],
      ['right', () => loginAs('mel', password)],
      // a wrong password for a known name and an unknown name, rotating names so no counter reaches the lockout
      ['wrong', (i) => send(`${id.url}/api/v1/auth/login`, 'POST', { name: 'owner', password: `wrong ${i}` })],
      ['unknown', (i) => send(`${id.url}/api/v1/auth/login`, 'POST', { name: `nobody-${i}`, password: 'x' })],
    ];
    for (let i = 0; i < LOGINS; i++)
      for (const [key, f] of steps) {
        if (key === 'wrong' && i % 4 === 3) await loginAs('owner', password); // success resets the counter
        const s = performance.now();
        await f(i);
        xs[key].push(performance.now() - s);
      }
    const [verify, right, known, wrong] = [median(xs.verify), median(xs.right), median(xs.wrong), median(xs.unknown)];
    const p = hasher.parameters;
    print(
      `identity: login median ${right.toFixed(1)} ms (right password), ${known.toFixed(1)} ms (wrong password), ${wrong.toFixed(1)} ms (unknown name); argon2id verify alone (m=${p.memoryKiB} KiB, t=${p.iterations}, p=${p.parallelism}) ${verify.toFixed(1)} ms = ${((100 * verify) / right).toFixed(0)} % of a login`,
    );
  } finally {
    await id.close();
    rmSync(dir, { recursive: true, force: true });
  }
};

main().catch((e: unknown) => {
  printError(e);
  process.exit(1);
});

// Test helper: run nsd and ns-daemon as real child processes (their `start` scripts' command), read their JSON logs.
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestDatabase } from '@homelab/testbed/vitest';
import { afterAll, afterEach } from 'vitest';

const root = join(import.meta.dirname, '../../..');

export interface Proc {
  readonly child: ChildProcess;
  readonly lines: Record<string, unknown>[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  waitFor: (pred: (l: Record<string, unknown>) => boolean, ms?: number) => Promise<Record<string, unknown>>;
}

/** `netns`: run it inside that network namespace (`ip netns exec` execs the command: the pid is the app's). */
export const start = (app: 'nsd' | 'ns-daemon', env: Record<string, string>, netns?: string): Proc => {
  const cwd = join(root, 'apps', app);
  const args = ['--conditions=@homelab/source', '--import', 'tsx', 'src/main.ts'];
  const child = spawn(
    netns === undefined ? process.execPath : 'ip',
    netns === undefined ? args : ['netns', 'exec', netns, process.execPath, ...args],
    { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: Record<string, unknown>[] = [];
  const waiters = new Set<() => void>();
  let buf = '';
  child.stdout?.on('data', (c: Buffer) => {
    buf += c.toString('utf8');
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        // the app's log line (decision 0291): the message is the event, the annotations its fields
        const r = JSON.parse(line) as { time: string; level: string; message: string; annotations: object };
        lines.push({ ...r.annotations, event: r.message, level: r.level, time: r.time });
      } catch {
        lines.push({ raw: line });
      }
      for (const w of waiters) w();
    }
  });
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.on('exit', (code, signal) => {
      for (const w of waiters) w();
      r({ code, signal });
    }),
  );
  const waitFor = (pred: (l: Record<string, unknown>) => boolean, ms = 60_000) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const check = () => {
        const hit = lines.find(pred);
        if (hit !== undefined) {
          waiters.delete(check);
          clearTimeout(timer);
          resolve(hit);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          waiters.delete(check);
          clearTimeout(timer);
          reject(
            new Error(
              `${app} exited (${child.exitCode ?? child.signalCode}); stderr: ${err.slice(-2000)}; log: ${JSON.stringify(lines.slice(-10))}`,
            ),
          );
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`${app}: timed out; stderr: ${err.slice(-2000)}; log: ${JSON.stringify(lines.slice(-10))}`));
      }, ms);
      waiters.add(check);
      check();
    });
  return { child, lines, exited, waitFor };
};

export const healthz = async (port: number): Promise<Record<string, unknown>> =>
  (await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()) as Record<string, unknown>;

export const until = async <A>(f: () => Promise<A>, ok: (a: A) => boolean, ms = 60_000): Promise<A> => {
  const end = Date.now() + ms;
  let last: A | undefined;
  for (;;) {
    try {
      last = await f();
      if (ok(last)) return last;
    } catch {
      // not up yet
    }
    if (Date.now() > end) throw new Error(`condition not reached; last ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

/** A test file's scratch space for real processes: a temp dir, the processes started (SIGKILLed after the file if still
 * running, after `closers`), and Ed25519 identities written as PEM files (`hex` = the public key as nsd membership). */
export const processWorkspace = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const procs: Proc[] = [];
  const closers: (() => Promise<void>)[] = [];
  // a failed test prints what its processes logged last (CI keeps nothing else of them)
  afterEach((ctx) => {
    const failed = ctx.task.result?.state === 'fail' || (ctx.task.result?.errors?.length ?? 0) > 0;
    if (!failed) return;
    for (const [i, p] of procs.entries())
      process.stderr.write(
        `── process ${i} (pid ${p.child.pid}), last log lines:\n${p.lines
          .slice(-40)
          .map((l) => JSON.stringify(l))
          .join('\n')}\n`,
      );
  });
  afterAll(async () => {
    for (const c of closers) await c();
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const identity = (name: string) => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const keyFile = join(dir, `${name}.pem`);
    writeFileSync(keyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }));
    return { keyFile, hex: Buffer.from(privateKey.export({ format: 'jwk' }).x as string, 'base64url').toString('hex') };
  };
  return { dir, procs, closers, identity };
};

type Workspace = Pick<ReturnType<typeof processWorkspace>, 'dir' | 'procs'>;

/** nsd's environment for the test's database, `members` and key `<dir>/nsd.pem` (ephemeral port unless `env` says). */
export const nsdEnv = (
  ws: Pick<Workspace, 'dir'>,
  db: TestDatabase,
  members: readonly string[],
  env: Record<string, string> = {},
): Record<string, string> => ({
  NSD_PORT: '0',
  NSD_DB_HOST: db.host,
  NSD_DB_PORT: String(db.port),
  NSD_DB_USER: db.user,
  NSD_DB_NAME: db.database,
  NSD_KEY_FILE: join(ws.dir, 'nsd.pem'),
  NSD_MEMBERS: members.join(','),
  ...env,
});

/** nsd on the test's database for `members` (`identityHex:networkHex`), key `<dir>/nsd.pem`; resolves once it listens. */
export const startNsd = async (
  ws: Workspace,
  db: TestDatabase,
  members: readonly string[],
  env: Record<string, string> = {},
) => {
  const proc = start('nsd', nsdEnv(ws, db, members, env));
  ws.procs.push(proc);
  const l = await proc.waitFor((x) => x['event'] === 'listening');
  const port = l['port'] as number;
  return {
    proc,
    port,
    url: `http://127.0.0.1:${port}`,
    key: l['nsd_public_key'] as string,
    epoch: BigInt(l['epoch'] as string),
    nsdId: (l['nsd_id'] as string).replaceAll('-', ''),
  };
};

/** An ns-daemon of `who` in `network` (state `<dir>/<name>.db`, declarations `<dir>/<name>.json`); not awaited. */
export const startNs = (
  ws: Workspace,
  nsd: { readonly url: string; readonly key: string },
  who: { readonly keyFile: string },
  name: string,
  network: string,
  env: Record<string, string> = {},
): Proc => {
  const proc = start('ns-daemon', {
    NS_NSD_URL: nsd.url,
    NS_NSD_KEY: nsd.key,
    NS_NETWORK: network,
    NS_KEY_FILE: who.keyFile,
    NS_STATE_FILE: join(ws.dir, `${name}.db`),
    NS_DECLARATIONS: join(ws.dir, `${name}.json`),
    NS_PORT: '0',
    ...env,
  });
  ws.procs.push(proc);
  return proc;
};

/** An ns-daemon (startNs) whose /healthz port is known: resolves once it listens. */
export const startNsListening = async (...args: Parameters<typeof startNs>) => {
  const p = startNs(...args);
  return { p, port: (await p.waitFor((x) => x['event'] === 'listening'))['port'] as number };
};

/**
 * The M6-62 cast in a fresh Network: a publisher declaring `web` (tcp → 127.0.0.1:8080), a consumer declaring
 * nothing (declaration files `<dir>/publisher.json`, `<dir>/consumer.json`), and the token of nsd's owner admin API.
 */
export const publisherAndConsumer = (ws: Pick<ReturnType<typeof processWorkspace>, 'dir' | 'identity'>) => {
  const pub = ws.identity('publisher');
  const con = ws.identity('consumer');
  writeFileSync(
    join(ws.dir, 'publisher.json'),
    JSON.stringify([{ key: 'web', protocols: ['tcp'], backend_host: '127.0.0.1', backend_port: 8080 }]),
  );
  writeFileSync(join(ws.dir, 'consumer.json'), JSON.stringify([]));
  const net = randomBytes(16).toString('hex');
  return { net, token: randomBytes(16).toString('hex'), pub, con, members: [`${pub.hex}:${net}`, `${con.hex}:${net}`] };
};

/** A client of nsd's owner admin API (`/v1/admin/…`, bearer token): status and JSON body. */
export const ownerAdmin =
  (nsdUrl: string, token: string) =>
  async (method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
    const r = await fetch(`${nsdUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };

/** One entry of a daemon's /healthz `leases`. */
export interface DaemonLease {
  readonly service: string;
  readonly role: 'publisher' | 'consumer';
  readonly active: boolean;
  readonly epoch: string;
  readonly generation: number;
}
export const leaseOf = (
  h: Record<string, unknown>,
  role: DaemonLease['role'],
  service: string,
): DaemonLease | undefined => (h['leases'] as DaemonLease[]).find((l) => l.role === role && l.service === service);

/** The simulated data plane's debug endpoint (decision 0146): the verdict of a newly opened flow and of every flow. */
export interface FlowVerdicts {
  readonly opened?: { readonly flowId: number; readonly verdict: string };
  readonly flows: readonly { readonly flowId: number; readonly verdict: string }[];
}
export const openFlow = async (port: number, serviceId: string): Promise<FlowVerdicts> =>
  (await (
    await fetch(`http://127.0.0.1:${port}/debug/simulated-flow`, {
      method: 'POST',
      body: JSON.stringify({ service_id: serviceId }),
    })
  ).json()) as FlowVerdicts;
export const checkFlows = async (port: number): Promise<FlowVerdicts> =>
  (await (await fetch(`http://127.0.0.1:${port}/debug/simulated-flow`)).json()) as FlowVerdicts;

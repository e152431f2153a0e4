// The process an extension controller's code runs in (decision 0342, refining 0305): a child `node` under the
// permission model (`--experimental-permission` with no `--allow-*`: no file system read or write, no child
// processes, no worker threads, no native addons, `process.binding` refused), an empty environment, a small heap,
// and only an IPC channel. The package's ES module (its text verified by the package sha256) is imported from a
// `data:` URL and gets a client whose every call is a message to this process, where `onCall` admits or refuses it
// (WriteScope.Admit, audit). The only code that starts extension processes.
import { type ChildProcess, spawn } from 'node:child_process';
import { Data, Effect, Layer, type Scope } from 'effect';
import {
  ExtensionSandboxes,
  type SandboxCall,
  type SandboxHandle,
} from '../../application/extension/controller-set.js';

export class SandboxFailed extends Data.TaggedError('SandboxFailed')<{ readonly reason: string }> {
  override get message(): string {
    return `extension sandbox failed: ${this.reason}`;
  }
}

/**
 * Runs inside the child; everything it knows arrives over IPC. Node 20's permission model refuses files, child
 * processes, workers and addons but not the network, and the controller's host is full of loopback services (its
 * own control plane is an Owner to loopback callers without the identity module). So before the extension's module
 * is loaded, every way to the network is sealed: the socket, server, datagram and DNS entry points on the shared
 * built-in prototypes and exports (non-writable, non-configurable, and synced into the ESM namespaces), and `fetch`.
 * The module cannot reach the originals: `process.binding` and internal bindings are refused by the permission model.
 */
const BOOTSTRAP = `
import net from 'node:net';
import dgram from 'node:dgram';
import dns from 'node:dns';
import { syncBuiltinESMExports } from 'node:module';
const refuse = (what) => function refused() {
  throw Object.assign(new Error(what + ' is refused in the extension sandbox'), { code: 'ERR_SANDBOX_NETWORK' });
};
const seal = (target, key, what) =>
  Object.defineProperty(target, key, { value: refuse(what), writable: false, configurable: false, enumerable: false });
seal(net.Socket.prototype, 'connect', 'net.Socket.connect');
seal(net.Server.prototype, 'listen', 'net.Server.listen');
for (const k of ['bind', 'connect', 'send']) seal(dgram.Socket.prototype, k, 'dgram.Socket.' + k);
const dnsNames = (o) => Object.getOwnPropertyNames(o).filter((k) => /^(lookup|resolve|reverse)/.test(k) && typeof o[k] === 'function');
for (const o of [dns, dns.promises, dns.Resolver.prototype, dns.promises.Resolver.prototype])
  for (const k of dnsNames(o)) seal(o, k, 'dns.' + k);
for (const k of ['fetch', 'WebSocket', 'EventSource']) if (k in globalThis) seal(globalThis, k, k);
syncBuiltinESMExports();
const pending = new Map();
let seq = 0;
let mod;
const call = (method, arg) => new Promise((resolve, reject) => {
  const id = seq++;
  pending.set(id, { resolve, reject });
  process.send({ t: 'call', id, method, arg });
});
const client = Object.freeze({
  get: (ref) => call('get', ref),
  list: (ref) => call('list', ref),
  apply: (object) => call('apply', object),
  applyStatus: (object) => call('applyStatus', object),
  delete: (ref) => call('delete', ref),
});
process.on('message', async (m) => {
  if (m.t === 'load') {
    try {
      mod = await import('data:text/javascript;base64,' + m.b64);
      process.send({ t: 'loaded', ok: typeof mod.reconcile === 'function', error: 'the module exports no reconcile function' });
    } catch (e) {
      process.send({ t: 'loaded', ok: false, error: String((e && e.message) || e) });
    }
  } else if (m.t === 'result') {
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (p === undefined) return;
    if (m.ok) p.resolve(m.value);
    else p.reject(Object.assign(new Error(m.error.message), { code: m.error.code }));
  } else if (m.t === 'reconcile') {
    try {
      const out = await mod.reconcile(m.request, client);
      process.send({ t: 'done', id: m.id, ok: true, value: out === undefined ? { state: 'steady' } : out });
    } catch (e) {
      process.send({ t: 'done', id: m.id, ok: false, error: String((e && e.message) || e) });
    }
  }
});
`;

/**
 * The permission model's flag: `--experimental-permission` on Node 20 (our machines), `--permission` from 22.13, where
 * the model became stable; Node 24 (the container images' base) no longer accepts the old name at all.
 */
export const permissionFlag = (version: string): string => {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 13) ? '--permission' : '--experimental-permission';
};
const PERMISSION_FLAG = permissionFlag(process.versions.node);

type FromChild =
  | { t: 'loaded'; ok: boolean; error?: string }
  | { t: 'call'; id: number; method: SandboxCall['method']; arg: unknown }
  | { t: 'done'; id: number; ok: boolean; value?: unknown; error?: string };

export interface SandboxOptions {
  readonly heapMb?: number;
  /** A reconcile that takes longer fails (the process is killed and restarted on the next round). */
  readonly reconcileTimeoutMs?: number;
}

const startProcess = (
  moduleText: string,
  onCall: (call: SandboxCall) => Promise<unknown>,
  options: SandboxOptions,
): Promise<{ handle: SandboxHandle; child: ChildProcess }> =>
  new Promise((resolveStart, rejectStart) => {
    const child = spawn(
      process.execPath,
      [
        PERMISSION_FLAG,
        '--no-warnings',
        `--max-old-space-size=${options.heapMb ?? 64}`,
        '--input-type=module',
        '-e',
        BOOTSTRAP,
      ],
      { env: {}, stdio: ['ignore', 'ignore', 'ignore', 'ipc'], cwd: '/' },
    );
    const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
    let seq = 0;
    let loaded = false;
    let exited = false;
    const failAll = (reason: string) => {
      for (const w of waiting.values()) w.reject(new Error(reason));
      waiting.clear();
    };
    child.on('exit', (code, signal) => {
      exited = true;
      const reason = `the extension process exited (${signal ?? code})`;
      if (!loaded) rejectStart(new Error(reason));
      failAll(reason);
    });
    child.on('error', (e) => {
      if (!loaded) rejectStart(e);
    });
    child.on('message', (raw) => {
      const m = raw as FromChild;
      if (m.t === 'loaded') {
        if (!m.ok) {
          child.kill('SIGKILL');
          rejectStart(new Error(`the controller module did not load: ${m.error ?? 'unknown'}`));
          return;
        }
        loaded = true;
        resolveStart({ handle, child });
      } else if (m.t === 'call') {
        onCall({ method: m.method, arg: m.arg } as SandboxCall).then(
          (value) => !exited && child.send({ t: 'result', id: m.id, ok: true, value }),
          (e: { code?: string; message?: string }) =>
            !exited &&
            child.send({
              t: 'result',
              id: m.id,
              ok: false,
              error: { code: e.code ?? 'internal', message: e.message ?? String(e) },
            }),
        );
      } else if (m.t === 'done') {
        const w = waiting.get(m.id);
        waiting.delete(m.id);
        if (w === undefined) return;
        if (m.ok) w.resolve(m.value);
        else w.reject(new Error(m.error ?? 'reconcile failed'));
      }
    });
    const handle: SandboxHandle = {
      reconcile: (request) =>
        new Promise((resolve, reject) => {
          if (exited) return reject(new Error('the extension process has exited'));
          const id = seq++;
          const timer = setTimeout(() => {
            waiting.delete(id);
            reject(new Error(`reconcile exceeded ${options.reconcileTimeoutMs ?? 30_000} ms`));
            child.kill('SIGKILL');
          }, options.reconcileTimeoutMs ?? 30_000);
          waiting.set(id, {
            resolve: (v) => {
              clearTimeout(timer);
              resolve(v as Awaited<ReturnType<SandboxHandle['reconcile']>>);
            },
            reject: (e) => {
              clearTimeout(timer);
              reject(e);
            },
          });
          child.send({ t: 'reconcile', id, request });
        }),
      alive: () => !exited,
    };
    child.send({ t: 'load', b64: Buffer.from(moduleText, 'utf8').toString('base64') });
  });

/** Start one sandboxed controller process for the scope; closing the scope kills it. */
export const startSandbox = (
  moduleText: string,
  onCall: (call: SandboxCall) => Promise<unknown>,
  options: SandboxOptions = {},
): Effect.Effect<SandboxHandle, SandboxFailed, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => startProcess(moduleText, onCall, options),
      catch: (e) => new SandboxFailed({ reason: e instanceof Error ? e.message : String(e) }),
    }),
    ({ child }) => Effect.sync(() => child.kill('SIGKILL')),
  ).pipe(Effect.map(({ handle }) => handle));

export const ExtensionSandboxesLive = Layer.succeed(ExtensionSandboxes, {
  start: (moduleText, onCall) => startSandbox(moduleText, onCall).pipe(Effect.mapError((e) => new Error(e.reason))),
});

// A whole Daemon in-process against an Authority in-process (no HTTP): the transport both daemon tests
// (daemon-rebind.it, ready-after-install.it, daemon-events.it) use, the daemon's run with its log, and the B processes.
import { performance } from 'node:perf_hooks';
import { Either } from 'effect';
import { InfoGetResponseCodec } from '../src/api/runtime.js';
import { makePgAuthorityStore } from '../src/adapter/postgresql/index.js';
import { Authority } from '../src/application/authority.js';
import type { AuthorityStore } from '../src/application/authority-store.js';
import { Daemon, type DaemonDeps, type DaemonTransport } from '../src/application/daemon.js';
import type { Bytes } from '../src/domain/bytes.js';
import { uuidText } from '../src/domain/ids.js';
import { controlledSchedule } from './port-fixtures.js';

/** The Authority a daemon talks to now (a failover test swaps it). */
export interface CurrentAuthority {
  readonly authority: Authority;
  readonly nsdId: Bytes;
}

/** The unary requests that are not Messages (spec §3.13 runtime paths), by name. */
export type ControlRequest = 'info.get' | 'node.register' | 'machine.auth' | 'machine.heartbeat';
const CONTROL: ReadonlyMap<string, ControlRequest> = new Map(
  (['info.get', 'node.register', 'machine.auth', 'machine.heartbeat'] as const).map((n) => [`/v1/${n}`, n]),
);

export interface TransportObserver {
  /** A runtime request that is not a Message, before B answers it. */
  readonly control?: (name: ControlRequest) => void;
  /** A Message request (its payload), before B answers it. */
  readonly message?: (payload: Uint8Array) => void;
  /** An event B sent on a config.stream, before the daemon gets it. */
  readonly event?: (payload: Uint8Array) => void;
  /** A config.stream B accepted; `push` delivers a payload on it as B's stream does (a test's own event). */
  readonly streamOpened?: (push: (payload: Uint8Array) => void) => void;
}

/** The daemon's transport, answered by whichever Authority `current()` names at the time of each request. */
export const inProcessTransport = (
  current: () => CurrentAuthority,
  identity: Bytes,
  observe: TransportObserver = {},
): DaemonTransport => ({
  unary: async (path, payload) => {
    const control = CONTROL.get(path);
    if (control === undefined) observe.message?.(payload);
    else observe.control?.(control);
    const B = current();
    if (path === '/v1/info.get')
      return InfoGetResponseCodec.encodeOrThrow({
        capabilities: ['service_control.v1'],
        service_control_nsd_id: uuidText(B.nsdId),
      });
    if (path === '/v1/node.register') return B.authority.registerNode(identity, payload);
    if (path === '/v1/machine.auth') return B.authority.machineAuth(identity, payload);
    if (path === '/v1/machine.heartbeat') return B.authority.heartbeat(identity, payload);
    return B.authority.handle(identity, payload);
  },
  stream: async (payload, onPayload, signal) => {
    let ended!: () => void;
    const done = new Promise<void>((r) => (ended = r));
    const o = await current().authority.openStream(identity, payload, {
      send: (p) => (observe.event?.(p), onPayload(p), true),
      close: () => ended(),
    });
    if (Either.isLeft(o)) throw o.left;
    observe.streamOpened?.(onPayload);
    signal.addEventListener('abort', () => (o.right.close(), ended()), { once: true });
    await o.right.start();
    await done;
  },
});

export interface LogLine {
  readonly event: string;
  readonly fields: Record<string, unknown>;
}

/**
 * One daemon process running until `stop()`: its log in order (a run that throws is logged as `failed`), the count
 * and the first index of an event. `close` releases what the caller opened for it (state files).
 */
export const runDaemon = (deps: Omit<DaemonDeps, 'log' | 'clock' | 'retryMs'>, close: () => void) => {
  const log: LogLine[] = [];
  const daemon = new Daemon({
    ...deps,
    clock: { nowMs: () => performance.now(), resolutionMs: 0 },
    log: (event, fields) => log.push({ event, fields }),
    retryMs: 200,
  });
  const ctl = new AbortController();
  const running = daemon
    .run(ctl.signal)
    .catch((e: unknown) => log.push({ event: 'failed', fields: { error: String(e) } }));
  const count = (event: string) => log.filter((l) => l.event === event).length;
  const at = (event: string, pred: (f: Record<string, unknown>) => boolean = () => true) =>
    log.findIndex((l) => l.event === event && pred(l.fields));
  const stop = async () => {
    ctl.abort();
    await running;
    close();
  };
  return { daemon, log, count, at, stop };
};

/** Poll until `f` holds (a daemon's progress is asynchronous), or fail naming what was awaited. */
export const eventually = async (f: () => boolean, what: string, ms = 60_000) => {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error(`not reached: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

/**
 * B processes on one database: `boot` starts one that takes over (epoch + 1 over the previous one, as a standby does
 * after a crash; the uncertain-proposal driver's timers wait for the test), `close` ends every one booted. `config` is
 * read at each boot (a test database's settings exist only inside its tests).
 */
export const authorityProcesses = (config: () => Parameters<typeof makePgAuthorityStore>[0]) => {
  const stores: AuthorityStore[] = [];
  const authorities: Authority[] = [];
  const boot = async () => {
    const store = makePgAuthorityStore(config());
    stores.push(store);
    await store.migrate();
    const t = await store.takeover();
    const authority = new Authority({
      store,
      nsdId: t.nsdId,
      epoch: t.epoch,
      now: () => Date.now(),
      portRecovery: { schedule: controlledSchedule().schedule },
    });
    authorities.push(authority);
    return { store, authority, ...t };
  };
  const close = async () => {
    for (const a of authorities) a.closeStreams();
    for (const s of stores) await s.close();
  };
  return { boot, close };
};

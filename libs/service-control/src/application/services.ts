// The application as Effect services (decision 0131): `Authority` and `Daemon` stay the implementations (Promise
// classes, tested as they are); these tags and layers are how processes assemble them. Every resource is acquired in
// a scope and released by its finalizer in reverse order — the app's streams and production before the store's
// pool, the daemon's run loop before its SQLite handle — so graceful shutdown is closing the scope.
import { Context, Effect, Layer } from 'effect';
import type { Bytes } from '../domain/bytes.js';
import type { ServiceControlError } from '../domain/errors.js';
import { Authority, type AuthorityDeps } from './authority.js';
import type { AuthorityStore } from './authority-store.js';
import { type AuthorityLeaseOptions, holdAuthority, monotonicMs, waitForAuthority } from './authority-holder.js';
import { Daemon, type DaemonDeps } from './daemon.js';
import type { DaemonStore } from './daemon-store.js';

/** Wall-clock milliseconds: the only time source of the applications (domain code gets `now` as a parameter). */
export class ControlClock extends Context.Tag('@homelab/service-control/ControlClock')<
  ControlClock,
  { readonly now: () => number }
>() {}
export const SystemControlClockLive = Layer.succeed(ControlClock, { now: () => Date.now() });

/** B's store port (the PostgreSQL adapter in nsd). */
export class AuthorityStoreService extends Context.Tag('@homelab/service-control/AuthorityStore')<
  AuthorityStoreService,
  AuthorityStore
>() {}
/** A's store port (the SQLite adapter in ns-daemon). */
export class DaemonStoreService extends Context.Tag('@homelab/service-control/DaemonStore')<
  DaemonStoreService,
  DaemonStore
>() {}

const storageFailure = (e: unknown): ServiceControlError => e as ServiceControlError;

/** An AuthorityStore opened in the scope: migrated on acquire, its pool closed on release. */
export const AuthorityStoreServiceLive = (
  open: () => AuthorityStore,
): Layer.Layer<AuthorityStoreService, ServiceControlError> =>
  Layer.scoped(
    AuthorityStoreService,
    Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const store = open();
          try {
            await store.migrate();
            return store;
          } catch (e) {
            await store.close().catch(() => undefined);
            throw e;
          }
        },
        catch: storageFailure,
      }),
      (store) => Effect.promise(() => store.close().catch(() => undefined)),
    ),
  );

/** A DaemonStore opened in the scope, closed on release. */
export const DaemonStoreServiceLive = (open: () => DaemonStore): Layer.Layer<DaemonStoreService, ServiceControlError> =>
  Layer.scoped(
    DaemonStoreService,
    Effect.acquireRelease(Effect.try({ try: open, catch: storageFailure }), (store) =>
      Effect.sync(() => store.close()),
    ),
  );

export interface AuthorityServiceShape {
  readonly authority: Authority;
  readonly nsdId: Bytes;
  readonly epoch: bigint;
}
/** B, serving: the epoch taken over and committed before anything is served (M6-12). */
export class AuthorityService extends Context.Tag('@homelab/service-control/Authority')<
  AuthorityService,
  AuthorityServiceShape
>() {}

export interface AuthorityOptions extends Pick<
  AuthorityDeps,
  'fault' | 'log' | 'leaseNow' | 'portRecovery' | 'observe' | 'shard'
> {
  /** Network membership to add at startup (the stand-in for the existing ownership), `[identity, network]`. */
  readonly members?: readonly (readonly [Bytes, Bytes])[];
  /**
   * The authority lease (decision 0400): stand by while another holder's lease is live, take over when it ends,
   * renew while serving. Without it the process takes over at start, whoever held it (decision 0332).
   */
  readonly lease?: AuthorityLeaseOptions;
}

/**
 * Startup order of B: take over the epoch (committed), add the configured members, build the Authority, produce
 * snapshots for outbox rows left by a crash. Release: close the streams, wait for queued snapshot production.
 */
export const AuthorityServiceLive = (
  options: AuthorityOptions = {},
): Layer.Layer<AuthorityService, ServiceControlError, AuthorityStoreService | ControlClock> =>
  Layer.scoped(
    AuthorityService,
    Effect.gen(function* () {
      const store = yield* AuthorityStoreService;
      const clock = yield* ControlClock;
      const { members, lease, ...deps } = options; // the rest are the Authority's own optional dependencies
      const mono = monotonicMs; // one time line for every thread: a renewal thread continues the lease (decision 0470)
      // standing by is interruptible (a standby stops at once on SIGTERM); the takeover itself is not
      // the holder made ready while standing by (decision 0650: nsd's renewal thread boots before the takeover, idle);
      // closed with the scope, which ends it only when it never took the lease
      const prepare = lease?.hold?.prepare;
      const prepared =
        prepare === undefined
          ? null
          : yield* Effect.acquireRelease(
              Effect.sync(() => prepare(options.log)),
              (p) => Effect.promise(() => p.close()),
            );
      const acquired =
        lease === undefined
          ? null
          : yield* Effect.tryPromise({
              try: (signal) => waitForAuthority(store, lease, mono, signal, options.log),
              catch: storageFailure,
            });
      const held = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            const { nsdId, epoch } = acquired ?? (await store.takeover());
            // start-up progress: each step is visible; a takeover of a running lease whose holder's session ended
            // (decision 0600) says so
            options.log?.('epoch-taken-over', {
              epoch: String(epoch),
              ...(acquired?.holderSessionEnded === true ? { holder_session_ended: true } : {}),
            });
            // the lease is renewed from the takeover on, also while the outbox is drained below
            const holding =
              lease === undefined || acquired === null
                ? null
                : prepared !== null
                  ? prepared.hold(store, lease, epoch, acquired.sentAt, options.log)
                  : lease.hold !== undefined
                    ? lease.hold(store, lease, epoch, acquired.sentAt, options.log)
                    : holdAuthority(store, lease, epoch, acquired.sentAt, mono, options.log);
            try {
              for (const [identity, network] of members ?? []) await store.addMember(identity, network);
              const authority = new Authority({ store, nsdId, epoch, now: clock.now, ...deps });
              const drained = await authority.drainOutbox();
              const due = await authority.resumeNextCandidates(); // pure refusals that were waiting for their next candidate (§5.14)
              options.log?.('authority-ready', { outbox_rows: drained, next_candidates_due: due });
              return { service: { authority, nsdId, epoch }, holding };
            } catch (e) {
              await holding?.stop(true);
              throw e;
            }
          },
          catch: storageFailure,
        }),
        ({ service: { authority }, holding }) =>
          Effect.promise(async () => {
            authority.closeStreams();
            await authority.idle();
            await holding?.stop(true); // a standby takes over without waiting for the lease to run out
          }),
      );
      return held.service;
    }),
  );

/** A, running: the §3.4 flow started in the scope; release aborts it and waits until it has stopped. */
export class DaemonService extends Context.Tag('@homelab/service-control/Daemon')<DaemonService, Daemon>() {}

export const DaemonServiceLive = (
  deps: Omit<DaemonDeps, 'store'>,
): Layer.Layer<DaemonService, never, DaemonStoreService> =>
  Layer.scoped(
    DaemonService,
    Effect.gen(function* () {
      const store = yield* DaemonStoreService;
      const daemon = new Daemon({ ...deps, store });
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const ctl = new AbortController();
          const running = daemon
            .run(ctl.signal)
            .catch((e: unknown) => deps.log?.('failed', { error: String(e), code: (e as { code?: string }).code }));
          return { ctl, running };
        }),
        ({ ctl, running }) =>
          Effect.promise(async () => {
            ctl.abort();
            await running;
          }),
      );
      return daemon;
    }),
  );

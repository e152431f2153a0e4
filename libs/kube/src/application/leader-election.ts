// Leader election: acquire a Lease, run the leader's work while renewing it, and stop that work the moment the
// lease cannot be renewed within the renew deadline. Graceful stop releases the lease so a peer takes over at
// once; a crashed leader is replaced once its lease duration has passed.
import { Clock, Data, Deferred, Duration, Effect, Fiber, Random, Ref, type Scope } from 'effect';
import type { KubeObject, LeaseSpec } from '../api/objects.js';
import { decide, defaultLeaderTiming, microTime, type LeaderTiming, type Observation } from '../domain/leader.js';
import type { KubeError } from '../domain/errors.js';
import { KubeClient } from './kube-client.js';

export interface LeaderElectionConfig {
  readonly namespace: string;
  readonly name: string;
  /** This candidate's identity (pod name + random suffix, typically). */
  readonly identity: string;
  readonly leaseDuration?: Duration.DurationInput;
  readonly renewDeadline?: Duration.DurationInput;
  readonly retryPeriod?: Duration.DurationInput;
  /** On graceful stop, hand the lease back (holder cleared) so a peer need not wait for expiry. Default true. */
  readonly releaseOnCancel?: boolean;
  /** Told about leadership changes (metrics, logs). */
  readonly onChange?: (leading: boolean) => Effect.Effect<void>;
}

export class LeadershipLost extends Data.TaggedError('LeadershipLost')<{
  readonly identity: string;
  readonly lease: string;
  readonly reason: string;
}> {
  override get message(): string {
    return `${this.identity} lost the lease ${this.lease}: ${this.reason}`;
  }
}

type LeaseObject = KubeObject & { readonly spec?: LeaseSpec };

const timingOf = (c: LeaderElectionConfig): LeaderTiming => ({
  leaseDurationMs:
    c.leaseDuration !== undefined
      ? Duration.toMillis(Duration.decode(c.leaseDuration))
      : defaultLeaderTiming.leaseDurationMs,
  renewDeadlineMs:
    c.renewDeadline !== undefined
      ? Duration.toMillis(Duration.decode(c.renewDeadline))
      : defaultLeaderTiming.renewDeadlineMs,
  retryPeriodMs:
    c.retryPeriod !== undefined ? Duration.toMillis(Duration.decode(c.retryPeriod)) : defaultLeaderTiming.retryPeriodMs,
});

/**
 * Run `work` only while this candidate holds the lease. Waits (retrying every retryPeriod with jitter) to acquire;
 * then runs `work` in its own scope and renews. If renewal fails for renewDeadline, `work` is interrupted and the
 * effect fails with LeadershipLost (controller-runtime exits the process at that point; callers usually do too).
 * If `work` ends, or this effect is interrupted, the lease is released (releaseOnCancel).
 */
export const runAsLeader = <A, E, R>(
  config: LeaderElectionConfig,
  work: Effect.Effect<A, E, R | Scope.Scope>,
): Effect.Effect<A, E | LeadershipLost, R | KubeClient> =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const timing = timingOf(config);
    const ref = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: config.namespace, name: config.name };
    const observed = yield* Ref.make<Observation | undefined>(undefined);
    const notify = (leading: boolean) => (config.onChange ? config.onChange(leading) : Effect.void);

    /** One attempt: true when we hold the lease afterwards. Conflicts and transient errors count as "not now". */
    const tryAcquireOrRenew: Effect.Effect<boolean, never> = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis;
      const current = yield* client.get<LeaseObject>(ref).pipe(
        Effect.map((o) => ({ object: o as LeaseObject | undefined })),
        Effect.catchTag('NotFound', () => Effect.succeed({ object: undefined as LeaseObject | undefined })),
      );
      const d = decide(
        current.object?.spec ?? (current.object ? {} : undefined),
        yield* Ref.get(observed),
        config.identity,
        now,
        timing,
      );
      if (d._tag === 'HeldByOther') {
        yield* Ref.set(observed, d.observation);
        return false;
      }
      const written =
        d._tag === 'Create'
          ? yield* client.create<LeaseObject>({
              apiVersion: ref.apiVersion,
              kind: 'Lease',
              metadata: { name: ref.name, namespace: ref.namespace },
              spec: d.spec,
            })
          : yield* client.update<LeaseObject>({ ...(current.object as LeaseObject), spec: d.spec });
      yield* Ref.set(observed, { record: JSON.stringify(written.spec ?? {}), observedAt: now });
      return true;
    }).pipe(Effect.catchAll((_: KubeError) => Effect.succeed(false)));

    const jittered = Effect.flatMap(Random.next, (r) =>
      Effect.sleep(Duration.millis(timing.retryPeriodMs * (1 + 0.2 * r))),
    );

    // acquire
    while (!(yield* tryAcquireOrRenew)) yield* jittered;
    yield* notify(true);

    const release = Effect.gen(function* () {
      if (config.releaseOnCancel === false) return;
      const o = yield* client.get<LeaseObject>(ref);
      if (o.spec?.holderIdentity !== config.identity) return;
      const now = yield* Clock.currentTimeMillis;
      yield* client.update<LeaseObject>({
        ...o,
        spec: { ...o.spec, holderIdentity: null, leaseDurationSeconds: 1, renewTime: microTime(now) },
      });
    }).pipe(Effect.ignore);

    const lost = yield* Deferred.make<never, LeadershipLost>();
    // renew every retryPeriod; give up when no renewal succeeded within renewDeadline
    const renewer = Effect.gen(function* () {
      let lastRenew = yield* Clock.currentTimeMillis;
      for (;;) {
        yield* Effect.sleep(Duration.millis(timing.retryPeriodMs));
        const ok = yield* tryAcquireOrRenew;
        const now = yield* Clock.currentTimeMillis;
        if (ok) lastRenew = now;
        else if (now - lastRenew >= timing.renewDeadlineMs)
          return yield* Deferred.fail(
            lost,
            new LeadershipLost({
              identity: config.identity,
              lease: `${config.namespace}/${config.name}`,
              reason: `no renewal within ${timing.renewDeadlineMs} ms`,
            }),
          );
      }
    });

    const renewFiber = yield* Effect.fork(renewer);
    const result = yield* Effect.raceFirst(Effect.scoped(work), Deferred.await(lost)).pipe(
      Effect.ensuring(
        Effect.gen(function* () {
          yield* Fiber.interrupt(renewFiber);
          if (!(yield* Deferred.isDone(lost))) yield* release;
          yield* notify(false);
        }),
      ),
    );
    return result;
  });

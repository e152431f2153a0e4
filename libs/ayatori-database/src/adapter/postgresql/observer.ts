// The PostgreSQL side of the Instance use case (seed: application.InstanceService over adapter/postgresql): runs
// `observationProgram` with real `pg` pools, one per Instance name, and the admin Secret read through the
// `AdminSecrets` port. Observations are serial (one semaphore, as the seed's mutex); the pool decisions — reuse,
// replace, release on failure or on a credential change — are the program's, the adapter only executes them.
// Only the two read-only, pg_catalog-qualified statements of the domain are ever sent. Nothing of a driver error
// (message, detail, host, user) reaches a result: failures become `ObservationError` kinds.
import { Effect, Either, Layer } from 'effect';
import pg from 'pg';
import {
  InspectManagementStatement,
  InspectMetadataStatement,
  parseManagementRow,
  parseMetadataRow,
} from '../../domain/inspection-sql.js';
import type { ObservationTarget } from '../../domain/instance.js';
import {
  type ConnectFact,
  type InspectFact,
  type ObservationAction,
  type ObservationMode,
  type ObservationOutcome,
  observationProgram,
  type PoolMemory,
} from '../../application/observation.js';
import {
  AdminSecrets,
  type InstanceObservation,
  InstanceObserver,
  ObservationError,
  type SecretFact,
} from '../../application/ports.js';
import { classifyConnectError, type ConnectorOptions, poolConfig } from './connection.js';

interface Held {
  readonly pool: pg.Pool;
  memory: PoolMemory | undefined;
}

export interface PostgresObserver {
  readonly observeManagement: (target: ObservationTarget) => Effect.Effect<InstanceObservation, ObservationError>;
  readonly observeMetadata: (target: ObservationTarget) => Effect.Effect<InstanceObservation, ObservationError>;
  readonly forget: (name: string) => Effect.Effect<void>;
  /** Release every pool; later observations fail (`Other`). */
  readonly close: Effect.Effect<void>;
  /** Names of the Instances that currently hold a pool (for tests and metrics). */
  readonly held: () => ReadonlyArray<string>;
}

const endPool = (pool: pg.Pool): Effect.Effect<void> => Effect.promise(() => pool.end().catch(() => undefined));
/**
 * Ends a pool without waiting: a pool left by an interrupted round may hold a client whose query is still running
 * (the round's budget ran out while the server stalled); `end` closes it once that query returns, and waiting for
 * it here would stall the next round behind the same server.
 */
const endPoolDetached = (pool: pg.Pool): Effect.Effect<void> =>
  Effect.sync(() => {
    void pool.end().catch(() => undefined);
  });

/** Build an observer over `pg`, reading admin Secrets with `readSecret`. */
export const makePostgresObserver = (
  readSecret: (name: string) => Effect.Effect<SecretFact>,
  options: ConnectorOptions = {},
) =>
  Effect.gen(function* () {
    const pools = new Map<string, Held>();
    const lock = yield* Effect.makeSemaphore(1);
    let closed = false;

    const release = (name: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const held = pools.get(name);
        if (held === undefined) return Effect.void;
        pools.delete(name);
        return endPool(held.pool);
      });

    const connect = (action: Extract<ObservationAction, { _tag: 'Connect' }>): Effect.Effect<ConnectFact> =>
      Effect.gen(function* () {
        // A pool still held under this name belongs to a round that was interrupted before it recorded the pool's
        // memory (its budget ran out during the check): the program no longer knows it, so it is ended here instead
        // of being overwritten and leaked (issue 21).
        const stale = pools.get(action.target.name);
        if (stale !== undefined) {
          pools.delete(action.target.name);
          yield* endPoolDetached(stale.pool);
        }
        const pool = new pg.Pool(poolConfig(action.target.endpoint, action.credentials, options));
        // Swallow idle-client errors (a server restart): the next observation fails and replaces the pool.
        pool.on('error', () => undefined);
        const connected = yield* Effect.tryPromise({
          try: async () => (await pool.connect()).release(),
          catch: classifyConnectError,
        }).pipe(
          Effect.either,
          // interrupted while connecting: the pool is in no map, so end it (its client when the connect completes)
          Effect.onInterrupt(() => endPoolDetached(pool)),
        );
        if (Either.isLeft(connected)) {
          yield* endPool(pool);
          return { _tag: 'Failed', kind: connected.left } satisfies ConnectFact;
        }
        pools.set(action.target.name, { pool, memory: undefined });
        return { _tag: 'Connected' } satisfies ConnectFact;
      });

    const inspect = (name: string, mode: ObservationMode): Effect.Effect<InspectFact> => {
      const held = pools.get(name);
      if (held === undefined) return Effect.succeed({ _tag: 'Failed' });
      const text = mode === 'management' ? InspectManagementStatement : InspectMetadataStatement;
      return Effect.tryPromise(() => held.pool.query({ text, rowMode: 'array' })).pipe(
        Effect.map((result): InspectFact => {
          if (result.rows.length !== 1) return { _tag: 'Failed' };
          if (mode === 'management') {
            const parsed = parseManagementRow(result.rows[0]);
            return Either.isLeft(parsed)
              ? { _tag: 'Failed' }
              : { _tag: 'Management', metadata: parsed.right.metadata, role: parsed.right.role };
          }
          const parsed = parseMetadataRow(result.rows[0]);
          return Either.isLeft(parsed) ? { _tag: 'Failed' } : { _tag: 'Metadata', metadata: parsed.right };
        }),
        Effect.orElseSucceed((): InspectFact => ({ _tag: 'Failed' })),
      );
    };

    const perform = (action: ObservationAction): Effect.Effect<unknown> => {
      switch (action._tag) {
        case 'ReadSecret':
          return readSecret(action.name);
        case 'Release':
          return release(action.instance);
        case 'Connect':
          return connect(action);
        case 'Inspect':
          return inspect(action.instance, action.mode);
      }
    };

    const observe = (
      target: ObservationTarget,
      mode: ObservationMode,
    ): Effect.Effect<InstanceObservation, ObservationError> =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          if (closed) return yield* new ObservationError({ kind: 'Other' });
          const program = observationProgram(target, pools.get(target.name)?.memory, mode);
          let next = program.next();
          while (!next.done) next = program.next(yield* perform(next.value));
          const outcome: ObservationOutcome = next.value;
          if (outcome._tag === 'InvalidObservationTarget') return yield* new ObservationError({ kind: 'Other' });
          const held = pools.get(target.name);
          if (outcome.pool === undefined) {
            // The program released what it had; a pool it never learned about (connect then failure) goes too.
            yield* release(target.name);
          } else if (held !== undefined) {
            held.memory = outcome.pool;
          }
          if (outcome._tag === 'Failed') return yield* new ObservationError({ kind: outcome.kind });
          return outcome.observation;
        }),
      );

    const forget = (name: string) => lock.withPermits(1)(release(name));
    const close = lock.withPermits(1)(
      Effect.suspend(() => {
        closed = true;
        const names = [...pools.keys()];
        return Effect.forEach(names, release, { discard: true });
      }),
    );
    return {
      observeManagement: (target: ObservationTarget) => observe(target, 'management'),
      observeMetadata: (target: ObservationTarget) => observe(target, 'metadata'),
      forget,
      close,
      held: () => [...pools.keys()],
    } satisfies PostgresObserver;
  });

/**
 * `InstanceObserver` over `pg`, scoped: closing the scope (manager shutdown, after the workers stopped) releases
 * every pool.
 */
export const PostgresInstanceObserverLive = (
  options: ConnectorOptions = {},
): Layer.Layer<InstanceObserver, never, AdminSecrets> =>
  Layer.scoped(
    InstanceObserver,
    Effect.gen(function* () {
      const secrets = yield* AdminSecrets;
      const observer = yield* Effect.acquireRelease(makePostgresObserver(secrets.read, options), (o) => o.close);
      return { observeManagement: observer.observeManagement, forget: observer.forget };
    }),
  );

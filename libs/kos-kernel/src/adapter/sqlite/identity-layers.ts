// One place that assembles the identity module over the control-plane database, for apps/controller and offline tools.
import { Context, Effect, Layer } from 'effect';
import type { ObjectReference } from '../../api/http/errors.js';
import { type AuditRecord, AuditLog, Auditor } from '../../application/control-plane/services.js';
import {
  bootstrapOwner,
  type Bootstrap,
  Identity,
  IdentityLive,
  resetOwner,
} from '../../application/identity/identity.js';
import type { DatabaseUnavailable, InvalidIdentityField } from '../../application/identity/errors.js';
import {
  Audits,
  IdentityRandom,
  IdentityRandomLive,
  IdentityStore,
  type OwnedObjects,
  PasswordHasher,
} from '../../application/identity/ports.js';
import { type Argon2Parameters, Argon2idHasherLive } from '../crypto/argon2.js';
import { ControlPlaneDb, ControlPlaneDbLive, type ControlPlaneDbOptions } from './control-plane-db.js';
import { SqliteAuditsLive, SqliteIdentityStoreLive } from './identity-store.js';

export interface IdentityDbOptions extends ControlPlaneDbOptions {
  /** argon2id parameters (default OWASP's m=19 MiB, t=2, p=1). */
  readonly argon2?: Argon2Parameters;
}

export type IdentityPorts = ControlPlaneDb | IdentityStore | Audits | PasswordHasher | IdentityRandom;

/** The control-plane database and every identity port except OwnedObjects. */
export const IdentityPortsLive = (options: IdentityDbOptions): Layer.Layer<IdentityPorts> =>
  Layer.mergeAll(SqliteIdentityStoreLive, SqliteAuditsLive).pipe(
    Layer.provideMerge(ControlPlaneDbLive(options)),
    Layer.merge(Argon2idHasherLive(options.argon2)),
    Layer.merge(IdentityRandomLive),
  );

/** `Identity` plus its ports; the app supplies `OwnedObjects` (the cluster's spec.owner index). */
export const IdentityModuleLive = (
  options: IdentityDbOptions,
): Layer.Layer<Identity | IdentityPorts, never, OwnedObjects> =>
  IdentityLive.pipe(Layer.provideMerge(IdentityPortsLive(options)));

/**
 * The control plane's existing `Auditor`/`AuditLog` (application/control-plane/services.ts) over the audit stream, so
 * the router's records land in the database. A record that cannot be written is logged, never fails the request.
 */
export const AuditorFromAuditsLive: Layer.Layer<Auditor | AuditLog, never, Audits> = Layer.effectContext(
  Effect.gen(function* () {
    const audits = yield* Audits;
    const record = (entry: Omit<AuditRecord, 'at'>) =>
      audits
        .append({
          actor: entry.actor,
          verb: entry.verb,
          ...(entry.object !== undefined ? { object: entry.object } : {}),
          result: entry.outcome,
          ...(entry.code !== undefined ? { code: entry.code } : {}),
          ...(entry.message !== undefined ? { message: entry.message } : {}),
          source: 'api',
          ...(entry.extension !== undefined ? { extensionId: entry.extension } : {}),
        })
        .pipe(
          Effect.catchAll((e) => Effect.logError(`audit record lost (${e.message}): ${entry.actor} ${entry.verb}`)),
        );
    const entries = audits.page({ limit: 1000 }).pipe(
      Effect.map((page) =>
        page.items
          .slice()
          .reverse()
          .map((r): AuditRecord => ({
            at: new Date(r.at).toISOString(),
            actor: r.actor,
            verb: r.verb as AuditRecord['verb'],
            ...(r.object !== undefined ? { object: r.object as ObjectReference } : {}),
            outcome: r.result,
            ...(r.code !== undefined ? { code: r.code } : {}),
            ...(r.message !== undefined ? { message: r.message } : {}),
            ...(r.extensionId !== undefined ? { extension: r.extensionId } : {}),
          })),
      ),
      Effect.orElseSucceed((): ReadonlyArray<AuditRecord> => []),
    );
    return Context.make(Auditor, { record }).pipe(Context.add(AuditLog, { entries }));
  }),
);

/** First start: create the Owner and return its one-time password (undefined when accounts exist). */
export const bootstrapOwnerOn = (
  options: IdentityDbOptions,
  name?: string,
): Effect.Effect<Bootstrap | undefined, DatabaseUnavailable> =>
  bootstrapOwner(name).pipe(Effect.provide(IdentityPortsLive(options)));

/** Offline `controller accounts reset-owner` on the database file (the control plane must be stopped). */
export const resetOwnerOffline = (
  options: IdentityDbOptions,
  name?: string,
): Effect.Effect<Bootstrap, DatabaseUnavailable | InvalidIdentityField> =>
  resetOwner(name).pipe(Effect.provide(IdentityPortsLive(options)));

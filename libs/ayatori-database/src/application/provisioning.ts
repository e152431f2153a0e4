// Provisioning, credential delivery, rotation and reclaim of a dynamic Database (issue 21; spec §3.3–3.6, §4.1):
// the use case that turns a Bound Tenant into a working database, and a deleted Tenant into Released or a clean
// removal. It coordinates four ports — Kubernetes (`ProvisioningResources`, `BindingResources` for the Tenant's
// status), PostgreSQL (`DatabaseServer`), OpenBao (`CredentialStore`) and the CSPRNG (`Entropy`) — and asks the pure
// rules of `domain/provisioning.ts` for every next step.
//
// Order of one provisioning round (each write read back before the next one; a crash anywhere leaves facts from
// which the next round continues, see `provisioning.it.test.ts`):
//   1. record `status.credentialPath = <basePath>/<Database UID>` and phase Provisioning on the Database;
//   2. server steps (role, membership, database, CONNECT, extensions), each answering its own read-back;
//   3. the credential: read the recorded location; only if nothing is stored there, generate 32 CSPRNG bytes and
//      create it (`cas: 0`, read back); Conflict/Uncertain stop the round, a stored credential is never regenerated;
//   4. `ALTER ROLE … PASSWORD` from the credential as read back, then a login as that role to its database;
//   5. Database phase Available, Ready=True;
//   6. the projection Secret (seven keys) in the Tenant's namespace, then the Tenant Ready=True with
//      `status.secretName` and `status.credentialURL`.
// A Ready Tenant whose Database is Available and whose Secret exists costs no SQL and no OpenBao request.
import { randomBytes } from 'node:crypto';
import { Context, type Duration, Effect, Either, Layer, Option } from 'effect';
import * as Binding from '../domain/binding.js';
import {
  additionalSecretData,
  ApplicationCredential,
  type CredentialError,
  type CredentialScope,
  credentialURL,
  provisionPath,
} from '../domain/credential-location.js';
import type { TenantPresentation } from '../domain/presentation.js';
import {
  DatabaseMessage,
  DatabaseReason,
  nextProvisionStep,
  nextReclaimStep,
  type ProvisionTarget,
  ProvisioningPhase,
  projectionSecretName,
  type ReclaimFacts,
  TenantReadyMessage,
  TenantReadyReason,
} from '../domain/provisioning.js';
import { DatabaseSource, TenantPhase, TenantReason, Timing } from '../domain/vocabulary.js';
import { bindingRequeue, runBinding } from './binding.js';
import { type PresentedState, statusEvent } from '../domain/events.js';
import {
  BindingResources,
  type BindingTenant,
  CredentialStore,
  EventRecorder,
  type EventSubject,
  DatabaseServer,
  type DatabasePresentation,
  type ProvisioningDatabase,
  type ProvisioningInstance,
  ProvisioningResources,
  type KubernetesError,
  type ServerError,
  type ServerNames,
} from './ports.js';

/** Where credentials live and how their URL is written (`--openbao-address`, mount, base path). */
export interface ProvisioningConfig {
  readonly scope: CredentialScope;
  readonly openBaoAddress: string;
}
export class ProvisioningSettings extends Context.Tag('@homelab/ayatori-database/ProvisioningSettings')<
  ProvisioningSettings,
  ProvisioningConfig
>() {}

/** 32 bytes from a CSPRNG for a new password (a Tag so a test can count or fix them; production: randomBytes). */
export class Entropy extends Context.Tag('@homelab/ayatori-database/Entropy')<
  Entropy,
  { readonly bytes: Effect.Effect<Uint8Array> }
>() {}
export const CryptoEntropyLive = Layer.succeed(Entropy, {
  bytes: Effect.sync(() => new Uint8Array(randomBytes(32))),
});

/** The ports provisioning needs. */
export type ProvisioningServices =
  ProvisioningResources | DatabaseServer | CredentialStore | ProvisioningSettings | Entropy | EventRecorder;

/** One Event when (phase, reason) changed between what a round found and what it stored (decision 0310). */
const announce = (subject: EventSubject, before: PresentedState, after: PresentedState) =>
  Effect.gen(function* () {
    const event = statusEvent(before, after);
    if (event === undefined) return;
    const events = yield* EventRecorder;
    yield* events.emit(subject, event);
  });

/** The Database's status write (read back), and its Event when phase or reason changed. */
export const recordDatabase = (database: ProvisioningDatabase, status: DatabasePresentation) =>
  Effect.gen(function* () {
    const kube = yield* ProvisioningResources;
    const written = yield* kube.recordDatabase(database, status);
    yield* announce(
      { kind: 'PostgreSQLDatabase', name: written.identity.name, namespace: '', uid: written.identity.uid },
      { phase: database.phase, reason: database.readyReason ?? '' },
      { phase: written.phase, reason: written.readyReason ?? status.reason },
    );
    return written;
  });

/** The Tenant's status write, and its Event when phase or reason changed. */
const presentTenant = (tenant: BindingTenant, status: TenantPresentation) =>
  Effect.gen(function* () {
    const resources = yield* BindingResources;
    yield* resources.present(tenant, status);
    const { namespace, name, uid } = tenant.identity;
    yield* announce(
      { kind: 'PostgreSQLTenant', name, namespace, uid },
      { phase: tenant.phase, reason: tenant.readyReason ?? '' },
      { phase: status.phase === '' ? tenant.phase : status.phase, reason: status.reason },
    );
  });

/** A round that stopped: what to present on the Database (if anything) and on the Tenant. */
class Stop {
  constructor(
    readonly tenantReason: string,
    readonly tenantMessage: string,
    readonly database?: DatabasePresentation,
  ) {}
}

/** At most this many steps per round (the contract has 5 + one per extension; Delete has 6). */
const MaxSteps = 32;

const names = (database: ProvisioningDatabase): ServerNames => ({ role: database.loginRole, database: database.name });

const serverStop = (phase: string, error: ServerError): Stop => {
  switch (error.code) {
    case 'ManagementCheck':
      return new Stop(TenantReason.DependencyUnavailable, DatabaseMessage.managementCheckFailed, {
        phase,
        ready: false,
        reason: DatabaseReason.InsufficientPrivileges,
        message: DatabaseMessage.managementCheckFailed,
      });
    case 'Credentials':
    case 'Authentication':
      return new Stop(TenantReason.DependencyUnavailable, DatabaseMessage.instanceNotReady, {
        phase,
        ready: false,
        reason: DatabaseReason.AuthenticationFailed,
        message: DatabaseMessage.instanceNotReady,
      });
    default: {
      const message = DatabaseMessage.statementFailed(
        error.message.split(':')[0] ?? 'statement',
        error.sqlstate || '-',
      );
      return new Stop(TenantReason.DependencyUnavailable, message, {
        phase,
        ready: false,
        reason: DatabaseReason.ProvisioningFailed,
        message,
      });
    }
  }
};

const credentialStop = (phase: string, error: CredentialError): Stop => {
  const message =
    error.code === 'Conflict' || error.code === 'ApplicationCredentialInvalid'
      ? DatabaseMessage.credentialConflict
      : DatabaseMessage.credentialFailed(error.code);
  const reason =
    error.code === 'Conflict' || error.code === 'Uncertain' || error.code === 'ApplicationCredentialInvalid'
      ? DatabaseReason.Conflict
      : DatabaseReason.DependencyUnavailable;
  return new Stop(
    reason === DatabaseReason.Conflict ? TenantReason.Conflict : TenantReason.DependencyUnavailable,
    message,
    {
      phase,
      ready: false,
      reason,
      message,
    },
  );
};

/** The instance a Database may be provisioned on: present, not deleting, Ready now, and the one it recorded. */
const usableInstance = (instance: ProvisioningInstance | undefined, database: ProvisioningDatabase) =>
  instance !== undefined &&
  !instance.deleting &&
  instance.ready &&
  instance.target.uid === database.instanceUID &&
  database.instanceUID !== '';

/**
 * The credential for this Database: read the recorded location; create it only when nothing is stored there. When
 * this very round recorded the location (`recordedNow`), nothing can be stored there yet — every external write
 * follows the location's record, and the record is conditioned on the snapshot — so the read is skipped; the
 * create-only write (`cas: 0`) would still refuse to overwrite (decision 0313).
 */
const ensureCredential = (
  database: ProvisioningDatabase,
  instance: ProvisioningInstance,
  path: string,
  recordedNow: boolean,
): Effect.Effect<ApplicationCredential, Stop, CredentialStore | Entropy> =>
  Effect.gen(function* () {
    const store = yield* CredentialStore;
    const phase = ProvisioningPhase.Provisioning;
    const read: Effect.Effect<ApplicationCredential | undefined, CredentialError> = recordedNow
      ? Effect.succeed(undefined)
      : store.read(path);
    const stored = yield* read.pipe(
      Effect.map((c): ApplicationCredential | undefined => c),
      Effect.catchIf(
        (e) => e.code === 'NotFound',
        () => Effect.succeed(undefined),
      ),
      Effect.mapError((e) => credentialStop(phase, e)),
    );
    const credential =
      stored ??
      (yield* Effect.gen(function* () {
        const entropy = yield* Effect.flatMap(Entropy, (e) => e.bytes);
        const fresh = ApplicationCredential.fromEntropy(
          database.loginRole,
          database.name,
          { ...instance.target.endpoint, managementDatabase: database.name },
          entropy,
        );
        if (Either.isLeft(fresh)) return yield* Effect.fail(credentialStop(phase, fresh.left));
        // The value used from here on is the one the create read back, never the one in memory.
        return yield* store.create(path, fresh.right).pipe(Effect.mapError((e) => credentialStop(phase, e)));
      }));
    const data = credential.secretData();
    const endpoint = instance.target.endpoint;
    if (
      data.username !== database.loginRole ||
      data.database !== database.name ||
      data.hostaddr !== endpoint.hostAddr ||
      data.port !== String(endpoint.port)
    ) {
      return yield* Effect.fail(
        new Stop(TenantReason.Conflict, DatabaseMessage.credentialConflict, {
          phase,
          ready: false,
          reason: DatabaseReason.Conflict,
          message: DatabaseMessage.credentialConflict,
        }),
      );
    }
    return credential;
  });

/**
 * Server steps until the facts say provisioned. The facts are read once (with the fresh management check), then
 * each step answers its own read-back (the same connection, after its statements returned) and the next step is
 * decided from that read-back (decision 0313).
 */
const provisionServer = (
  database: ProvisioningDatabase,
  instance: ProvisioningInstance,
  target: ProvisionTarget,
): Effect.Effect<void, Stop, DatabaseServer> =>
  Effect.gen(function* () {
    const server = yield* DatabaseServer;
    const phase = ProvisioningPhase.Provisioning;
    const scope = { extensions: target.extensions.length > 0 };
    let facts = yield* server
      .facts(instance.target, names(database), scope)
      .pipe(Effect.mapError((e) => serverStop(phase, e)));
    let previous: string | undefined;
    for (let i = 0; i < MaxSteps; i++) {
      const decision = nextProvisionStep(facts, target);
      if (decision._tag === 'Provisioned') return;
      if (decision._tag === 'Refused') {
        const tenantReason =
          decision.reason === DatabaseReason.Conflict ? TenantReason.Conflict : TenantReason.DependencyUnavailable;
        return yield* Effect.fail(
          new Stop(tenantReason, decision.message, {
            phase,
            ready: false,
            reason: decision.reason,
            message: decision.message,
          }),
        );
      }
      const key = decision._tag === 'InstallExtension' ? `${decision._tag}:${decision.extension}` : decision._tag;
      if (key === previous) {
        // The step ran but the read-back does not show it: never loop on it.
        const message = DatabaseMessage.statementFailed(decision._tag, 'read-back');
        return yield* Effect.fail(
          new Stop(TenantReason.DependencyUnavailable, message, {
            phase,
            ready: false,
            reason: DatabaseReason.ProvisioningFailed,
            message,
          }),
        );
      }
      previous = key;
      facts = yield* server
        .step(instance.target, names(database), decision, scope)
        .pipe(Effect.mapError((e) => serverStop(phase, e)));
    }
  });

const dependencyWait = (database?: DatabasePresentation) =>
  new Stop(TenantReason.DependencyUnavailable, DatabaseMessage.instanceNotReady, database);

/**
 * Provision the Tenant's bound Database and deliver its credential. Returns the Tenant presentation: Ready=True
 * (`CredentialsDelivered`) or Ready=False with a reason; the Database's own status is written here.
 */
export const provisionTenant = Effect.fn('provisionTenant')(function* (
  tenant: BindingTenant,
  bound: Binding.Identity,
  bindingComplete: TenantPresentation,
) {
  const kube = yield* ProvisioningResources;
  const settings = yield* ProvisioningSettings;
  const server = yield* DatabaseServer;
  const store = yield* CredentialStore;
  const read = yield* kube.database(bound.name);
  if (read === undefined || read.identity.uid !== bound.uid) return bindingComplete;
  // An imported Database is verified by its own round (application/import.ts); here it is only delivered.
  if (read.source === DatabaseSource.Import) return yield* deliverImported(tenant, read, bound);
  if (read.source !== DatabaseSource.Provision) return bindingComplete;
  let database: ProvisioningDatabase = read;
  const secretName = projectionSecretName(tenant.secretName, database.instance, tenant.identity.name);
  const location = Either.getOrUndefined(provisionPath(settings.scope, database.identity.uid));
  const url =
    location === undefined
      ? undefined
      : Either.getOrUndefined(credentialURL(settings.openBaoAddress, settings.scope, location));
  const delivered: TenantPresentation = {
    phase: TenantPhase.Bound,
    reason: TenantReadyReason.CredentialsDelivered,
    message: TenantReadyMessage.delivered,
    database: bound,
    ready: true,
    secretName,
    ...(url === undefined ? {} : { credentialURL: url }),
  };
  const notReady = (reason: string, message: string): TenantPresentation => ({
    phase: TenantPhase.Bound,
    reason,
    message,
    database: bound,
  });
  const wantsRotation = tenant.rotation !== undefined && tenant.rotation !== database.rotation;
  const deliver = (credential: ApplicationCredential) =>
    kube
      .deliver(tenant.identity, secretName, projectionData(tenant, credential))
      .pipe(
        Effect.mapError(
          () => new Stop(TenantReadyReason.CredentialProjectionFailed, TenantReadyMessage.projectionFailed),
        ),
      );

  // Steady state: nothing to do on any backend.
  if (
    database.phase === ProvisioningPhase.Available &&
    database.ready &&
    !wantsRotation &&
    tenantIsDelivered(tenant, secretName) &&
    (yield* kube.projectionPresent(tenant.identity.namespace, secretName))
  )
    return delivered;

  const outcome = yield* Effect.gen(function* () {
    if (location === undefined)
      return yield* Effect.fail(new Stop(TenantReason.Conflict, DatabaseMessage.credentialConflict));
    const instance = yield* kube.instance(database.instance);
    if (instance === undefined || !usableInstance(instance, database)) {
      const phase = database.phase === '' ? ProvisioningPhase.Provisioning : database.phase;
      return yield* Effect.fail(
        dependencyWait(
          database.phase === ProvisioningPhase.Available
            ? undefined
            : {
                phase,
                ready: false,
                reason: DatabaseReason.InstanceNotReady,
                message: DatabaseMessage.instanceNotReady,
              },
        ),
      );
    }
    // 1. The location is recorded before anything is written anywhere else.
    const recordedNow = database.credentialPath === '';
    if (recordedNow) {
      database = yield* recordDatabase(database, {
        phase: ProvisioningPhase.Provisioning,
        ready: false,
        reason: DatabaseReason.Reconciling,
        message: DatabaseMessage.provisioning,
        credentialPath: location,
      });
    } else if (database.credentialPath !== location) {
      return yield* Effect.fail(new Stop(TenantReason.Conflict, DatabaseMessage.credentialConflict));
    }
    const current = database;
    let credential: ApplicationCredential;
    if (current.phase !== ProvisioningPhase.Available || !current.ready) {
      // One round on the server: the admin Secret read once for all of its calls.
      credential = yield* server.round(
        instance.target,
        Effect.gen(function* () {
          // 2. Server steps.
          yield* provisionServer(current, instance, {
            role: current.loginRole,
            database: current.name,
            extensions: tenant.extensions ?? [],
          });
          // 3. The credential (created only if none is stored), 4. the password from its read-back, the login.
          const created = yield* ensureCredential(current, instance, location, recordedNow);
          yield* server
            .setPassword(instance.target, names(current), created)
            .pipe(Effect.mapError((e) => serverStop(ProvisioningPhase.Provisioning, e)));
          yield* server.login(instance.target, created).pipe(
            Effect.mapError(
              () =>
                new Stop(TenantReason.DependencyUnavailable, DatabaseMessage.loginFailed, {
                  phase: ProvisioningPhase.Provisioning,
                  ready: false,
                  reason: DatabaseReason.ProvisioningFailed,
                  message: DatabaseMessage.loginFailed,
                }),
            ),
          );
          return created;
        }),
      );
      // 5. Available.
      database = yield* recordDatabase(current, {
        phase: ProvisioningPhase.Available,
        ready: true,
        reason: DatabaseReason.Available,
        message: DatabaseMessage.available,
        // A rotation asked before the first provisioning is satisfied by the first password.
        ...(tenant.rotation !== undefined ? { rotation: tenant.rotation } : {}),
      });
    } else if (wantsRotation) {
      credential = yield* rotate(current, instance, location, tenant.rotation as string, deliver);
      return delivered;
    } else {
      credential = yield* store.read(location).pipe(Effect.mapError((e) => credentialStop(current.phase, e)));
    }
    // 6. Delivery, then the Tenant's Ready.
    yield* deliver(credential);
    return delivered;
  }).pipe(
    Effect.catchIf(
      (e): e is Stop => e instanceof Stop,
      (stop) =>
        Effect.gen(function* () {
          if (stop.database !== undefined) {
            yield* recordDatabase(database, {
              ...stop.database,
              ...(database.credentialPath === '' ? {} : { credentialPath: database.credentialPath }),
            });
          }
          return notReady(stop.tenantReason, stop.tenantMessage);
        }),
    ),
  );
  return outcome;
});

/**
 * Delivery of an imported Database (decision 0311): its credential is read at the recorded `credentialPath` (the
 * verified credentialRef), a login as the role checks it, then the seven-key Secret and Ready=True. No password is
 * generated or changed and the rotate annotation is not honoured (import never changes a password). A delivered
 * Tenant whose Secret exists costs no SQL and no KV read.
 */
const deliverImported = (tenant: BindingTenant, database: ProvisioningDatabase, bound: Binding.Identity) =>
  Effect.gen(function* () {
    const kube = yield* ProvisioningResources;
    const settings = yield* ProvisioningSettings;
    const server = yield* DatabaseServer;
    const store = yield* CredentialStore;
    const secretName = projectionSecretName(tenant.secretName, database.instance, tenant.identity.name);
    const path = database.credentialPath;
    const url =
      path === '' ? undefined : Either.getOrUndefined(credentialURL(settings.openBaoAddress, settings.scope, path));
    const notReady = (reason: string, message: string): TenantPresentation => ({
      phase: TenantPhase.Bound,
      reason,
      message,
      database: bound,
    });
    const delivered: TenantPresentation = {
      phase: TenantPhase.Bound,
      reason: TenantReadyReason.CredentialsDelivered,
      message: TenantReadyMessage.delivered,
      database: bound,
      ready: true,
      secretName,
      ...(url === undefined ? {} : { credentialURL: url }),
    };
    if (database.phase !== ProvisioningPhase.Available || !database.ready || path === '')
      return notReady(TenantReason.DependencyUnavailable, TenantReadyMessage.waitingForDatabase);
    if (tenantIsDelivered(tenant, secretName) && (yield* kube.projectionPresent(tenant.identity.namespace, secretName)))
      return delivered;
    const instance = yield* kube.instance(database.instance);
    if (instance === undefined || !usableInstance(instance, database))
      return notReady(TenantReason.DependencyUnavailable, DatabaseMessage.instanceNotReady);
    const credential = yield* Effect.either(store.read(path));
    if (Either.isLeft(credential))
      return notReady(TenantReason.DependencyUnavailable, DatabaseMessage.credentialFailed(credential.left.code));
    if (Either.isLeft(yield* Effect.either(server.login(instance.target, credential.right))))
      return notReady(TenantReason.DependencyUnavailable, DatabaseMessage.loginFailed);
    const written = yield* Effect.either(
      kube.deliver(tenant.identity, secretName, projectionData(tenant, credential.right)),
    );
    if (Either.isLeft(written))
      return notReady(TenantReadyReason.CredentialProjectionFailed, TenantReadyMessage.projectionFailed);
    return delivered;
  });

/** The projection's data: the seven keys, plus the conventional keys the Tenant opted in to (decision 0314). */
const projectionData = (tenant: BindingTenant, credential: ApplicationCredential): Record<string, string> => {
  const data = credential.secretData();
  return { ...data, ...additionalSecretData(data, tenant.additionalSecretKeys ?? []) };
};

const tenantIsDelivered = (tenant: BindingTenant, secretName: string): boolean =>
  tenant.delivered !== undefined && tenant.delivered === secretName;

/**
 * Rotation (decision 0233): a new password as a new KV version over the version read (`cas`), read back, set in
 * PostgreSQL, checked by a login, and recorded. Existing sessions keep working (PostgreSQL checks passwords only at
 * login). Before the KV write the Database records `pending:<request>:<version read>`; after a crash a stored
 * version above that one is this request's write and is not written again — the next round only sets it (ALTER ROLE
 * is idempotent), so the current KV version is the one password that works.
 */
const rotate = (
  database: ProvisioningDatabase,
  instance: ProvisioningInstance,
  path: string,
  request: string,
  deliver: (credential: ApplicationCredential) => Effect.Effect<void, Stop>,
): Effect.Effect<
  ApplicationCredential,
  Stop,
  CredentialStore | DatabaseServer | Entropy | ProvisioningResources | EventRecorder
> =>
  Effect.gen(function* () {
    const store = yield* CredentialStore;
    const server = yield* DatabaseServer;
    const kube = yield* ProvisioningResources;
    const phase = ProvisioningPhase.Available;
    const record = (d: ProvisioningDatabase, rotation: string) =>
      kube
        .recordDatabase(d, {
          phase,
          ready: true,
          reason: DatabaseReason.Available,
          message: DatabaseMessage.available,
          rotation,
        })
        .pipe(Effect.mapError(() => dependencyWait()));
    const { version } = yield* store.readVersioned(path).pipe(Effect.mapError((e) => credentialStop(phase, e)));
    const pending = pendingRotation(database.rotation, request);
    let recorded = database;
    if (pending === undefined || version <= pending) {
      const base = pending ?? version;
      if (pending === undefined) recorded = yield* record(database, `pending:${request}:${version}`);
      const entropy = yield* Effect.flatMap(Entropy, (e) => e.bytes);
      const fresh = ApplicationCredential.fromEntropy(
        database.loginRole,
        database.name,
        { ...instance.target.endpoint, managementDatabase: database.name },
        entropy,
      );
      if (Either.isLeft(fresh)) return yield* Effect.fail(credentialStop(phase, fresh.left));
      yield* store.replace(path, fresh.right, base).pipe(Effect.mapError((e) => credentialStop(phase, e)));
    }
    // The value set and delivered is the one read back from OpenBao.
    const current = yield* store.read(path).pipe(Effect.mapError((e) => credentialStop(phase, e)));
    yield* server
      .setPassword(instance.target, names(database), current)
      .pipe(Effect.mapError((e) => serverStop(phase, e)));
    yield* server
      .login(instance.target, current)
      .pipe(Effect.mapError(() => new Stop(TenantReason.DependencyUnavailable, DatabaseMessage.loginFailed)));
    // Delivered before the rotation is recorded as done: a crash in between re-delivers, never keeps the old value.
    yield* deliver(current);
    yield* record(recorded, request);
    return current;
  });

/** The KV version a pending rotation of `request` started from (`pending:<request>:<version>`), if any. */
export const pendingRotation = (recorded: string, request: string): number | undefined => {
  const prefix = `pending:${request}:`;
  if (!recorded.startsWith(prefix)) return undefined;
  const version = Number(recorded.slice(prefix.length));
  return Number.isInteger(version) && version > 0 ? version : undefined;
};

/** What a reclaim round did: the Tenant may go (finalizer removed), or it waits with a reason on the Database. */
export type ReclaimOutcome =
  { readonly _tag: 'Released' } | { readonly _tag: 'Waiting'; readonly reason: string; readonly message: string };

/**
 * A deleted Tenant (spec §3.4, §3.6): with no Database bound to it, the finalizer goes. Retain: the Database
 * becomes `Released` (recorded and read back first; role, database, credential untouched), then the Tenant's
 * finalizer goes. Delete: projection, logins, sessions, database, role, credential — one step at a time, each read
 * back and recorded on the Database — then the Database's finalizer and object, then the Tenant's finalizer. A
 * refusal or failure keeps every finalizer and says why on the Database.
 */
export const reclaimTenant = Effect.fn('reclaimTenant')(function* (tenant: BindingTenant) {
  const kube = yield* ProvisioningResources;
  const settings = yield* ProvisioningSettings;
  const name = tenant.database?.name ?? Binding.dynamicDatabaseName(tenant.identity.uid);
  const found = yield* kube.database(name);
  if (
    found === undefined ||
    found.tenant === undefined ||
    !Binding.sameTenant(found.tenant, tenant.identity) ||
    (tenant.database !== undefined && tenant.database.uid !== found.identity.uid)
  ) {
    yield* kube.releaseTenant(tenant);
    return { _tag: 'Released' } as ReclaimOutcome;
  }
  let database = found;
  const waiting = (reason: string, message: string, phase = database.phase) =>
    Effect.as(recordDatabase(database, { phase, ready: false, reason, message }), {
      _tag: 'Waiting',
      reason,
      message,
    } as ReclaimOutcome);

  if (database.reclaimPolicy === 'Retain' || database.source !== DatabaseSource.Provision) {
    // Released is recorded (the write returns the stored object) before the claim side is let go.
    database = yield* recordDatabase(database, {
      phase: ProvisioningPhase.Released,
      ready: false,
      reason: DatabaseReason.Released,
      message: DatabaseMessage.released,
    });
    if (database.phase !== ProvisioningPhase.Released)
      return { _tag: 'Waiting', reason: DatabaseReason.Released, message: DatabaseMessage.released } as ReclaimOutcome;
    yield* kube.releaseTenant(tenant);
    return { _tag: 'Released' } as ReclaimOutcome;
  }

  // Delete.
  const server = yield* DatabaseServer;
  const store = yield* CredentialStore;
  const instance = yield* kube.instance(database.instance);
  if (instance === undefined || !usableInstance(instance, database))
    return yield* waiting(
      DatabaseReason.InstanceNotReady,
      DatabaseMessage.instanceNotReady,
      ProvisioningPhase.Deleting,
    );
  const path = database.credentialPath;
  if (path !== '' && !Either.isRight(provisionPath(settings.scope, database.identity.uid)))
    return yield* waiting(DatabaseReason.Conflict, DatabaseMessage.credentialConflict, ProvisioningPhase.Deleting);
  const secretName = projectionSecretName(tenant.secretName, database.instance, tenant.identity.name);
  const target: ProvisionTarget = { role: database.loginRole, database: database.name, extensions: [] };
  const facts = Effect.gen(function* () {
    const serverFacts = yield* server.facts(instance.target, names(database));
    const projectionPresent = yield* kube.projectionPresent(tenant.identity.namespace, secretName);
    const credentialPresent =
      path === ''
        ? false
        : yield* store.read(path).pipe(
            Effect.as(true),
            Effect.catchIf(
              (e) => e.code === 'NotFound' || e.code === 'ApplicationCredentialInvalid',
              (e) => Effect.succeed(e.code !== 'NotFound'),
            ),
          );
    return { server: serverFacts, projectionPresent, credentialPresent } satisfies ReclaimFacts;
  });
  let done: string | undefined;
  for (let i = 0; i < MaxSteps; i++) {
    const read = yield* Effect.either(facts);
    if (Either.isLeft(read)) {
      const e = read.left;
      const code = e._tag === 'ServerError' ? e.code : e._tag === 'CredentialError' ? e.code : e.code;
      return yield* waiting(
        DatabaseReason.DependencyUnavailable,
        DatabaseMessage.deleteFailed('read-back', code),
        ProvisioningPhase.Deleting,
      );
    }
    const decision = nextReclaimStep(read.right, target);
    // The previous step is read back as done: record it before the next one.
    if (done !== undefined && decision._tag !== done) {
      database = yield* recordDatabase(database, {
        phase: ProvisioningPhase.Deleting,
        ready: false,
        reason: DatabaseReason.Deleting,
        message: DatabaseMessage.deleting(done),
      });
    }
    if (decision._tag === 'Reclaimed') break;
    if (decision._tag === 'Refused')
      return yield* waiting(decision.reason, decision.message, ProvisioningPhase.Deleting);
    if (decision._tag === done)
      return yield* waiting(
        DatabaseReason.DependencyUnavailable,
        DatabaseMessage.deleteFailed(decision._tag, 'read-back'),
        ProvisioningPhase.Deleting,
      );
    if (database.phase !== ProvisioningPhase.Deleting)
      database = yield* recordDatabase(database, {
        phase: ProvisioningPhase.Deleting,
        ready: false,
        reason: DatabaseReason.Deleting,
        message: DatabaseMessage.deleting('start'),
      });
    const perform: Effect.Effect<void, ServerError | CredentialError | KubernetesError> =
      decision._tag === 'RemoveProjection'
        ? kube.removeProjection(tenant.identity.namespace, secretName)
        : decision._tag === 'DeleteCredential'
          ? store.remove(path)
          : Effect.asVoid(server.step(instance.target, names(database), decision));
    const performed = yield* Effect.either(perform);
    if (Either.isLeft(performed)) {
      const e = performed.left;
      if (e._tag === 'ServerError' && e.sqlstate === '2BP01')
        return yield* waiting(
          DatabaseReason.Conflict,
          DatabaseMessage.dependentObjects(decision._tag),
          ProvisioningPhase.Deleting,
        );
      const code = e._tag === 'ServerError' ? e.sqlstate || e.code : e.code;
      return yield* waiting(
        DatabaseReason.ProvisioningFailed,
        DatabaseMessage.deleteFailed(decision._tag, code),
        ProvisioningPhase.Deleting,
      );
    }
    done = decision._tag;
  }
  yield* server.forget(instance.target.name);
  yield* kube.finishDatabase(database);
  yield* kube.releaseTenant(tenant);
  return { _tag: 'Released' } as ReclaimOutcome;
});

/**
 * One reconcile of one Tenant key with provisioning on (issue 21): a deleted Tenant is reclaimed; otherwise binding
 * runs, and a completed binding goes on to provisioning and delivery, whose result replaces `BindingComplete`.
 */
export const reconcileTenant = Effect.fn('reconcileTenant')(function* (namespace: string, name: string) {
  const resources = yield* BindingResources;
  const read = yield* resources.tenant(namespace, name);
  if (read !== undefined && read.deleting) {
    const outcome = yield* reclaimTenant(read);
    if (outcome._tag === 'Released') return { requeueAfter: Option.none<Duration.Duration>() };
    yield* presentTenant(read, { phase: TenantPhase.Deleting, reason: outcome.reason, message: outcome.message });
    return { requeueAfter: Option.some(Timing.dependencyRetry) };
  }
  const result = yield* runBinding(namespace, name);
  if (result.tenant === undefined || result.status === undefined) return { requeueAfter: bindingRequeue(result) };
  const status =
    result.status.reason === TenantReason.BindingComplete && result.status.database !== undefined
      ? yield* provisionTenant(result.tenant, result.status.database, result.status)
      : result.status;
  yield* presentTenant(result.tenant, status);
  return { requeueAfter: bindingRequeue(result) };
});

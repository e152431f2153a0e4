// Import (issue 21, decision 0311): the Database round for `source: Import`. It verifies the declared database,
// role and credential — read-only on PostgreSQL (facts as the manager, one login as the role) and on OpenBao (one
// read at the credentialRef, inside the configured scope) — and records `instanceUID`, `credentialPath` and
// `Available`. It never writes to PostgreSQL or OpenBao. An Available, Ready Database whose Instance is the recorded
// one costs nothing (no SQL, no KV read); Released or deleting Databases are never touched.
import { Duration, Effect, Either, Option } from 'effect';
import { acceptsCredentialRef } from '../domain/credential-location.js';
import { ImportMessage, judgeImport } from '../domain/import.js';
import { DatabaseMessage, DatabaseReason, ProvisioningPhase } from '../domain/provisioning.js';
import { DatabasePhase, DatabaseSource, Timing } from '../domain/vocabulary.js';
import { CredentialStore, DatabaseServer, type DatabasePresentation, ProvisioningResources } from './ports.js';
import { ProvisioningSettings, recordDatabase } from './provisioning.js';

const retry = { requeueAfter: Option.some<Duration.Duration>(Timing.dependencyRetry) };
const done = { requeueAfter: Option.none<Duration.Duration>() };

/** One round of one imported Database, by object name. */
export const reconcileImport = Effect.fn('reconcileImport')(function* (name: string) {
  const kube = yield* ProvisioningResources;
  const settings = yield* ProvisioningSettings;
  const database = yield* kube.database(name);
  if (database === undefined || database.source !== DatabaseSource.Import || database.deleting) return done;
  if (database.phase === DatabasePhase.Released || database.phase === DatabasePhase.Deleting) return done;
  const phase = database.phase === '' ? DatabasePhase.Pending : database.phase;
  const refuse = (reason: string, message: string) =>
    Effect.as(recordDatabase(database, { phase, ready: false, reason, message } satisfies DatabasePresentation), retry);

  const instance = yield* kube.instance(database.instance);
  if (instance === undefined || instance.deleting || !instance.ready)
    return yield* refuse(DatabaseReason.InstanceNotReady, DatabaseMessage.instanceNotReady);
  if (database.instanceUID !== '' && database.instanceUID !== instance.target.uid)
    return yield* refuse(DatabaseReason.Conflict, ImportMessage.instanceReplaced);
  // Steady state: verified at this generation against this Instance.
  if (database.phase === DatabasePhase.Available && database.ready && database.instanceUID === instance.target.uid)
    return retry;

  const ref = database.credentialRef;
  if (ref === undefined || !acceptsCredentialRef(settings.scope, ref))
    return yield* refuse(DatabaseReason.Conflict, ImportMessage.scope);

  const server = yield* DatabaseServer;
  const store = yield* CredentialStore;
  const names = { role: database.loginRole, database: database.name };
  const facts = yield* Effect.either(server.facts(instance.target, names));
  if (Either.isLeft(facts))
    return yield* refuse(
      facts.left.code === 'ManagementCheck'
        ? DatabaseReason.InsufficientPrivileges
        : DatabaseReason.DependencyUnavailable,
      DatabaseMessage.statementFailed('ImportFacts', facts.left.sqlstate || '-'),
    );
  const verdict = judgeImport(facts.right, database.loginRole);
  if (verdict._tag === 'Refused')
    return yield* refuse(
      verdict.conflict ? DatabaseReason.Conflict : DatabaseReason.DependencyUnavailable,
      verdict.message,
    );

  const credential = yield* Effect.either(store.read(ref.path));
  if (Either.isLeft(credential))
    return yield* credential.left.code === 'NotFound'
      ? refuse(DatabaseReason.DependencyUnavailable, ImportMessage.credentialMissing)
      : credential.left.code === 'ApplicationCredentialInvalid' || credential.left.code === 'InvalidLocation'
        ? refuse(DatabaseReason.Conflict, ImportMessage.credentialMismatch)
        : refuse(DatabaseReason.DependencyUnavailable, DatabaseMessage.credentialFailed(credential.left.code));
  const data = credential.right.secretData();
  const endpoint = instance.target.endpoint;
  if (
    data.username !== database.loginRole ||
    data.database !== database.name ||
    data.hostaddr !== endpoint.hostAddr ||
    data.port !== String(endpoint.port)
  )
    return yield* refuse(DatabaseReason.Conflict, ImportMessage.credentialMismatch);
  const login = yield* Effect.either(server.login(instance.target, credential.right));
  if (Either.isLeft(login)) return yield* refuse(DatabaseReason.AuthenticationFailed, ImportMessage.loginFailed);

  yield* recordDatabase(database, {
    phase: ProvisioningPhase.Available,
    ready: true,
    reason: DatabaseReason.Available,
    message: ImportMessage.verified,
    instanceUID: instance.target.uid,
    credentialPath: ref.path,
  });
  return retry;
});

// The management observation of one Instance (seed: application/instance_service.go `observe`), as a pure program
// over the PostgreSQL-side actions. The pools themselves belong to the PostgreSQL adapter; the program only decides
// when to reuse, replace or release them and what an observation may claim:
// - credentials come from the admin Secret, read fresh before and after the query; a change in between discards the
//   result and releases the pool (the observation never mixes two credential values);
// - a pool is reused only for the same connection identity (UID, endpoint, credential ref — not the generation) and
//   the same credential values; anything else releases the old pool before connecting anew;
// - any failure after connecting releases the pool; a failed query yields nothing partial;
// - the metadata-only path can never carry management checks, so it can never make an Instance Ready.
import { Data, Either } from 'effect';
import {
  type ExtensionSupport,
  type ManagementChecks,
  nativeManagementChecks,
  type NativeRoleFacts,
  type ObservationTarget,
  observeExtensionSupport,
  sameConnectionIdentity,
  UnobservedChecks,
  validateTarget,
} from '../domain/instance.js';
import type { ObservationErrorKind } from '../domain/instance-reasons.js';
import type { InstanceObservation, SecretFact } from './ports.js';
import { type Action, ask, type Program } from './program.js';

const REDACTED = '[redacted admin credentials]';

/** The management login, in memory only; every rendering is redacted. */
export class AdminCredentials {
  readonly #password: string;
  constructor(
    readonly username: string,
    password: string,
  ) {
    this.#password = password;
  }
  get password(): string {
    return this.#password;
  }
  equals(other: AdminCredentials): boolean {
    return this.username === other.username && this.#password === other.#password;
  }
  toString(): string {
    return REDACTED;
  }
  toJSON(): string {
    return REDACTED;
  }
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return REDACTED;
  }
}

/** What the service remembers about the pool it holds for one Instance name. */
export interface PoolMemory {
  readonly target: ObservationTarget;
  readonly credentials: AdminCredentials;
}

/** The admin Secret as read directly from the API (decoded data), or why it could not be read. */
export type ConnectFact =
  { readonly _tag: 'Connected' } | { readonly _tag: 'Failed'; readonly kind: 'Authentication' | 'Other' };

export interface MetadataFacts {
  readonly version: string;
  /** `ARRAY(...)` of available extensions; absent/empty is an observed empty set. */
  readonly extensions: ReadonlyArray<string> | null | undefined;
}

export type InspectFact =
  | { readonly _tag: 'Management'; readonly metadata: MetadataFacts; readonly role: NativeRoleFacts }
  | { readonly _tag: 'Metadata'; readonly metadata: MetadataFacts }
  | { readonly _tag: 'Failed' };

export type ObservationMode = 'management' | 'metadata';

export type ObservationAction =
  | (Action<'ReadSecret'> & { readonly name: string })
  | (Action<'Release'> & { readonly instance: string })
  | (Action<'Connect'> & { readonly target: ObservationTarget; readonly credentials: AdminCredentials })
  | (Action<'Inspect'> & { readonly instance: string; readonly mode: ObservationMode });

export class InvalidObservationTarget extends Data.TaggedError('InvalidObservationTarget')<{
  readonly message: string;
}> {}

export type ObservationOutcome =
  | { readonly _tag: 'Observed'; readonly observation: InstanceObservation; readonly pool: PoolMemory }
  | { readonly _tag: 'Failed'; readonly kind: ObservationErrorKind; readonly pool: PoolMemory | undefined }
  | InvalidObservationTarget;

/** The admin login from Secret data; a missing or empty field is invalid. */
export const adminCredentialsFrom = (
  data: Readonly<Record<string, string>>,
  keys: { readonly usernameKey: string; readonly passwordKey: string },
): AdminCredentials | undefined => {
  const username = data[keys.usernameKey];
  const password = data[keys.passwordKey];
  return username && password ? new AdminCredentials(username, password) : undefined;
};

const credentialFailure = (
  fact: SecretFact,
  keys: ObservationTarget['credential'],
): ObservationErrorKind | AdminCredentials => {
  if (fact._tag !== 'Found') return 'CredentialsUnavailable';
  return adminCredentialsFrom(fact.data, keys) ?? 'CredentialsInvalid';
};

/** `InstanceService.observe` as a pure program. `pool` is what the service holds for this Instance name. */
export function* observationProgram(
  target: ObservationTarget,
  pool: PoolMemory | undefined,
  mode: ObservationMode = 'management',
): Program<ObservationAction, ObservationOutcome> {
  const valid = validateTarget(target);
  if (Either.isLeft(valid)) return new InvalidObservationTarget({ message: valid.left.message });
  const name = target.name;
  const failed = function* (
    kind: ObservationErrorKind,
    held: PoolMemory | undefined,
  ): Program<ObservationAction, ObservationOutcome> {
    if (held !== undefined) yield* ask<ObservationAction, void>({ _tag: 'Release', instance: name });
    return { _tag: 'Failed', kind, pool: undefined };
  };

  const before = credentialFailure(
    yield* ask<ObservationAction, SecretFact>({ _tag: 'ReadSecret', name: target.credential.name }),
    target.credential,
  );
  if (!(before instanceof AdminCredentials)) return yield* failed(before, pool);

  let held = pool;
  if (held === undefined || !sameConnectionIdentity(held.target, target) || !held.credentials.equals(before)) {
    if (held !== undefined) yield* ask<ObservationAction, void>({ _tag: 'Release', instance: name });
    held = undefined;
    const connected = yield* ask<ObservationAction, ConnectFact>({ _tag: 'Connect', target, credentials: before });
    if (connected._tag === 'Failed') return { _tag: 'Failed', kind: connected.kind, pool: undefined };
    held = { target, credentials: before };
  } else {
    held = { target, credentials: held.credentials };
  }

  const inspected = yield* ask<ObservationAction, InspectFact>({ _tag: 'Inspect', instance: name, mode });
  if (inspected._tag === 'Failed' || inspected.metadata.version === '') return yield* failed('Other', held);

  const after = credentialFailure(
    yield* ask<ObservationAction, SecretFact>({ _tag: 'ReadSecret', name: target.credential.name }),
    target.credential,
  );
  if (!(after instanceof AdminCredentials)) return yield* failed(after, held);
  if (!after.equals(before)) return yield* failed('CredentialsChanged', held);

  const checks: ManagementChecks =
    mode === 'management' && inspected._tag === 'Management'
      ? nativeManagementChecks(inspected.role)
      : UnobservedChecks;
  const extensions: ExtensionSupport = observeExtensionSupport(inspected.metadata.extensions);
  return {
    _tag: 'Observed',
    observation: { target, version: inspected.metadata.version, extensions, checks },
    pool: held,
  };
}

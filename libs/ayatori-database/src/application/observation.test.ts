// The management observation walked as a pure program: Secret reads, pool reuse/replacement/release, the query,
// the post-read. Facts only; the pools and queries themselves are the PostgreSQL adapter's (next session).
import { inspect } from 'node:util';
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  InstanceAggregate,
  EmptySnapshot,
  makeCapabilityObservation,
  type ObservationTarget,
} from '../domain/instance.js';
import {
  AdminCredentials,
  type InspectFact,
  type ObservationAction,
  type ObservationOutcome,
  observationProgram,
  type PoolMemory,
} from './observation.js';
import type { SecretFact } from './ports.js';
import { walk } from './program.js';

const CANARY = 'AYATORI-TEST-ONLY-initial-password';
const target: ObservationTarget = {
  uid: 'instance-uid',
  name: 'shared',
  revision: 1,
  endpoint: {
    host: 'fixture.invalid',
    hostAddr: '127.0.0.1',
    port: 5432,
    managementDatabase: 'postgres',
    tlsMode: 'disable',
  },
  credential: { name: 'admin', usernameKey: 'login', passwordKey: 'credential' },
};
const secret = (password = CANARY, username = 'native_manager'): SecretFact => ({
  _tag: 'Found',
  data: { login: username, credential: password, other: 'x' },
});
const management: InspectFact = {
  _tag: 'Management',
  metadata: { version: '15.8', extensions: ['hstore', 'plpgsql'] },
  role: { superuser: false, createRole: true, createDatabase: true, readOnly: false },
};

interface Script {
  readonly secrets: ReadonlyArray<SecretFact>;
  readonly connect?: 'ok' | 'Authentication' | 'Other';
  readonly inspect?: InspectFact;
}

const run = (
  script: Script,
  pool: PoolMemory | undefined,
  t: ObservationTarget = target,
  mode: 'management' | 'metadata' = 'management',
) => {
  let reads = 0;
  return walk(observationProgram(t, pool, mode), (action: ObservationAction) => {
    switch (action._tag) {
      case 'ReadSecret':
        return script.secrets[Math.min(reads++, script.secrets.length - 1)];
      case 'Release':
        return undefined;
      case 'Connect':
        return script.connect === undefined || script.connect === 'ok'
          ? { _tag: 'Connected' }
          : { _tag: 'Failed', kind: script.connect };
      case 'Inspect':
        return script.inspect ?? management;
    }
  });
};
const tags = (actions: ReadonlyArray<ObservationAction>) => actions.map((a) => a._tag);
const held = (password = CANARY, t: ObservationTarget = target): PoolMemory => ({
  target: t,
  credentials: new AdminCredentials('native_manager', password),
});
const observed = (o: ObservationOutcome) => (o._tag === 'Observed' ? o.observation : undefined);

describe('management observation program', () => {
  it('AY-37 (rule): a first observation connects, queries, re-reads the Secret, and returns checks bound to this target', () => {
    const { actions, result } = run({ secrets: [secret()] }, undefined);
    expect(tags(actions)).toEqual(['ReadSecret', 'Connect', 'Inspect', 'ReadSecret']);
    expect(observed(result)).toMatchObject({
      target,
      version: '15.8',
      extensions: { _tag: 'Observed', available: ['hstore', 'plpgsql'] },
    });
    const capability = Either.getOrThrow(makeCapabilityObservation(target, '15.8', observed(result)!.checks));
    const validating = Either.getOrThrow(
      Either.getOrThrow(InstanceAggregate.reconstitute(target, EmptySnapshot, false)).beginValidation(),
    );
    expect(Either.getOrThrow(validating.assessManagement(capability)).snapshot().phase).toBe('Ready');
  });

  it('AY-45 (rule): same identity and same values (an annotation-only Secret change, a new generation) reuse the pool', () => {
    for (const t of [target, { ...target, revision: 2 }]) {
      const { actions, result } = run({ secrets: [secret()] }, held(), t);
      expect(tags(actions)).toEqual(['ReadSecret', 'Inspect', 'ReadSecret']);
      expect(result._tag).toBe('Observed');
    }
  });

  it('AY-45 (rule): a changed password, a new UID, endpoint or credential ref releases the old pool and connects anew', () => {
    const cases: Array<[PoolMemory, ObservationTarget]> = [
      [held('rotated'), target],
      [held(CANARY, { ...target, uid: 'old-uid' }), target],
      [held(CANARY, { ...target, endpoint: { ...target.endpoint, port: 5433 } }), target],
      [held(CANARY, { ...target, credential: { ...target.credential, name: 'old-admin' } }), target],
    ];
    for (const [pool, t] of cases) {
      const { actions } = run({ secrets: [secret()] }, pool, t);
      expect(tags(actions)).toEqual(['ReadSecret', 'Release', 'Connect', 'Inspect', 'ReadSecret']);
    }
  });

  it('AY-39 (rule): an authentication/TLS failure on connect → Authentication, no pool kept', () => {
    const { result } = run({ secrets: [secret()], connect: 'Authentication' }, held('old'));
    expect(result).toEqual({ _tag: 'Failed', kind: 'Authentication', pool: undefined });
  });

  it('AY-43/AY-47 (rule): a missing or unreadable Secret → CredentialsUnavailable and the pool released', () => {
    for (const fact of [{ _tag: 'Missing' } as const, { _tag: 'Unreadable' } as const]) {
      const { actions, result } = run({ secrets: [fact] }, held());
      expect(tags(actions)).toEqual(['ReadSecret', 'Release']);
      expect(result).toEqual({ _tag: 'Failed', kind: 'CredentialsUnavailable', pool: undefined });
    }
  });

  it('AY-44 (rule): an empty or missing username/password field → CredentialsInvalid and the pool released', () => {
    for (const fact of [secret(''), secret(CANARY, ''), { _tag: 'Found', data: { login: 'x' } } as SecretFact]) {
      const { actions, result } = run({ secrets: [fact] }, held());
      expect(tags(actions)).toEqual(['ReadSecret', 'Release']);
      expect(result).toMatchObject({ _tag: 'Failed', kind: 'CredentialsInvalid' });
    }
  });

  it('AY-46 (rule): a value changed between the pre- and post-query reads → CredentialsChanged; result discarded, pool released', () => {
    const { actions, result } = run({ secrets: [secret(), secret('rotated-mid-flight')] }, undefined);
    expect(tags(actions)).toEqual(['ReadSecret', 'Connect', 'Inspect', 'ReadSecret', 'Release']);
    expect(result).toEqual({ _tag: 'Failed', kind: 'CredentialsChanged', pool: undefined });
  });

  it('AY-58 (rule): a failed query or an empty version → no partial data, the pool released', () => {
    for (const inspectFact of [
      { _tag: 'Failed' } as const,
      { ...management, metadata: { version: '', extensions: ['hstore'] } },
    ]) {
      const { actions, result } = run({ secrets: [secret()], inspect: inspectFact }, undefined);
      expect(tags(actions)).toEqual(['ReadSecret', 'Connect', 'Inspect', 'Release']);
      expect(result).toEqual({ _tag: 'Failed', kind: 'Other', pool: undefined });
    }
  });

  it('AY-40/AY-59 (rule): the metadata-only path carries no management checks, even if the adapter supplied role facts', () => {
    const { result } = run({ secrets: [secret()] }, undefined, target, 'metadata');
    const checks = observed(result)!.checks;
    expect(Object.values(checks)).toEqual([
      'Unobserved',
      'Unobserved',
      'Unobserved',
      'Unobserved',
      'Unobserved',
      'Unobserved',
    ]);
  });

  it('AY-57 (rule): a successful empty list is observed-empty', () => {
    const { result } = run(
      { secrets: [secret()], inspect: { ...management, metadata: { version: '15.8', extensions: null } } },
      undefined,
    );
    expect(observed(result)!.extensions).toEqual({ _tag: 'Observed', available: [] });
  });

  it('an invalid target is refused before any action', () => {
    const { actions, result } = run({ secrets: [secret()] }, undefined, { ...target, uid: '' });
    expect(actions).toEqual([]);
    expect(result._tag).toBe('InvalidObservationTarget');
  });

  it('AY-80 (part): admin credentials never render their password', () => {
    const credentials = new AdminCredentials('native_manager', CANARY);
    for (const text of [String(credentials), inspect(credentials), JSON.stringify({ credentials }), inspect(held())]) {
      expect(text).not.toContain(CANARY);
    }
  });
});

// TypeScript mirrors of the CEL transition rules (`oldSelf` → `self`) that the API server enforces on update.
// Kubernetes is the enforcement point; these mirrors let the controller defend against snapshots that could only
// exist if the rules were bypassed, and document the rules in executable form. Each returns the rule's exact
// message when the update would be rejected, or undefined.
import { DatabaseTargetFrozenRule } from './database.js';
import { TenantProgressRule, TenantTargetFrozenRule } from './tenant.js';

/** CEL `==` on JSON values: structural equality, with absent ≠ present. */
export const celEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => celEqual(x, b[i]));
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  return (
    ka.length === kb.length &&
    ka.every((k) => celEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  );
};

interface DatabaseLike {
  readonly spec: {
    readonly instanceRef: unknown;
    readonly database: string;
    readonly loginRole: string;
    readonly source: string;
    readonly credentialRef?: unknown;
    readonly tenantRef?: unknown;
    readonly [field: string]: unknown;
  };
  readonly status?: { readonly instanceUID?: string | undefined } | undefined;
}

export const databaseUpdateViolation = (oldSelf: DatabaseLike, self: DatabaseLike): string | undefined => {
  const started = oldSelf.spec.tenantRef !== undefined || oldSelf.status?.instanceUID !== undefined;
  if (!started) return undefined;
  const same =
    celEqual(self.spec.instanceRef, oldSelf.spec.instanceRef) &&
    self.spec.database === oldSelf.spec.database &&
    self.spec.loginRole === oldSelf.spec.loginRole &&
    self.spec.source === oldSelf.spec.source &&
    (self.spec.credentialRef !== undefined) === (oldSelf.spec.credentialRef !== undefined) &&
    (oldSelf.spec.credentialRef === undefined || celEqual(self.spec.credentialRef, oldSelf.spec.credentialRef));
  return same ? undefined : DatabaseTargetFrozenRule.message;
};

interface TenantLike {
  readonly spec: { readonly provision?: unknown; readonly databaseRef?: unknown; readonly [field: string]: unknown };
  readonly status?: { readonly phase?: string | undefined } | undefined;
}

const progressPhases: ReadonlyArray<string> = ['Binding', 'Bound', 'Deleting'];

export const tenantUpdateViolations = (oldSelf: TenantLike, self: TenantLike): ReadonlyArray<string> => {
  const oldPhase = oldSelf.status?.phase;
  if (oldPhase === undefined || !progressPhases.includes(oldPhase)) return [];
  const out: string[] = [];
  const targetSame =
    (self.spec.provision !== undefined) === (oldSelf.spec.provision !== undefined) &&
    (oldSelf.spec.provision === undefined || celEqual(self.spec.provision, oldSelf.spec.provision)) &&
    (self.spec.databaseRef !== undefined) === (oldSelf.spec.databaseRef !== undefined) &&
    (oldSelf.spec.databaseRef === undefined || celEqual(self.spec.databaseRef, oldSelf.spec.databaseRef));
  if (!targetSame) out.push(TenantTargetFrozenRule.message);
  const phase = self.status?.phase;
  if (phase === undefined || !progressPhases.includes(phase)) out.push(TenantProgressRule.message);
  return out;
};

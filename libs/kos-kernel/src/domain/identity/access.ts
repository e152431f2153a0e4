// Access control (seed 000 pkg/access, C-59/C-60; digest §6.9), pure: role write permissions, spec.owner at write and
// its transfer, the visibility predicate of panel reads, and the cross-owner checks at write. The router (not yet
// wired) feeds these with the caller from `Identity.authenticate` and the objects it read.
import type { Role } from './rules.js';

export interface AccessPrincipal {
  readonly account: string;
  readonly role: Role;
}

/** Kinds a Member may write when it owns the object (Guest 只读; Member 只写自己的…; Owner 写全部). */
export const MEMBER_WRITABLE_KINDS = [
  'Application',
  'Endpoint',
  'Volume',
  'BackupPolicy',
  'RestoreJob',
  'VolumeMigration',
] as const;

export type AccessDecision = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

const allow: AccessDecision = { allowed: true };
const deny = (reason: string): AccessDecision => ({ allowed: false, reason });

export interface WriteTarget {
  readonly kind: string;
  /** The stored object's owner (absent on create: the owner then comes from the session). */
  readonly owner?: string;
  /** For extension kinds: the roles declared in `objectWriters` (undefined = undeclared = Owner only). */
  readonly extensionWriters?: ReadonlyArray<Role>;
  /** True for a kind served for an extension (its writers come from the declaration). */
  readonly extension?: boolean;
}

/**
 * May `who` write (create, update, delete, act on) `target`? The role part (kernel table, or the extension kind's
 * declared `objectWriters`), then the owner part: a stored object with an owner is written by that account or an
 * Owner only.
 */
export const canWrite = (who: AccessPrincipal, target: WriteTarget): AccessDecision => {
  if (who.role === 'Owner') return allow;
  if (who.role === 'Guest') return deny('a Guest is read-only');
  if (target.extension === true && !(target.extensionWriters ?? []).includes(who.role))
    return deny(`${target.kind} is written by ${(target.extensionWriters ?? ['Owner']).join(', ')} only`);
  if (target.extension !== true && !(MEMBER_WRITABLE_KINDS as readonly string[]).includes(target.kind))
    return deny(`a Member does not write ${target.kind}`);
  // The owner rule is the same for kernel and extension objects (decision 0390): a Member writes only its own.
  if (target.owner !== undefined && target.owner !== who.account)
    return deny(`${target.kind} belongs to another account`);
  return allow;
};

export type OwnerAtWrite =
  | { readonly ok: true; readonly owner: string; readonly transfer: boolean }
  | { readonly ok: false; readonly reason: string };

/**
 * `spec.owner` is written by the API from the session and is immutable; only a global Owner transfers it (TC-33).
 * `requested` is the body's value (absent = keep / take the session's), `stored` the current object's (absent on create).
 */
export const ownerAtWrite = (
  who: AccessPrincipal,
  requested: string | undefined,
  stored: string | undefined,
): OwnerAtWrite => {
  // On create the owner is always the session's account, for an Owner too: a transfer is a separate, audited update
  // of an existing object (decision 0217, revised in 0204), so no object ever names an owner that never wrote it.
  if (stored === undefined)
    return requested === undefined || requested === who.account
      ? { ok: true, owner: who.account, transfer: false }
      : { ok: false, reason: `spec.owner is set from the session (${who.account}); transfer it after the create` };
  if (requested === undefined || requested === stored) return { ok: true, owner: stored, transfer: false };
  return who.role === 'Owner'
    ? { ok: true, owner: requested, transfer: true }
    : { ok: false, reason: 'only an Owner transfers spec.owner' };
};

/** `Application.spec.visibility` ([proposal] shape, decision 0217). Absent or unreadable = private. */
export interface Visibility {
  readonly mode: 'private' | 'members' | 'all';
  readonly members?: ReadonlyArray<string>;
}

export const visibilityOf = (value: unknown): Visibility => {
  if (typeof value !== 'object' || value === null) return { mode: 'private' };
  const v = value as { mode?: unknown; members?: unknown };
  const members = Array.isArray(v.members) ? v.members.filter((m): m is string => typeof m === 'string') : [];
  return v.mode === 'all' || v.mode === 'members' ? { mode: v.mode, members } : { mode: 'private', members };
};

/**
 * The panel-read predicate (TC-30): the owner and global Owners always see; listed Members see when mode=members;
 * unlisted Members do not; Guests see only mode=all. It never affects endpoint reachability.
 */
export const canSee = (who: AccessPrincipal, owner: string | undefined, visibility: unknown): boolean => {
  if (who.role === 'Owner' || (owner !== undefined && owner === who.account)) return true;
  const v = visibilityOf(visibility);
  if (v.mode === 'all') return true;
  if (who.role === 'Guest') return false;
  return v.mode === 'members' && (v.members ?? []).includes(who.account);
};

export interface OwnedRef {
  readonly kind: string;
  readonly namespace?: string;
  readonly name: string;
  readonly owner?: string;
}

/** Write-time rejection: volume references or policy-selected objects that belong to another owner than `owner`. */
export const crossOwnerReferences = (owner: string, referenced: ReadonlyArray<OwnedRef>): ReadonlyArray<OwnedRef> =>
  referenced.filter((r) => r.owner !== owner);

/** The Volumes an Application's `spec.volumes` names (template volume key → Volume name in the app's namespace). */
export const volumeReferencesOf = (spec: unknown): ReadonlyArray<{ readonly key: string; readonly name: string }> => {
  const volumes = typeof spec === 'object' && spec !== null ? (spec as { volumes?: unknown }).volumes : undefined;
  if (typeof volumes !== 'object' || volumes === null || Array.isArray(volumes)) return [];
  return Object.entries(volumes)
    .filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== '')
    .map(([key, name]) => ({ key, name }));
};

/**
 * A BackupPolicy's `spec.selector` as a label selector over the Applications of its namespace ([proposal] shape,
 * decision 0218: a selector string, or `{matchLabels}`); undefined when the policy has none.
 */
export const policySelectorOf = (
  spec: unknown,
): { readonly selector: string } | { readonly problem: string } | undefined => {
  const selector = typeof spec === 'object' && spec !== null ? (spec as { selector?: unknown }).selector : undefined;
  if (selector === undefined) return undefined;
  if (typeof selector === 'string') return { selector };
  const matchLabels =
    typeof selector === 'object' && selector !== null ? (selector as { matchLabels?: unknown }).matchLabels : undefined;
  if (
    typeof matchLabels === 'object' &&
    matchLabels !== null &&
    !Array.isArray(matchLabels) &&
    Object.keys(selector as object).every((k) => k === 'matchLabels') &&
    Object.values(matchLabels).every((v) => typeof v === 'string')
  )
    return {
      selector: Object.entries(matchLabels as Record<string, string>)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
    };
  return { problem: 'spec.selector must be a label selector string or {matchLabels: {label: value}}' };
};

/** The control-plane verbs (router level) and which of them write. `plan` previews a write: Guests may not. */
export type AccessVerb = 'list' | 'get' | 'create' | 'update' | 'delete' | 'plan' | 'apply' | 'action' | 'discover';
const READ_VERBS: ReadonlyArray<AccessVerb> = ['list', 'get', 'discover'];

/**
 * The role part of a request, before any object is read: Guests only read; Members write only the kinds they may own
 * (when the route names a kind; plan/apply check each object); Owners do everything. Objects' owners are checked
 * by the handlers with `canWrite` once the stored object is known.
 */
export const verbAllowed = (who: AccessPrincipal, verb: AccessVerb, kind?: string): AccessDecision => {
  if (READ_VERBS.includes(verb) || who.role === 'Owner') return allow;
  if (who.role === 'Guest') return deny('a Guest is read-only');
  if (kind !== undefined && !(MEMBER_WRITABLE_KINDS as readonly string[]).includes(kind))
    return deny(`a Member does not write ${kind}`);
  return allow;
};

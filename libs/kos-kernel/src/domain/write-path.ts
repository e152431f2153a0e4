// The write path (C-03/C-04, seed pkg/write): one table keyed by (subject, kind, part). A write that no entry
// allows is rejected, and the rejection names the subject and the object. The table is data (WRITE_TABLE); the
// decision is `admit`. Server-side apply with a field manager per subject and 409-with-current-object are the
// Kubernetes adapter's half (built on @homelab/kube); `fieldManagerOf` names the manager here.
import { Data, Either } from 'effect';
import { KERNEL_KINDS, type KernelKind } from '../api/group.js';
import { markerKey, type MarkerName } from './markers.js';

export const SUBJECTS = [
  'user', // a signed-in user through the control plane (SSA, per-subject field manager)
  'owner', // a user holding the global Owner role
  'control-plane', // the control-plane API process itself
  'adoption', // the serialised adopt/release/decline actions
  'catalogue-sync',
  'application-reconciler',
  'component-reconciler', // Installer
  'endpoint-reconciler',
  'device-collector',
  'device-reconciler',
  'volume-reconciler',
  'backup-reconciler',
  'restore-reconciler',
  'migration-reconciler',
] as const;
export type Subject = (typeof SUBJECTS)[number];

/** What a write touches: a kernel kind, or one of the non-kernel object classes KOS writes. */
export type Target =
  | KernelKind
  | 'Downstream' // objects rendered for an application, in its spec.namespace
  | 'ActionRecord' // one-shot action records in kos-system
  | 'OrphanManifest' // immutable app-orphan manifests in kos-system
  | 'AdoptionSnapshot' // immutable pre-adoption snapshots in kos-system
  | 'Job'
  | 'PersistentVolumeClaim';

/**
 * `spec`, `status` and `markers` are the seed's three parts; `finalizers` (the uninstall and deletion gates)
 * and `create`/`delete` (the object as a whole) are named separately so the table says who may do them
 * (decision 0033).
 */
export type Part = 'spec' | 'status' | 'markers' | 'finalizers' | 'create' | 'delete';

export interface WriteEntry {
  readonly subject: Subject;
  readonly targets: ReadonlyArray<Target>;
  readonly parts: ReadonlyArray<Part>;
  /** The entry covers only these fields (spec/status paths, or marker keys for `markers`). */
  readonly only?: ReadonlyArray<string>;
  /** The entry covers everything but these fields. */
  readonly except?: ReadonlyArray<string>;
  /** E = explicit in the seed, D = derived from its text (digest §2.5). */
  readonly source: 'E' | 'D';
}

const USER_KINDS: ReadonlyArray<Target> = [
  'Application',
  'Volume',
  'Endpoint',
  'BackupPolicy',
  'RestoreJob',
  'VolumeMigration',
];
const OWNED_KINDS: ReadonlyArray<Target> = ['Application', 'Volume', 'BackupPolicy', 'RestoreJob', 'VolumeMigration'];
const KERNEL: ReadonlyArray<Target> = KERNEL_KINDS;
const markers = (...names: ReadonlyArray<MarkerName>) => names.map(markerKey);

/** The writer-assignment table, as far as the seed states it (digest §2.5). */
export const WRITE_TABLE: ReadonlyArray<WriteEntry> = [
  // Users write client-owned spec fields; spec.owner is set by the API from the session and is immutable.
  { subject: 'user', targets: USER_KINDS, parts: ['spec', 'create', 'delete'], except: ['spec.owner'], source: 'E' },
  { subject: 'owner', targets: USER_KINDS, parts: ['spec', 'create', 'delete'], except: ['spec.owner'], source: 'E' },
  { subject: 'owner', targets: OWNED_KINDS, parts: ['spec'], only: ['spec.owner'], source: 'D' }, // transfer (§6.11)
  {
    subject: 'owner',
    targets: ['SystemComponent'],
    parts: ['spec', 'create', 'delete'],
    only: ['spec.package', 'spec.disable'],
    source: 'D',
  },
  { subject: 'control-plane', targets: OWNED_KINDS, parts: ['spec'], only: ['spec.owner'], source: 'E' },
  { subject: 'control-plane', targets: ['ActionRecord'], parts: ['create'], source: 'E' },
  {
    subject: 'adoption',
    targets: [...KERNEL, 'Downstream', 'PersistentVolumeClaim'],
    parts: ['markers'],
    only: markers('managed-by', 'owner-uid', 'adopted-by', 'adoption-reason', 'adopted-at', 'declined', 'released'),
    source: 'E',
  },
  { subject: 'adoption', targets: ['AdoptionSnapshot'], parts: ['create'], source: 'E' },
  { subject: 'catalogue-sync', targets: ['ApplicationDefinition'], parts: ['spec', 'create', 'delete'], source: 'E' },
  { subject: 'application-reconciler', targets: ['Application'], parts: ['status', 'finalizers'], source: 'E' },
  {
    subject: 'application-reconciler',
    targets: ['Downstream'],
    parts: ['spec', 'status', 'markers', 'finalizers', 'create', 'delete'],
    source: 'E',
  },
  { subject: 'application-reconciler', targets: ['ActionRecord'], parts: ['delete'], source: 'E' },
  { subject: 'application-reconciler', targets: ['OrphanManifest'], parts: ['create'], source: 'E' },
  { subject: 'component-reconciler', targets: ['SystemComponent'], parts: ['status', 'finalizers'], source: 'E' },
  {
    subject: 'endpoint-reconciler',
    targets: ['Endpoint'],
    parts: ['status'],
    only: ['status.certificate', 'status.conditions'],
    source: 'E',
  },
  { subject: 'device-collector', targets: ['NodeDevice'], parts: ['spec', 'create'], source: 'D' },
  {
    subject: 'device-reconciler',
    targets: ['NodeDevice'],
    parts: ['markers'],
    only: markers('invalid', 'stale'),
    source: 'D',
  },
  { subject: 'device-reconciler', targets: ['NodeDevice'], parts: ['delete'], source: 'D' }, // reclaim after the node is gone
  { subject: 'volume-reconciler', targets: ['Volume'], parts: ['status', 'finalizers'], source: 'D' },
  { subject: 'volume-reconciler', targets: ['PersistentVolumeClaim'], parts: ['spec', 'create'], source: 'D' },
  { subject: 'backup-reconciler', targets: ['BackupPolicy'], parts: ['status'], source: 'D' },
  { subject: 'backup-reconciler', targets: ['Job'], parts: ['create', 'delete'], source: 'D' },
  { subject: 'restore-reconciler', targets: ['RestoreJob'], parts: ['status'], source: 'D' },
  { subject: 'restore-reconciler', targets: ['Job'], parts: ['create', 'delete'], source: 'D' },
  { subject: 'migration-reconciler', targets: ['VolumeMigration'], parts: ['status'], source: 'D' },
  { subject: 'migration-reconciler', targets: ['Job'], parts: ['create', 'delete'], source: 'D' },
  { subject: 'migration-reconciler', targets: ['PersistentVolumeClaim'], parts: ['spec', 'create'], source: 'D' },
  { subject: 'migration-reconciler', targets: ['Volume'], parts: ['markers'], only: markers('released'), source: 'D' },
];

export interface WriteRequest {
  readonly subject: Subject;
  readonly target: Target;
  readonly part: Part;
  readonly object: { readonly namespace?: string; readonly name: string };
  /** The fields (paths like `spec.replicas`, or marker keys) the write sets; omitted = the whole part. */
  readonly fields?: ReadonlyArray<string>;
  /** Who within the subject class writes (a user's account name, a controller instance): its own field manager. */
  readonly actor?: string;
}

export class WriteRejected extends Data.TaggedError('WriteRejected')<{
  readonly subject: Subject;
  readonly target: Target;
  readonly part: Part;
  readonly object: string;
  readonly fields: ReadonlyArray<string>;
  readonly message: string;
}> {}

export interface Admitted {
  readonly entry: WriteEntry;
  /** The SSA field manager for this subject. */
  readonly fieldManager: string;
}

/**
 * The SSA field manager of a writer: `kos-<subject>`, or `kos-<subject>/<actor>` when an actor (a user's account)
 * is named — so two users writing the same field set conflict (409) instead of silently sharing ownership.
 */
export const fieldManagerOf = (subject: Subject, actor?: string): string =>
  actor === undefined ? `kos-${subject}` : `kos-${subject}/${actor}`.slice(0, 128);

const objectName = (o: WriteRequest['object']): string =>
  o.namespace === undefined ? o.name : `${o.namespace}/${o.name}`;

/** Does `field` fall under `pattern` (equal, or a sub-path of it)? */
const under = (field: string, pattern: string): boolean => field === pattern || field.startsWith(`${pattern}.`);

const covers = (entry: WriteEntry, fields: ReadonlyArray<string> | undefined): boolean => {
  if (fields === undefined) return entry.only === undefined && entry.except === undefined;
  return fields.every(
    (f) =>
      (entry.only === undefined || entry.only.some((p) => under(f, p))) &&
      (entry.except === undefined || !entry.except.some((p) => under(f, p) || under(p, f))),
  );
};

/** Admit a write if an entry of the table allows it; otherwise reject, naming subject and object. */
export const admit = (
  request: WriteRequest,
  table: ReadonlyArray<WriteEntry> = WRITE_TABLE,
): Either.Either<Admitted, WriteRejected> => {
  const candidates = table.filter(
    (e) => e.subject === request.subject && e.targets.includes(request.target) && e.parts.includes(request.part),
  );
  const entry = candidates.find((e) => covers(e, request.fields));
  if (entry !== undefined) return Either.right({ entry, fieldManager: fieldManagerOf(request.subject, request.actor) });
  const what = request.fields === undefined ? request.part : `${request.part} (${request.fields.join(', ')})`;
  const why =
    candidates.length === 0
      ? 'no entry of the write table allows it'
      : `the write table allows this subject only ${candidates
          .map((e) =>
            e.only ? `[${e.only.join(', ')}]` : e.except ? `all but [${e.except.join(', ')}]` : 'everything',
          )
          .join(' or ')} there`;
  return Either.left(
    new WriteRejected({
      subject: request.subject,
      target: request.target,
      part: request.part,
      object: `${request.target} ${objectName(request.object)}`,
      fields: request.fields ?? [],
      message: `write rejected: subject ${request.subject} may not write ${what} of ${request.target} ${objectName(request.object)}: ${why}`,
    }),
  );
};

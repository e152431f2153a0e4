// `WriteScope.Admit` (seed 000 C-20/C-03: "声明里的写入范围经WriteScope.Admit转成写入路径检查的分配"; TC-109; digest §2.5,
// §6.12; decision 0305): every write an extension controller asks for is checked against its declared write scope.
// Kernel objects (kos.tsic.top) are never writable by an extension; another activated extension's group is refused
// even when declared; a foreign resource (a PVC, …) is writable only in the namespaces the scope names. Pure.
import { Data, Either } from 'effect';
import { KOS_GROUP } from '../../api/group.js';

export interface ScopeEntry {
  readonly group: string;
  readonly resource: string;
  readonly namespaces?: ReadonlyArray<string>;
  readonly verbs: ReadonlyArray<'create' | 'update' | 'delete' | 'status'>;
}

export interface ExtensionWrite {
  readonly extension: string;
  readonly controller: string;
  /** API group ('' = core). */
  readonly group: string;
  /** The plural resource name. */
  readonly resource: string;
  readonly namespace?: string;
  readonly name: string;
  readonly verb: 'create' | 'update' | 'delete' | 'status';
}

export class ExtensionWriteRejected extends Data.TaggedError('ExtensionWriteRejected')<{
  readonly extension: string;
  readonly controller: string;
  readonly object: string;
  readonly verb: string;
  readonly message: string;
}> {}

export interface ScopeContext {
  /** The declared scope of the controller. */
  readonly scope: ReadonlyArray<ScopeEntry>;
  /** Groups of the extension's own object kinds. */
  readonly ownGroups: ReadonlyArray<string>;
  /** Groups served for other activated extensions (never writable). */
  readonly otherGroups: ReadonlyArray<string>;
}

const objectOf = (w: ExtensionWrite) =>
  `${w.group === '' ? 'core' : w.group}/${w.resource} ${w.namespace === undefined ? w.name : `${w.namespace}/${w.name}`}`;

/** Admit or reject one extension write; the rejection names the extension, the controller and the object. */
export const admitExtensionWrite = (
  ctx: ScopeContext,
  w: ExtensionWrite,
): Either.Either<ScopeEntry, ExtensionWriteRejected> => {
  const reject = (why: string) =>
    Either.left(
      new ExtensionWriteRejected({
        extension: w.extension,
        controller: w.controller,
        object: objectOf(w),
        verb: w.verb,
        message: `write rejected: extension ${w.extension} controller ${w.controller} may not ${w.verb} ${objectOf(w)}: ${why}`,
      }),
    );
  if (w.group === KOS_GROUP) return reject('kernel objects are written by the kernel only');
  if (ctx.otherGroups.includes(w.group) && !ctx.ownGroups.includes(w.group))
    return reject(`${w.group} belongs to another extension`);
  const own = ctx.ownGroups.includes(w.group);
  const entry = ctx.scope.find(
    (e) =>
      e.group === w.group &&
      e.resource === w.resource &&
      e.verbs.includes(w.verb) &&
      (e.namespaces === undefined ? own : w.namespace !== undefined && e.namespaces.includes(w.namespace)),
  );
  return entry === undefined ? reject('outside the declared write scope') : Either.right(entry);
};

/** Declaration-time problems of a controller's scope (reported as a failure of the controllers kind). */
export const scopeProblems = (
  controller: string,
  scope: ReadonlyArray<ScopeEntry>,
  ownGroups: ReadonlyArray<string>,
): ReadonlyArray<string> =>
  scope.flatMap((e) =>
    e.group === KOS_GROUP
      ? [`controller ${controller}: the write scope names ${KOS_GROUP}, which only the kernel writes`]
      : e.namespaces === undefined && !ownGroups.includes(e.group)
        ? [`controller ${controller}: the write scope on ${e.group || 'core'}/${e.resource} must name its namespaces`]
        : [],
  );

// What an account owns (seed 000 C-63: "删除前必须转移其拥有的应用、卷、备份策略、恢复作业与卷迁移，未转移时返回
// account_has_objects与ownedObjects"; decisions 0390, 0445). Pure: the owner marker is `spec.owner` on kernel and
// extension objects alike, so one rule decides both; the lists come from the caller.
import type { ObjectReference } from '../../api/http/errors.js';

/** `spec.owner` of a stored or submitted object, kernel or extension (undefined when it has none). */
export const ownerOf = (o: { readonly [field: string]: unknown } | undefined): string | undefined => {
  const spec = o?.['spec'];
  const owner = typeof spec === 'object' && spec !== null ? (spec as { owner?: unknown }).owner : undefined;
  return typeof owner === 'string' ? owner : undefined;
};

/** One listed kind: how its objects are addressed and the objects the API server returned. */
export interface ListedKind {
  readonly apiVersion: string;
  readonly kind: string;
  readonly objects: ReadonlyArray<{
    readonly metadata: { readonly namespace?: string; readonly name?: string; readonly uid?: string };
    readonly [field: string]: unknown;
  }>;
}

/** The objects of `lists` whose `spec.owner` is `account`, in list order, each as an object reference. */
export const ownedObjectsOf = (account: string, lists: ReadonlyArray<ListedKind>): ReadonlyArray<ObjectReference> =>
  lists.flatMap((list) =>
    list.objects
      .filter((o) => ownerOf(o) === account)
      .map((o): ObjectReference => ({
        apiVersion: list.apiVersion,
        kind: list.kind,
        ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
        name: o.metadata.name ?? '',
        ...(o.metadata.uid !== undefined ? { uid: o.metadata.uid } : {}),
      })),
  );

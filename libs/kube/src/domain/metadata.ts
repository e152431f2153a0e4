// Metadata-only reads (client-go's `metadata` client, controller-runtime's `WatchesMetadata` / metadata cache): the
// server is asked for meta.k8s.io/v1 PartialObjectMetadata(List) by content negotiation, and whatever comes back is
// cut down to `metadata` before anyone sees it. Pure: Accept headers and the decoding of answers.
import type { KubeList, ListMeta, ObjectMeta, PartialObjectMetadata, Status } from '../api/objects.js';

/**
 * client-go's Accept headers without the protobuf alternative: the PartialObjectMetadata form first, plain JSON as
 * the fallback a server that cannot convert (an old or aggregated API server) answers with.
 */
export const MetadataListAccept = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
export const MetadataAccept = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The metadata of one answer object, typed as the collection's kind (controller-runtime's GVK fix-up: the cache
 * holds `v1/Secret` entries, not `meta.k8s.io/v1/PartialObjectMetadata`). Every field outside `metadata` — `data`,
 * `spec`, `status` of a full object sent by a server that ignored the `as=` parameter — is dropped here.
 */
export const toPartialObjectMetadata = (raw: unknown, apiVersion: string, kind: string): PartialObjectMetadata => ({
  apiVersion,
  kind,
  metadata: (isRecord(raw) && isRecord(raw['metadata']) ? raw['metadata'] : {}) as ObjectMeta,
});

/**
 * client-go's `isLikelyObjectMetadata`: a fallback single object is accepted only if its metadata looks like
 * ObjectMeta (uid, creationTimestamp, name or generateName set).
 */
export const isLikelyObjectMetadata = (m: ObjectMeta): boolean =>
  Boolean(m.uid || m.creationTimestamp || m.name || m.generateName);

export type MetadataDecode<A> =
  | { readonly _tag: 'Ok'; readonly value: A; readonly converted: boolean }
  | { readonly _tag: 'Malformed'; readonly reason: string };

/**
 * A list answer: a PartialObjectMetadataList (`converted`), or — the fallback — any list with `items`, whose items
 * are cut to their metadata. `converted: false` tells the caller the server sent whole objects.
 */
export const decodeMetadataList = (
  body: unknown,
  apiVersion: string,
  kind: string,
): MetadataDecode<KubeList<PartialObjectMetadata>> => {
  if (!isRecord(body)) return { _tag: 'Malformed', reason: 'answer is not a JSON object' };
  const items = body['items'] ?? [];
  if (!Array.isArray(items)) return { _tag: 'Malformed', reason: 'answer has no items array' };
  return {
    _tag: 'Ok',
    converted: body['kind'] === 'PartialObjectMetadataList',
    value: {
      apiVersion,
      kind: `${kind}List`,
      metadata: (isRecord(body['metadata']) ? body['metadata'] : {}) as ListMeta,
      items: items.map((i) => toPartialObjectMetadata(i, apiVersion, kind)),
    },
  };
};

/** A single-object answer (get): PartialObjectMetadata, or a whole object cut down if it looks like one. */
export const decodeMetadataObject = (
  body: unknown,
  apiVersion: string,
  kind: string,
): MetadataDecode<PartialObjectMetadata> => {
  if (!isRecord(body)) return { _tag: 'Malformed', reason: 'answer is not a JSON object' };
  const value = toPartialObjectMetadata(body, apiVersion, kind);
  if (!isLikelyObjectMetadata(value.metadata))
    return { _tag: 'Malformed', reason: 'object does not appear to match the ObjectMeta schema' };
  return { _tag: 'Ok', converted: body['kind'] === 'PartialObjectMetadata', value };
};

/** One watch line: its object cut to metadata (ERROR events keep their Status for the caller to classify). */
export const decodeMetadataWatchEvent = (
  line: unknown,
  apiVersion: string,
  kind: string,
):
  | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK'; readonly object: PartialObjectMetadata }
  | { readonly type: 'ERROR'; readonly status: Status }
  | { readonly type: 'UNKNOWN' } => {
  const ev = isRecord(line) ? line : {};
  const type = ev['type'];
  if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED' || type === 'BOOKMARK')
    return { type, object: toPartialObjectMetadata(ev['object'], apiVersion, kind) };
  if (type === 'ERROR') return { type, status: (isRecord(ev['object']) ? ev['object'] : { kind: 'Status' }) as Status };
  return { type: 'UNKNOWN' };
};

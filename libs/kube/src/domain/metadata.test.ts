// Decoding of metadata-only answers: the converted PartialObjectMetadata form and client-go's plain-JSON fallback
// (a server that ignores `as=` sends whole objects) both end as metadata only, typed as the collection's kind.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeMetadataList,
  decodeMetadataObject,
  decodeMetadataWatchEvent,
  isLikelyObjectMetadata,
  MetadataAccept,
  MetadataListAccept,
  toPartialObjectMetadata,
} from './metadata.js';

const secretMeta = { name: 's1', namespace: 'ns', uid: 'u-1', resourceVersion: '7', labels: { a: 'b' } };
const fullSecret = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: secretMeta,
  type: 'Opaque',
  data: { password: 'Q0FOQVJZ' },
  stringData: { x: 'CANARY' },
};

describe('metadata-only decoding', () => {
  it('asks for the meta.k8s.io/v1 forms first and plain JSON as the fallback (client-go order, no protobuf)', () => {
    expect(MetadataListAccept).toBe(
      'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json',
    );
    expect(MetadataAccept).toBe('application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json');
  });

  it('a PartialObjectMetadataList becomes items of the collection kind, flagged converted', () => {
    const body = {
      kind: 'PartialObjectMetadataList',
      apiVersion: 'meta.k8s.io/v1',
      metadata: { resourceVersion: '9', continue: 'c' },
      items: [{ kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: secretMeta }],
    };
    const d = decodeMetadataList(body, 'v1', 'Secret');
    expect(d).toEqual({
      _tag: 'Ok',
      converted: true,
      value: {
        apiVersion: 'v1',
        kind: 'SecretList',
        metadata: { resourceVersion: '9', continue: 'c' },
        items: [{ apiVersion: 'v1', kind: 'Secret', metadata: secretMeta }],
      },
    });
  });

  it('the fallback: a plain SecretList is cut to metadata (no data, stringData or type survives), flagged not converted', () => {
    const d = decodeMetadataList(
      { kind: 'SecretList', apiVersion: 'v1', metadata: { resourceVersion: '9' }, items: [fullSecret] },
      'v1',
      'Secret',
    );
    expect(d._tag).toBe('Ok');
    if (d._tag !== 'Ok') return;
    expect(d.converted).toBe(false);
    expect(d.value.items).toEqual([{ apiVersion: 'v1', kind: 'Secret', metadata: secretMeta }]);
    expect(JSON.stringify(d.value)).not.toContain('CANARY');
    expect(JSON.stringify(d.value)).not.toContain('Q0FOQVJZ');
  });

  it('malformed list answers are refused (no items array, not an object); an empty list is fine', () => {
    expect(decodeMetadataList({ items: 'x' }, 'v1', 'Secret')._tag).toBe('Malformed');
    expect(decodeMetadataList('x', 'v1', 'Secret')._tag).toBe('Malformed');
    expect(decodeMetadataList({ kind: 'PartialObjectMetadataList', metadata: {} }, 'v1', 'Secret')).toMatchObject({
      _tag: 'Ok',
      value: { items: [] },
    });
  });

  it('a single fallback object must look like ObjectMeta (client-go isLikelyObjectMetadata)', () => {
    expect(decodeMetadataObject(fullSecret, 'v1', 'Secret')).toEqual({
      _tag: 'Ok',
      converted: false,
      value: { apiVersion: 'v1', kind: 'Secret', metadata: secretMeta },
    });
    expect(decodeMetadataObject({ kind: 'PartialObjectMetadata', metadata: secretMeta }, 'v1', 'Secret')).toMatchObject(
      { _tag: 'Ok', converted: true },
    );
    expect(decodeMetadataObject({ data: { a: 'b' } }, 'v1', 'Secret')._tag).toBe('Malformed');
    expect(isLikelyObjectMetadata({})).toBe(false);
    expect(isLikelyObjectMetadata({ generateName: 'x-' })).toBe(true);
    expect(isLikelyObjectMetadata({ creationTimestamp: '2026-01-01T00:00:00Z' })).toBe(true);
  });

  it('watch lines: object events cut to metadata, ERROR keeps its Status, anything else is UNKNOWN', () => {
    expect(decodeMetadataWatchEvent({ type: 'MODIFIED', object: fullSecret }, 'v1', 'Secret')).toEqual({
      type: 'MODIFIED',
      object: { apiVersion: 'v1', kind: 'Secret', metadata: secretMeta },
    });
    expect(
      decodeMetadataWatchEvent(
        { type: 'BOOKMARK', object: { kind: 'PartialObjectMetadata', metadata: { resourceVersion: '12' } } },
        'v1',
        'Secret',
      ),
    ).toEqual({
      type: 'BOOKMARK',
      object: { apiVersion: 'v1', kind: 'Secret', metadata: { resourceVersion: '12' } },
    });
    expect(
      decodeMetadataWatchEvent(
        { type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } },
        'v1',
        'Secret',
      ),
    ).toEqual({
      type: 'ERROR',
      status: { kind: 'Status', code: 410, reason: 'Expired' },
    });
    expect(decodeMetadataWatchEvent({ type: 'WHAT' }, 'v1', 'Secret')).toEqual({ type: 'UNKNOWN' });
  });

  it('property: whatever else an object carries, only apiVersion, kind and its metadata come out', () => {
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string().filter((k) => k !== 'metadata'),
          fc.jsonValue(),
        ),
        fc.dictionary(fc.string(), fc.string()),
        (extra, labels) => {
          const out = toPartialObjectMetadata({ ...extra, metadata: { name: 'n', labels } }, 'v1', 'Secret');
          expect(Object.keys(out).sort()).toEqual(['apiVersion', 'kind', 'metadata']);
          expect(out.metadata).toEqual({ name: 'n', labels });
        },
      ),
    );
  });
});

// The service row, read by the authority's transaction and by the lease store (its own file: both ports use it).
import type { Bytes } from '../domain/bytes.js';

/** A service row as B stores it: the declaration as its canonical CBOR, the listener intent revision. */
export interface StoredService {
  readonly serviceId: Bytes;
  readonly publisher: Bytes;
  readonly networkId: Bytes;
  readonly declarationKey: string;
  /** Canonical CBOR of the declaration (DeclarationCodec). */
  readonly declaration: Bytes;
  readonly state: 'active' | 'withdrawn';
  readonly port: bigint | null;
  readonly listenerRevision: bigint;
}

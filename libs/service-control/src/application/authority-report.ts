// B's report.replace rows (spec §5.3): the publisher's stored services against its new declarations — which rows the
// replace writes and with which listener revision. Pure (split out of authority.ts, issue 25).
import { randomBytes } from 'node:crypto';
import { Either } from 'effect';
import { type Bytes, bytesEqual, toHex } from '../domain/bytes.js';
import { type ServiceControlError, scError } from '../domain/errors.js';
import type { Declaration } from '../domain/declaration.js';
import { applyReport, type ServiceRow, ulid } from '../domain/services.js';
import { DeclarationCodec } from '../api/report.js';
import { declarationFromWire, declarationToWire } from '../api/convert.js';
import type { StoredService } from './service-row.js';

/**
 * The rows a replace writes: created, changed and withdrawn services of `publisher` (unchanged ones left out), and
 * the publisher's rows before it by service id. A corrupt stored declaration is `state-inconsistent`.
 */
export const reportRows = (
  publisher: Bytes,
  networkId: Bytes,
  all: readonly StoredService[],
  decls: readonly Declaration[],
  now: number,
): Either.Either<
  { readonly prev: ReadonlyMap<string, StoredService>; readonly stored: readonly StoredService[] },
  ServiceControlError
> => {
  const mine = all.filter((s) => bytesEqual(s.publisher, publisher));
  const rows: ServiceRow[] = [];
  for (const s of mine) {
    const d = DeclarationCodec.decode(s.declaration);
    if (Either.isLeft(d))
      return Either.left(scError('state-inconsistent', 'stored declaration is corrupt for this scope'));
    rows.push({
      serviceId: s.serviceId,
      declarationKey: s.declarationKey,
      declaration: declarationFromWire(d.right),
      state: s.state,
      port: s.port,
    });
  }
  const app = applyReport(rows, decls, () => ulid(now, new Uint8Array(randomBytes(10))));
  const prev = new Map(mine.map((s) => [toHex(s.serviceId), s]));
  const stored: StoredService[] = [];
  for (const row2 of [...app.created, ...app.updated, ...app.withdrawn]) {
    const old = prev.get(toHex(row2.serviceId));
    const bytes = DeclarationCodec.encodeOrThrow(declarationToWire(row2.declaration));
    const changed =
      old === undefined || old.state !== row2.state || !Buffer.from(old.declaration).equals(Buffer.from(bytes));
    if (!changed) continue;
    stored.push({
      serviceId: row2.serviceId,
      publisher: publisher,
      networkId: networkId,
      declarationKey: row2.declarationKey,
      declaration: bytes,
      state: row2.state,
      port: row2.port,
      listenerRevision: old === undefined ? 1n : old.listenerRevision + 1n,
    });
  }
  return Either.right({ prev, stored });
};

// One audit record per write, whatever its outcome (seed §6.10 via C-14: "每类写操作…追加一条审计记录", rejected
// attempts included), for the kernel kinds' handlers and the extension objects' (which add the extension id).
import { Effect } from 'effect';
import type { ObjectReference } from '../../api/http/errors.js';
import type { ApiError } from './errors.js';
import { Auditor, type AuditVerb } from './services.js';

/**
 * Run `effect` and append one record: accepted with the answer's object, or rejected with the error's code, message
 * and object. The getters are read when the record is written (the handler learns the actor and object as it goes).
 */
export const audited = <A extends { readonly object?: ObjectReference }, R>(
  verb: AuditVerb,
  actor: () => string,
  object: () => ObjectReference | undefined,
  effect: Effect.Effect<A, ApiError, R>,
  extension: () => string | undefined = () => undefined,
): Effect.Effect<A, ApiError, R | Auditor> =>
  Effect.flatMap(Auditor, (auditor) => {
    const extensionId = () => {
      const id = extension();
      return id !== undefined ? { extension: id } : {};
    };
    return effect.pipe(
      Effect.tap((a) => {
        const o = a.object ?? object();
        return auditor.record({
          actor: actor(),
          verb,
          outcome: 'accepted',
          ...(o !== undefined ? { object: o } : {}),
          ...extensionId(),
        });
      }),
      Effect.tapError((e) => {
        const o = e.object ?? object();
        return auditor.record({
          actor: e.actor ?? actor(),
          verb,
          outcome: 'rejected',
          code: e.code,
          message: e.message,
          ...(o !== undefined ? { object: o } : {}),
          ...extensionId(),
        });
      }),
    );
  });

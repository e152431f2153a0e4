// Errors of local-name allocation. The seed (§7) names two codes that are not among the 24 wire codes of
// `domain/errors.ts`: `name-allocation-busy` (retryable) and `name-capacity-limit`. They are local to A and never go
// on the service_control.v1 wire, so they live here verbatim instead of widening the contract's code list
// (decision 0117). Refusals the seed states without a code (a nickname conflict, an unusable name or target) are
// `NameRefused` with a reason. Storage, corruption and counter failures use the contract's ServiceControlError.
import { Data } from 'effect';
import type { ServiceControlError } from '../domain/errors.js';

export const LOCAL_NAME_ERROR_CODES = ['name-allocation-busy', 'name-capacity-limit'] as const;
export type LocalNameErrorCode = (typeof LOCAL_NAME_ERROR_CODES)[number];

/** `name-allocation-busy`: the same request may be retried (the scan continues from the advanced scan_hint). */
export class LocalNameError extends Data.TaggedError('LocalNameError')<{
  readonly code: LocalNameErrorCode;
  readonly detail: string | null;
}> {
  get retryable(): boolean {
    return this.code === 'name-allocation-busy';
  }
  override get message(): string {
    return this.detail === null ? this.code : `${this.code}: ${this.detail}`;
  }
}

export type NameRefusalReason =
  /** the name is bound or tombstoned (manual nickname conflict: refused, the automatic name is not changed) */
  | 'name-taken'
  /** not a usable DNS label */
  | 'invalid-name'
  /** target ref or address unusable */
  | 'invalid-target'
  /** no such name */
  | 'unknown-name'
  /** the name is a tombstone */
  | 'tombstoned'
  /** only manual nicknames are rebound; an automatic name stays with its target until tombstoned */
  | 'not-a-nickname'
  // multi-source names (decision 0192)
  /** a multi-source name changes its source only by an owner selection, never by a rebind */
  | 'multi-source-name'
  /** a source or selection operation on a name that is not a multi-source name */
  | 'not-multi-source'
  /** the selected ref is not a current candidate source of the name */
  | 'unknown-source'
  /** more candidate sources than `MAX_SOURCES` */
  | 'too-many-sources';

export class NameRefused extends Data.TaggedError('NameRefused')<{
  readonly reason: NameRefusalReason;
  readonly name: string;
}> {
  override get message(): string {
    return `${this.name}: ${this.reason}`;
  }
}

export type NameError = LocalNameError | NameRefused | ServiceControlError;

export const nameError = (code: LocalNameErrorCode, detail: string | null = null): LocalNameError =>
  new LocalNameError({ code, detail });

export const refused = (reason: NameRefusalReason, name: string): NameRefused => new NameRefused({ reason, name });

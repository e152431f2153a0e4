// The error kind of the M6 service-control contract (seed §6, digest §4): 24 stable lowercase codes, verbatim and
// complete, each described as data (meaning, retryability, which side raises it) plus one typed error class.
import { Data } from 'effect';

/** The 24 stable codes, in the seed's order. */
export const ERROR_CODES = [
  'unsupported-version',
  'unsupported-field',
  'invalid-encoding',
  'unauthorized',
  'stale-runtime',
  'stale-epoch',
  'stale-session',
  'stale-report',
  'stale-snapshot',
  'stale-listener',
  'stale-proposal',
  'stale-refresh',
  'enforcement-not-applied',
  'runtime-recovery-required',
  'digest-conflict',
  'state-inconsistent',
  'port-unavailable',
  'port-pool-exhausted',
  'allocation-exhausted',
  'recovery-required',
  'apply-failed',
  'lease-expired',
  'storage-unavailable',
  'counter-exhausted',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * How a caller may retry after this error (seed §6: "版本/摘要/状态冲突不自动重试新内容；storage-unavailable可重试同逻辑请求，
 * 但不能越过持久提交门").
 * - `same-request`: the same logical request (same request_id and content) may be sent again later.
 * - `after-resync`: the caller must first re-establish the fence it lost (re-bind, open a new session, ACK, send a new
 *   logical request with a new seq) — never by resending the refused message unchanged.
 * - `never`: no automatic retry; an owner or a substantive change is needed.
 */
export type Retry = 'same-request' | 'after-resync' | 'never';

/** Which side raises the code: A = ns (node daemon), B = NSD (authority). */
export type RaisedBy = 'A' | 'B' | 'A+B';

export interface ErrorSpec {
  readonly code: ErrorCode;
  readonly meaning: string;
  readonly retry: Retry;
  readonly raisedBy: RaisedBy;
}

const spec = (code: ErrorCode, retry: Retry, raisedBy: RaisedBy, meaning: string): ErrorSpec => ({
  code,
  meaning,
  retry,
  raisedBy,
});

/** Every code as data. Meanings follow the digest's §4 table; [D] mappings are recorded in docs/decisions/0060. */
export const ERROR_SPECS: { readonly [C in ErrorCode]: ErrorSpec } = {
  'unsupported-version': spec(
    'unsupported-version',
    'never',
    'A+B',
    'schema ≠ 1, or the peer lacks service_control.v1',
  ),
  'unsupported-field': spec(
    'unsupported-field',
    'never',
    'A+B',
    'unknown field or kind, or a declaration requiring behaviour that cannot be honoured (Host/SNI, public domain, gateway/tunnel)',
  ),
  'invalid-encoding': spec(
    'invalid-encoding',
    'never',
    'A+B',
    'non-canonical or ill-typed CBOR, a wrong byte length, an all-zero nonce, invalid UTF-8, a limit exceeded',
  ),
  unauthorized: spec(
    'unauthorized',
    'never',
    'A+B',
    'signature/identity/ownership failure, identity not a member of the Network, consumer not authorized, non-owner retry-port',
  ),
  'stale-runtime': spec(
    'stale-runtime',
    'never',
    'A+B',
    'lower runtime_generation, same generation with another runtime_id, or a message from a non-current instance',
  ),
  'stale-epoch': spec('stale-epoch', 'after-resync', 'A+B', 'authority_epoch differs from the current one after bind'),
  'stale-session': spec(
    'stale-session',
    'after-resync',
    'A+B',
    'lower session_seq, same seq with another request_id, or a message of an older session',
  ),
  'stale-report': spec('stale-report', 'never', 'B', 'report_revision lower than the accepted one'),
  'stale-snapshot': spec(
    'stale-snapshot',
    'never',
    'A+B',
    'snapshot revision rollback, or an ACK/ready/acquire referencing a snapshot no longer valid for that service',
  ),
  'stale-listener': spec(
    'stale-listener',
    'never',
    'A+B',
    'listener_revision below the floor, or not the current one in ready/refresh/acquire',
  ),
  'stale-proposal': spec(
    'stale-proposal',
    'never',
    'A+B',
    'a ProposalRef that does not match the current proposal (round, seq, id or P)',
  ),
  'stale-refresh': spec('stale-refresh', 'never', 'B', 'lower refresh_seq or consumer_seq'),
  'enforcement-not-applied': spec(
    'enforcement-not-applied',
    'after-resync',
    'B',
    'ready/acquire without a successful enforcement_applied ACK in this session for the referenced snapshot',
  ),
  'runtime-recovery-required': spec(
    'runtime-recovery-required',
    'same-request',
    'B',
    'a recovery bind while the old instance is still valid, or a lost generation without the floor procedure',
  ),
  'digest-conflict': spec(
    'digest-conflict',
    'never',
    'A+B',
    'same revision/seq/proposal_id with a different digest or content',
  ),
  'state-inconsistent': spec(
    'state-inconsistent',
    'never',
    'A+B',
    'recovery floor went backwards, same-revision digest mismatch during recovery, corrupt or missing persistent records; writes for the scope stop',
  ),
  'port-unavailable': spec(
    'port-unavailable',
    'never',
    'A+B',
    'candidate or fixed P owned, tombstoned or conflicting with local listeners; cross-NSD refusal (category only)',
  ),
  'port-pool-exhausted': spec('port-pool-exhausted', 'never', 'B', 'no eligible port left in 40000..50000'),
  'allocation-exhausted': spec(
    'allocation-exhausted',
    'never',
    'B',
    'the 8th candidate of the round failed explicitly; the proposal is Exhausted',
  ),
  'recovery-required': spec(
    'recovery-required',
    'never',
    'B',
    'the proposal is RecoveryRequired, or retry-port while the old proposal cannot be terminated',
  ),
  'apply-failed': spec(
    'apply-failed',
    'never',
    'A',
    'data-plane apply failure; the gate stays closed and the P ownership is kept',
  ),
  'lease-expired': spec(
    'lease-expired',
    'after-resync',
    'A+B',
    'a receipt already expired on arrival, a refresh after the grant expired, acquire while the publisher has no live grant',
  ),
  'storage-unavailable': spec(
    'storage-unavailable',
    'same-request',
    'A+B',
    'the DB/journal cannot commit; the same logical request may be retried, never past the durable-commit gate',
  ),
  'counter-exhausted': spec('counter-exhausted', 'never', 'A+B', 'u64 overflow of any counter; nothing is committed'),
};

export const isErrorCode = (value: unknown): value is ErrorCode =>
  typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);

/**
 * The one typed error of the contract. `code` is the stable wire code; `detail` is local diagnostics only and must
 * never leak other memberships when it is put on the wire.
 */
export class ServiceControlError extends Data.TaggedError('ServiceControlError')<{
  readonly code: ErrorCode;
  readonly detail: string | null;
}> {
  get retry(): Retry {
    return ERROR_SPECS[this.code].retry;
  }
  get raisedBy(): RaisedBy {
    return ERROR_SPECS[this.code].raisedBy;
  }
  /** The code first, so that logs, `String(e)` and Effect's Cause.pretty say what failed (not "An error has occurred"). */
  override get message(): string {
    return this.detail === null ? this.code : `${this.code}: ${this.detail}`;
  }
}

/** Build the typed error for `code`. */
export const scError = (code: ErrorCode, detail: string | null = null): ServiceControlError =>
  new ServiceControlError({ code, detail });

import { Effect, Option } from 'effect';
import type { PreflightRecord } from '../api/retirement.js';
import { auditReceipt } from '../domain/receipt.js';
import { ReceiptStore, ReceiptStoreFailed } from './ports.js';

/**
 * `cluster.deployment.retirement.receipt.audit`: offline. It needs only the receipt store (no Kubernetes service is
 * in its requirements), recomputes the digest closure and reports externalResultsReplayed=false and
 * kubernetesMutation=false.
 */
export const auditStoredReceipt = Effect.fn('Retirement.audit')(function* (key: string, preflight?: PreflightRecord) {
  const store = yield* ReceiptStore;
  const bytes = yield* store.read(key);
  if (Option.isNone(bytes)) {
    return yield* new ReceiptStoreFailed({ code: 'RECEIPT_STORE_FAILED', key, message: `no receipt stored as ${key}` });
  }
  return auditReceipt(bytes.value, preflight);
});

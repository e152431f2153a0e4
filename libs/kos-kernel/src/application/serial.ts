// The explicit serial gate (seed pkg/serial): read-modify-write actions outside the reconcile loop (adopt,
// release, decline) run one at a time per object key. It shares no lock with the reconcile queue; races across
// the two layers are settled by the API server (SSA by field set, explicit updates by resourceVersion → 409).
import { Context, Effect, Layer } from 'effect';

export interface SerialGateService {
  /** Run `effect` while holding the key; other holders of the same key wait, other keys do not. */
  readonly withKey: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>;
}

export class SerialGate extends Context.Tag('@homelab/kos-kernel/SerialGate')<SerialGate, SerialGateService>() {}

export const makeSerialGate = Effect.sync((): SerialGateService => {
  const slots = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>();
  const acquire = (key: string) =>
    Effect.sync(() => {
      let slot = slots.get(key);
      if (slot === undefined) {
        slot = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 };
        slots.set(key, slot);
      }
      slot.users++;
      return slot;
    });
  const release = (key: string) =>
    Effect.sync(() => {
      const slot = slots.get(key);
      if (slot !== undefined && --slot.users === 0) slots.delete(key);
    });
  return {
    withKey: (key, effect) =>
      Effect.acquireUseRelease(
        acquire(key),
        (slot) => slot.semaphore.withPermits(1)(effect),
        () => release(key),
      ),
  };
});

export const SerialGateLive = Layer.effect(SerialGate, makeSerialGate);

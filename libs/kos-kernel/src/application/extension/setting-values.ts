// The stored values of extension settings (seed 000 C-23, C-61: the control-plane database keeps "设置值"; C-28: "设置项
// 的值随停用保留，不随贡献撤除删除"; decision 0345). A value is kept under its key whatever happens to the component that
// declares the item: disable, deactivation and re-enable never touch this store, so a re-enabled item shows its value
// again (TC-110). Adapters: the control-plane database (`SqliteSettingValuesLive`), or process memory when the
// controller runs without one (the loopback Owner, decision 0093).
import { Context, Effect, Layer, Ref } from 'effect';
import type { SettingKey } from '../../domain/extension/settings.js';
import type { DatabaseUnavailable } from '../identity/errors.js';

export class SettingValues extends Context.Tag('@homelab/kos-kernel/SettingValues')<
  SettingValues,
  {
    /** The value kept under `key` (undefined when none is). */
    readonly get: (
      key: SettingKey,
    ) => Effect.Effect<{ readonly found: true; readonly value: unknown } | undefined, DatabaseUnavailable>;
    readonly set: (key: SettingKey, value: unknown, by: string, at: number) => Effect.Effect<void, DatabaseUnavailable>;
  }
>() {}

const keyString = (k: SettingKey) => JSON.stringify([k.id, k.node, k.account ?? '']);

/** Values in process memory: the controller without a control-plane database (lost on restart, as its sessions are). */
export const MemorySettingValuesLive = Layer.effect(
  SettingValues,
  Effect.map(Ref.make<ReadonlyMap<string, unknown>>(new Map()), (ref) =>
    SettingValues.of({
      get: (key) =>
        Effect.map(Ref.get(ref), (m) =>
          m.has(keyString(key)) ? { found: true as const, value: m.get(keyString(key)) } : undefined,
        ),
      set: (key, value) => Ref.update(ref, (m) => new Map(m).set(keyString(key), value)),
    }),
  ),
);

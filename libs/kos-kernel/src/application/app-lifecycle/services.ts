// The application lifecycle's injected services: where capabilities come from (C-11: empty until Provider
// registration is wired) and where one-shot records and orphan manifests live.
import { Context, Effect, Layer } from 'effect';

/** `pkg/app.CapabilitySource`: the capabilities available to compare `spec.requires` with. Empty by default. */
export class CapabilitySource extends Context.Tag('@homelab/kos-kernel/CapabilitySource')<
  CapabilitySource,
  { readonly available: Effect.Effect<ReadonlyArray<string>> }
>() {}

export const EmptyCapabilitySourceLive = Layer.succeed(CapabilitySource, { available: Effect.succeed([]) });

export interface AppLifecycleSettings {
  /** Where action records and app-orphan manifests are written (default `kos-system`). */
  readonly systemNamespace: string;
}

export class AppLifecycleConfig extends Context.Tag('@homelab/kos-kernel/AppLifecycleConfig')<
  AppLifecycleConfig,
  AppLifecycleSettings
>() {}

export const AppLifecycleConfigLive = (settings: Partial<AppLifecycleSettings> = {}) =>
  Layer.succeed(AppLifecycleConfig, { systemNamespace: 'kos-system', ...settings });

/** Capabilities and settings with their defaults (empty source, `kos-system`). */
export const AppLifecycleDefaultsLive = Layer.merge(EmptyCapabilitySourceLive, AppLifecycleConfigLive());

/**
 * Workers of the Application controller (its workqueue's MaxConcurrentReconciles; decision 0245). The queue still
 * runs at most one round per app at a time; different apps' rounds overlap, as the bench's peer (`bench:apps`)
 * overlaps its server-side applies — the bench uses this number for both sides.
 */
export const APPLICATION_WORKERS = 8;

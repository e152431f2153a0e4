// The extension pipeline's ports (seed 000 pkg/extension; decision 0300): `ArtifactSource` fetches package bytes by
// reference; `ExtensionRegistry` holds the latest load result and its visibility projection for the control plane;
// `InstallerConfig` carries the pipeline's settings.
import { Context, Data, type Effect, Layer, Ref } from 'effect';
import type { LoadResult, PackageFacts } from '../../domain/extension/load.js';
import { buildRegistry, type Registry } from '../../domain/extension/registry.js';

export class ArtifactUnreadable extends Data.TaggedError('ArtifactUnreadable')<{
  readonly ref: string;
  readonly reason: string;
}> {
  override get message(): string {
    return `${this.ref}: ${this.reason}`;
  }
}

/** `ArtifactSource`: the bytes of a package artifact by its reference (`file:` or `http(s)://`). */
export class ArtifactSource extends Context.Tag('@homelab/kos-kernel/ArtifactSource')<
  ArtifactSource,
  { readonly fetch: (ref: string) => Effect.Effect<Uint8Array, ArtifactUnreadable> }
>() {}

export interface LoadedState {
  readonly result: LoadResult;
  readonly registry: Registry;
  /** The verified packages' ES modules by component name (ControllerSet loads controllers from them). */
  readonly modules?: ReadonlyMap<string, Readonly<Record<string, string>>>;
}

/** The latest load and its Registry (empty until the first round: the baseline only). */
export class ExtensionRegistry extends Context.Tag('@homelab/kos-kernel/ExtensionRegistry')<
  ExtensionRegistry,
  Ref.Ref<LoadedState>
>() {}

export const emptyLoad: LoadedState = { result: { components: [] }, registry: buildRegistry({ components: [] }) };

export const ExtensionRegistryLive = Layer.effect(ExtensionRegistry, Ref.make(emptyLoad));

export interface InstallerSettings {
  /**
   * Limit the load set to SystemComponents matching this label selector (tests on the shared test bed use it to
   * see only their own components; production leaves it unset).
   */
  readonly labelSelector?: string;
  /**
   * Who writes each extension's ClusterRole (decision 0440): `managed` (default) — the Installer applies it with the
   * CRDs and retires it at uninstall (the shipped `kos-controller-extension-rbac` role grants it that, `escalate`
   * included); `external` — an operator applies the rendered role (`npm run render:extension-role -w
   * @homelab/controller`) and the controller holds no rights on ClusterRoles.
   */
  readonly extensionRbac?: 'managed' | 'external';
}

export class InstallerConfig extends Context.Tag('@homelab/kos-kernel/InstallerConfig')<
  InstallerConfig,
  InstallerSettings
>() {}

export const InstallerConfigLive = (settings: InstallerSettings = {}) => Layer.succeed(InstallerConfig, settings);

/** Verified packages by sha256 (the bytes behind a digest never change), so re-observation does not re-download. */
export class PackageCache extends Context.Tag('@homelab/kos-kernel/PackageCache')<
  PackageCache,
  Ref.Ref<ReadonlyMap<string, PackageFacts>>
>() {}

export const PackageCacheLive = Layer.effect(PackageCache, Ref.make<ReadonlyMap<string, PackageFacts>>(new Map()));

/** The registry, the package cache and the default settings. */
export const ExtensionDefaultsLive = Layer.mergeAll(ExtensionRegistryLive, PackageCacheLive, InstallerConfigLive());

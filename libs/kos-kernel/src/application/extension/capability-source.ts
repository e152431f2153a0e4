// The application lifecycle's capabilities from the Registry (seed 000 TC-108: "扩展能力缺失停在 Pending，安装后继续，
// 自报不构成验证"; C-11; decision 0348): `CapabilitySource.available` = the 8 baseline capabilities plus the
// capabilities of components the Installer activated — packages verified by sha256, declarations checked,
// dependencies met. Nothing an object says about itself counts: not a Provider's labels or status, not a
// SystemComponent's status written by anyone (the Registry is rebuilt from verification every round, never from
// stored status), not an adopted component (it declares nothing).
import { Effect, Layer, Ref } from 'effect';
import { CapabilitySource } from '../app-lifecycle/services.js';
import { ExtensionRegistry } from './services.js';

export const RegistryCapabilitySourceLive: Layer.Layer<CapabilitySource, never, ExtensionRegistry> = Layer.effect(
  CapabilitySource,
  Effect.map(ExtensionRegistry, (ref) => ({
    available: Effect.map(Ref.get(ref), (s) => s.registry.capabilities),
  })),
);

// The eight C-09 baseline capabilities (names [open] in the seed; decision 0302), all at the framework version.
import { KOS_FRAMEWORK_VERSION } from './version.js';

export const BASELINE_CAPABILITIES = [
  'kos.applications',
  'kos.volumes',
  'kos.endpoints',
  'kos.backup',
  'kos.identity',
  'kos.settings',
  'kos.catalogue',
  'kos.devices',
] as const;

export const BASELINE_VERSION = KOS_FRAMEWORK_VERSION;

/** An extension capability's projected name: prefixed with the extension id. */
export const extensionCapabilityName = (extensionId: string, name: string): string => `${extensionId}/${name}`;

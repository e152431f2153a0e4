// Volume size rules (seed 000 §6.4, §5.7 "shrinking a volume" is irreversible; decision 0240). A Volume's
// `spec.size` is its claim's storage request (absent: 1Gi). Growing is asked of the API server, which allows it only
// for a bound claim whose storage class allows expansion; shrinking is refused before anything is written.
import { storageBytes } from '../../api/storage-size.js';
import { templateVolumes } from './template.js';

/** The size of a Volume that does not name one (the claim size before `spec.size` existed). */
export const DEFAULT_VOLUME_SIZE = '1Gi';

export const desiredVolumeSize = (spec: unknown): string => {
  const size = (spec as { size?: unknown } | undefined)?.size;
  return typeof size === 'string' ? size : DEFAULT_VOLUME_SIZE;
};

export type Resize =
  | { readonly _tag: 'Same' }
  | { readonly _tag: 'Grow'; readonly from: string; readonly to: string }
  | { readonly _tag: 'Shrink'; readonly from: string; readonly to: string }
  | { readonly _tag: 'Unreadable'; readonly current: unknown };

/** What moving a claim from its `current` request to `desired` means (bytes compared exactly, `1024Mi` = `1Gi`). */
export const resizeOf = (current: unknown, desired: string): Resize => {
  const from = storageBytes(current);
  const to = storageBytes(desired);
  if (from === undefined || to === undefined) return { _tag: 'Unreadable', current };
  if (to === from) return { _tag: 'Same' };
  return to > from
    ? { _tag: 'Grow', from: String(current), to: desired }
    : { _tag: 'Shrink', from: String(current), to: desired };
};

/** The message of a refused shrink, naming the field (write time and reconciler alike). */
export const shrinkMessage = (from: string, to: string): string =>
  `spec.size ${to} is smaller than the volume's ${from}: shrinking a volume is irreversible and refused; only a larger size can be requested`;

/**
 * The Volume names an Application's template volumes resolve to: `spec.volumes[<volume>]`, or `<app>-<volume>` when
 * it names none (the Volumes live in the Application's declared namespace).
 */
export const volumeClaimsOf = (
  appName: string,
  specVolumes: Readonly<Record<string, string>> | undefined,
  definitionSpec: unknown,
): Readonly<Record<string, string>> =>
  Object.fromEntries(templateVolumes(definitionSpec).map((v) => [v, specVolumes?.[v] ?? `${appName}-${v}`]));

/** A Volume an Application uses, with where it says so. */
export interface ApplicationVolumeRef {
  readonly namespace: string;
  readonly name: string;
  readonly field: string;
}

const stringEntries = (value: unknown): ReadonlyArray<readonly [string, string]> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
    ? Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== '')
    : [];

/**
 * The Volumes an Application holds (digest §6.4 "a volume still referenced … cannot be deleted"; decision 0446), all
 * in its declared namespace: every Volume its `spec.volumes` names (`spec.volumes.<volume>`, with or without a
 * definition), the default `<app>-<volume>` of each template volume of its current definition it names none for
 * (`volume <volume>`), and the Volumes of its applied baseline (`status.applied.volumes.<volume>`: what its workload
 * was installed with, until a new baseline replaces it).
 */
export const applicationVolumeRefs = (
  app: { readonly name: string; readonly namespace: string; readonly spec?: unknown; readonly status?: unknown },
  definitionSpec: unknown,
): ReadonlyArray<ApplicationVolumeRef> => {
  const specVolumes = Object.fromEntries(stringEntries((app.spec as { volumes?: unknown } | undefined)?.volumes));
  const refs: ApplicationVolumeRef[] = Object.entries(specVolumes).map(([v, name]) => ({
    namespace: app.namespace,
    name,
    field: `spec.volumes.${v}`,
  }));
  if (definitionSpec !== undefined)
    for (const [v, name] of Object.entries(volumeClaimsOf(app.name, specVolumes, definitionSpec)))
      if (specVolumes[v] === undefined) refs.push({ namespace: app.namespace, name, field: `volume ${v}` });
  const applied = (app.status as { applied?: { volumes?: unknown } } | undefined)?.applied?.volumes;
  for (const [v, name] of stringEntries(applied))
    refs.push({ namespace: app.namespace, name, field: `status.applied.volumes.${v}` });
  return refs;
};

// Volume size rules (seed 000 §6.4, §5.7 "shrinking a volume" is irreversible; decision 0240). A Volume's
// `spec.size` is its claim's storage request (absent: 1Gi). Growing is asked of the API server, which allows it only
// for a bound claim whose storage class allows expansion; shrinking is refused before anything is written.
import { storageBytes } from '../../api/storage-size.js';

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

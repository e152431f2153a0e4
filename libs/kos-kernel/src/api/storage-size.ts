// `Volume.spec.size` (seed 000 §6.4, digest §2.3 "Volume: spec.size"; decision 0240): a Kubernetes quantity of
// bytes, positive and below 8Ei (Kubernetes keeps storage requests in an int64). The same Schema decodes control-plane
// writes and generates the CRD, where a pattern and a CEL rule (Kubernetes' own quantity library) make the native API
// refuse the same values.
import { Schema } from 'effect';
import { cel } from '@homelab/crd';

/** A plain or decimal number with an optional binary (Ki…Ei) or decimal (k…E) suffix; no sign, no milli, no exponent. */
export const STORAGE_SIZE_PATTERN = /^(?:[0-9]+|[0-9]*\.[0-9]+)(?:Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/;

const MULTIPLIER: Readonly<Record<string, bigint>> = {
  '': 1n,
  k: 10n ** 3n,
  M: 10n ** 6n,
  G: 10n ** 9n,
  T: 10n ** 12n,
  P: 10n ** 15n,
  E: 10n ** 18n,
  Ki: 2n ** 10n,
  Mi: 2n ** 20n,
  Gi: 2n ** 30n,
  Ti: 2n ** 40n,
  Pi: 2n ** 50n,
  Ei: 2n ** 60n,
};

/** 8Ei: the first size Kubernetes cannot hold in an int64 of bytes. */
export const STORAGE_SIZE_LIMIT = 2n ** 63n;

/**
 * The exact number of bytes a size stands for, a fraction rounded up as Kubernetes does (`1.5Gi` → 1610612736,
 * `0.5` → 1); undefined when the text is not a size.
 */
export const storageBytes = (size: unknown): bigint | undefined => {
  if (typeof size !== 'string' || !STORAGE_SIZE_PATTERN.test(size)) return undefined;
  const m = /^([0-9]*)(?:\.([0-9]+))?([A-Za-z]*)$/.exec(size);
  if (m === null) return undefined;
  const fraction = m[2] ?? '';
  const scale = 10n ** BigInt(fraction.length);
  const numerator = BigInt(`${m[1] ?? ''}${fraction}` || '0') * (MULTIPLIER[m[3] ?? ''] as bigint);
  return (numerator + scale - 1n) / scale;
};

export const StorageSize = Schema.String.pipe(
  Schema.maxLength(32),
  Schema.pattern(STORAGE_SIZE_PATTERN, {
    message: () => 'a Kubernetes quantity of bytes such as 512Mi, 10Gi or 1.5T (no sign, no milli, no exponent)',
  }),
  Schema.filter(
    (s) => {
      const bytes = storageBytes(s) ?? 0n;
      return bytes > 0n && bytes < STORAGE_SIZE_LIMIT;
    },
    { message: () => 'must be more than 0 and less than 8Ei' },
  ),
  cel(
    "quantity(self).isGreaterThan(quantity('0')) && quantity(self).isLessThan(quantity('8Ei'))",
    'must be more than 0 and less than 8Ei',
  ),
);

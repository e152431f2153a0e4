// The candidate space of automatic local names (seed §7, digest §7): two letters and three digits at phase 0; each
// phase k appends k characters from the fixed alphabet `0123456789abcdefghijklmnopqrstuvwxyz` (leading zeros kept).
// Candidate numbers are a mixed-radix bijection (letters, then digits, then suffix, most significant first), so the
// ascending scan is stable and, for the seed's alphabets, equal to the names' byte order (decision 0116).

/** The shape of an automatic-name space. `SHORT_NAME_FORMAT` is the seed's; others exist only for small-space tests. */
export interface NameFormat {
  /** Recorded in the store: a database made for one format is never opened with another. */
  readonly id: string;
  readonly letters: string;
  readonly letterCount: number;
  readonly digits: string;
  readonly digitCount: number;
  /** The append alphabet, in candidate order. */
  readonly suffix: string;
  /** The last phase: reaching 80 % there is `name-capacity-limit` (seed "达到k=8阈值"). */
  readonly maxPhase: number;
}

export const SHORT_NAME_FORMAT: NameFormat = {
  id: 'aa000+[0-9a-z]{0..8}',
  letters: 'abcdefghijklmnopqrstuvwxyz',
  letterCount: 2,
  digits: '0123456789',
  digitCount: 3,
  suffix: '0123456789abcdefghijklmnopqrstuvwxyz',
  maxPhase: 8,
};

const pow = (b: bigint, e: number): bigint => {
  let r = 1n;
  for (let i = 0; i < e; i++) r *= b;
  return r;
};

/** Phase-0 capacity (26·26·1000 = 676 000 for the seed's format). */
export const baseCapacity = (f: NameFormat): bigint =>
  pow(BigInt(f.letters.length), f.letterCount) * pow(BigInt(f.digits.length), f.digitCount);

/** Capacity of phase k: base · |suffix|^k. */
export const phaseCapacity = (f: NameFormat, phase: number): bigint =>
  baseCapacity(f) * pow(BigInt(f.suffix.length), phase);

/** The name length of phase k. */
export const phaseLength = (f: NameFormat, phase: number): number => f.letterCount + f.digitCount + phase;

/** Whether `occupied` candidates of phase k reach the 80 % threshold (`count·5 ≥ cap·4`). */
export const reachesThreshold = (f: NameFormat, phase: number, occupied: bigint): boolean =>
  occupied * 5n >= phaseCapacity(f, phase) * 4n;

/** Candidate number n (0 ≤ n < capacity) of phase k → its name. */
export const candidateName = (f: NameFormat, phase: number, n: bigint): string => {
  if (n < 0n || n >= phaseCapacity(f, phase)) throw new RangeError(`candidate ${n} outside phase ${phase}`);
  const out: string[] = [];
  let rest = n;
  const take = (alphabet: string, count: number): void => {
    const base = BigInt(alphabet.length);
    for (let i = 0; i < count; i++) {
      out.push(alphabet[Number(rest % base)] as string);
      rest /= base;
    }
  };
  take(f.suffix, phase);
  take(f.digits, f.digitCount);
  take(f.letters, f.letterCount);
  return out.reverse().join('');
};

/** A name → its (phase, candidate number), or null when it is not of any phase's format (0..maxPhase). */
export const parseCandidate = (f: NameFormat, name: string): { readonly phase: number; readonly n: bigint } | null => {
  const phase = name.length - f.letterCount - f.digitCount;
  if (phase < 0 || phase > f.maxPhase) return null;
  let n = 0n;
  const read = (alphabet: string, from: number, count: number): boolean => {
    const base = BigInt(alphabet.length);
    for (let i = from; i < from + count; i++) {
      const d = alphabet.indexOf(name[i] as string);
      if (d < 0) return false;
      n = n * base + BigInt(d);
    }
    return true;
  };
  if (!read(f.letters, 0, f.letterCount)) return null;
  if (!read(f.digits, f.letterCount, f.digitCount)) return null;
  if (!read(f.suffix, f.letterCount + f.digitCount, phase)) return null;
  return { phase, n };
};

/** The format phase of a name (auto or manual), or null. Same-format manual names count toward that phase's 80 %. */
export const formatPhase = (f: NameFormat, name: string): number | null => parseCandidate(f, name)?.phase ?? null;

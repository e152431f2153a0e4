// Versions and version ranges of extension declarations (seed 000 C-18/C-28; decision 0302): semver
// `MAJOR.MINOR.PATCH[-pre]` and a small, dependency-free subset of npm ranges — `*`, exact, `> >= < <=`, caret,
// tilde, space = AND, `||` = OR. Pure.
import { Either } from 'effect';

/** The extension framework's own version: the target every declaration's `framework` range must contain. */
export const KOS_FRAMEWORK_VERSION = '1.0.0';

export interface SemVer {
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
  readonly pre: string;
}

const VERSION = /^(0|[1-9]\d{0,8})\.(0|[1-9]\d{0,8})\.(0|[1-9]\d{0,8})(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$/;

export const parseVersion = (text: string): SemVer | undefined => {
  const m = VERSION.exec(text);
  if (m === null) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), pre: m[4] ?? '' };
};

export const isVersion = (text: string): boolean => parseVersion(text) !== undefined;

/** Compare two versions: negative, 0, positive. A pre-release sorts before its release. */
export const compareVersions = (a: SemVer, b: SemVer): number => {
  if (a.major !== b.major) return a.major - b.major;
  if (a.minor !== b.minor) return a.minor - b.minor;
  if (a.patch !== b.patch) return a.patch - b.patch;
  if (a.pre === b.pre) return 0;
  if (a.pre === '') return 1;
  if (b.pre === '') return -1;
  return a.pre < b.pre ? -1 : 1;
};

type Op = '=' | '>' | '>=' | '<' | '<=';
interface Comparator {
  readonly op: Op;
  readonly version: SemVer;
}
/** A parsed range: OR of ANDs of comparators (an empty AND = `*`). */
export interface VersionRange {
  readonly text: string;
  readonly alternatives: ReadonlyArray<ReadonlyArray<Comparator>>;
}

const PARTIAL = /^(0|[1-9]\d{0,8})(?:\.(0|[1-9]\d{0,8}|[xX*]))?(?:\.(0|[1-9]\d{0,8}|[xX*]))?(?:-([0-9A-Za-z.-]+))?$/;

const v = (major: number, minor: number, patch: number, pre = ''): SemVer => ({ major, minor, patch, pre });

const comparatorsOf = (token: string): ReadonlyArray<Comparator> | string => {
  if (token === '*' || token === 'x' || token === 'X') return [];
  const m = /^(\^|~|>=|<=|>|<|=)?(.*)$/.exec(token);
  const op = m?.[1] ?? '';
  const rest = m?.[2] ?? '';
  const p = PARTIAL.exec(rest);
  if (p === null) return `"${token}" is not a version or range`;
  const major = Number(p[1]);
  const minorGiven = p[2] !== undefined && !/[xX*]/.test(p[2]);
  const patchGiven = p[3] !== undefined && !/[xX*]/.test(p[3]);
  const minor = minorGiven ? Number(p[2]) : 0;
  const patch = patchGiven ? Number(p[3]) : 0;
  const base = v(major, minor, patch, p[4] ?? '');
  const full = minorGiven && patchGiven;
  switch (op) {
    case '^': {
      const upper =
        major > 0 || !minorGiven
          ? v(major + 1, 0, 0)
          : minor > 0 || !patchGiven
            ? v(0, minor + 1, 0)
            : v(0, 0, patch + 1);
      return [
        { op: '>=', version: base },
        { op: '<', version: upper },
      ];
    }
    case '~':
      return [
        { op: '>=', version: base },
        { op: '<', version: minorGiven ? v(major, minor + 1, 0) : v(major + 1, 0, 0) },
      ];
    case '':
    case '=':
      if (full) return [{ op: '=', version: base }];
      // a partial version is an x-range: 1 = >=1.0.0 <2.0.0, 1.2 = >=1.2.0 <1.3.0
      return [
        { op: '>=', version: base },
        { op: '<', version: minorGiven ? v(major, minor + 1, 0) : v(major + 1, 0, 0) },
      ];
    default:
      return [{ op: op as Op, version: base }];
  }
};

/** Parse a range; a malformed one is an error naming the bad token (never "matches nothing" silently). */
export const parseRange = (text: string): Either.Either<VersionRange, string> => {
  const trimmed = text.trim();
  if (trimmed === '') return Either.left('an empty version range');
  if (trimmed.length > 256) return Either.left('a version range longer than 256 characters');
  const alternatives: Array<ReadonlyArray<Comparator>> = [];
  for (const alt of trimmed.split('||')) {
    const tokens = alt
      .trim()
      .split(/\s+/)
      .filter((t) => t !== '');
    if (tokens.length === 0) return Either.left(`"${text}" has an empty alternative`);
    const all: Comparator[] = [];
    for (const t of tokens) {
      const c = comparatorsOf(t);
      if (typeof c === 'string') return Either.left(c);
      all.push(...c);
    }
    alternatives.push(all);
  }
  return Either.right({ text: trimmed, alternatives });
};

const holds = (c: Comparator, version: SemVer): boolean => {
  const d = compareVersions(version, c.version);
  switch (c.op) {
    case '=':
      return d === 0;
    case '>':
      return d > 0;
    case '>=':
      return d >= 0;
    case '<':
      return d < 0;
    case '<=':
      return d <= 0;
  }
};

export const satisfies = (version: SemVer | string, range: VersionRange | string): boolean => {
  const ver = typeof version === 'string' ? parseVersion(version) : version;
  if (ver === undefined) return false;
  const r = typeof range === 'string' ? parseRange(range) : Either.right(range);
  if (Either.isLeft(r)) return false;
  return r.right.alternatives.some((and) => and.every((c) => holds(c, ver)));
};

// The production RNG for name candidates: node:crypto, uniform by rejection sampling over whole bytes. Its state is
// never persisted (seed §7). Tests inject their own `NameRng`.
import { randomBytes } from 'node:crypto';
import type { NameRng } from './table.js';

export const cryptoNameRng: NameRng = (bound) => {
  if (bound <= 0n) throw new RangeError('bound must be positive');
  const bytes = Math.max(1, Math.ceil(bound.toString(16).length / 2));
  const space = 1n << BigInt(bytes * 8);
  const limit = space - (space % bound); // reject the tail so every residue is equally likely
  for (;;) {
    const v = BigInt(`0x${randomBytes(bytes).toString('hex')}`);
    if (v < limit) return v % bound;
  }
};

// argon2id password digests through @node-rs/argon2 (Rust `argon2` crate via N-API, computed off the event loop):
// chosen over @noble/hashes' pure-JS argon2id after measuring both on this machine (decision 0210).
import { hash, verify } from '@node-rs/argon2';
import { Effect, Layer } from 'effect';
import { PasswordHasher } from '../../application/identity/ports.js';

/** OWASP Password Storage Cheat Sheet: argon2id, m = 19 MiB, t = 2, p = 1 (its first listed configuration). */
export const OWASP_ARGON2ID = { memoryKiB: 19_456, iterations: 2, parallelism: 1 } as const;

export interface Argon2Parameters {
  readonly memoryKiB: number;
  readonly iterations: number;
  readonly parallelism: number;
}

export const makeArgon2idHasher = (parameters: Argon2Parameters = OWASP_ARGON2ID) =>
  PasswordHasher.of({
    parameters,
    hash: (password) =>
      Effect.promise(() =>
        hash(password, {
          memoryCost: parameters.memoryKiB,
          timeCost: parameters.iterations,
          parallelism: parameters.parallelism,
          outputLen: 32,
        }),
      ),
    // A digest that does not parse is a failed verification, never a crash of the login path.
    verify: (passwordHash, password) => Effect.promise(() => verify(passwordHash, password).catch(() => false)),
  });

export const Argon2idHasherLive = (parameters: Argon2Parameters = OWASP_ARGON2ID): Layer.Layer<PasswordHasher> =>
  Layer.succeed(PasswordHasher, makeArgon2idHasher(parameters));

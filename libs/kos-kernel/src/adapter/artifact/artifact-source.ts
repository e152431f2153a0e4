// `ArtifactSource` over a local directory (`file:<relative path>`, confined to the root) and HTTP(S) (decision 0300).
// The only code that reads package bytes from the outside.
import { readFile, realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { Effect, Layer } from 'effect';
import { ArtifactSource, ArtifactUnreadable } from '../../application/extension/services.js';

export interface ArtifactSourceOptions {
  /** The directory `file:` references resolve in; absent = `file:` references are unreadable. */
  readonly root?: string;
  readonly httpTimeoutMs?: number;
  readonly maxBytes?: number;
}

const fromDirectory = (root: string, ref: string, path: string, maxBytes: number) =>
  Effect.tryPromise({
    try: async () => {
      if (path === '' || isAbsolute(path)) throw new Error('outside_root: the path must be relative to the root');
      const base = await realpath(root);
      const target = await realpath(resolve(base, path));
      const rel = relative(base, target);
      if (rel === '' || rel.startsWith('..') || isAbsolute(rel))
        throw new Error('outside_root: the path leaves the root');
      const bytes = await readFile(target);
      if (bytes.byteLength > maxBytes) throw new Error(`larger than ${maxBytes} bytes`);
      return new Uint8Array(bytes);
    },
    catch: (e) => new ArtifactUnreadable({ ref, reason: e instanceof Error ? e.message : String(e) }),
  });

const fromHttp = (ref: string, timeoutMs: number, maxBytes: number) =>
  Effect.tryPromise({
    try: async (signal) => {
      const res = await fetch(ref, { signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const bytes = new Uint8Array(await res.arrayBuffer());
      if (bytes.byteLength > maxBytes) throw new Error(`larger than ${maxBytes} bytes`);
      return bytes;
    },
    catch: (e) => new ArtifactUnreadable({ ref, reason: e instanceof Error ? e.message : String(e) }),
  });

export const makeArtifactSource = (options: ArtifactSourceOptions = {}) => {
  const timeoutMs = options.httpTimeoutMs ?? 10_000;
  const maxBytes = options.maxBytes ?? 8 * 1024 * 1024;
  return {
    fetch: (ref: string) => {
      if (ref.startsWith('file:')) {
        if (options.root === undefined)
          return Effect.fail(new ArtifactUnreadable({ ref, reason: 'no artifact directory is configured' }));
        return fromDirectory(options.root, ref, ref.slice('file:'.length), maxBytes);
      }
      if (ref.startsWith('http://') || ref.startsWith('https://')) return fromHttp(ref, timeoutMs, maxBytes);
      return Effect.fail(new ArtifactUnreadable({ ref, reason: 'unsupported reference (file: or http(s)://)' }));
    },
  };
};

export const ArtifactSourceLive = (options: ArtifactSourceOptions = {}) =>
  Layer.succeed(ArtifactSource, makeArtifactSource(options));

// Receipts (and preflight records) as files in one operator-chosen directory: created with O_CREAT|O_EXCL and mode
// 0600, written and fsynced in place — never renamed over, never overwritten, no temporary file (decision 0072).
import { closeSync, constants, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Effect, Layer, Option } from 'effect';
import { ReceiptExists, ReceiptStore, ReceiptStoreFailed } from '../../application/ports.js';

const KEY = /^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/;

const errno = (e: unknown): string | undefined => (e as NodeJS.ErrnoException | undefined)?.code;

/** Write `bytes` to `dir/key` only if nothing exists there. Fails ReceiptExists on EEXIST. */
export const createExclusiveFile = (
  dir: string,
  key: string,
  bytes: string,
): Effect.Effect<void, ReceiptExists | ReceiptStoreFailed> =>
  Effect.gen(function* () {
    if (!KEY.test(key) || key.includes('..')) {
      return yield* new ReceiptStoreFailed({
        code: 'RECEIPT_STORE_FAILED',
        key,
        message: `not a plain file name: ${key}`,
      });
    }
    const path = join(dir, key);
    const fd = yield* Effect.try({
      try: () =>
        openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600),
      catch: (e) =>
        errno(e) === 'EEXIST'
          ? new ReceiptExists({ key })
          : new ReceiptStoreFailed({ code: 'RECEIPT_STORE_FAILED', key, message: `${path}: ${(e as Error).message}` }),
    });
    yield* Effect.try({
      try: () => {
        try {
          const buf = Buffer.from(bytes, 'utf8');
          let off = 0;
          while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
          fsyncSync(fd);
        } finally {
          closeSync(fd);
        }
        // Make the new directory entry durable too.
        const dfd = openSync(dir, constants.O_RDONLY);
        try {
          fsyncSync(dfd);
        } finally {
          closeSync(dfd);
        }
      },
      catch: (e) =>
        new ReceiptStoreFailed({ code: 'RECEIPT_STORE_FAILED', key, message: `${path}: ${(e as Error).message}` }),
    });
  });

export const readFileOption = (dir: string, key: string): Effect.Effect<Option.Option<string>, ReceiptStoreFailed> =>
  Effect.try({
    try: () => {
      if (!KEY.test(key) || key.includes('..')) throw new Error(`not a plain file name: ${key}`);
      try {
        return Option.some(readFileSync(join(dir, key), 'utf8'));
      } catch (e) {
        if (errno(e) === 'ENOENT') return Option.none<string>();
        throw e;
      }
    },
    catch: (e) =>
      new ReceiptStoreFailed({
        code: 'RECEIPT_STORE_FAILED',
        key,
        message: `${join(dir, key)}: ${(e as Error).message}`,
      }),
  });

/** The ReceiptStore over a directory (which must exist; the CLI creates it with mode 0700). */
export const FileReceiptStoreLive = (dir: string): Layer.Layer<ReceiptStore> =>
  Layer.succeed(
    ReceiptStore,
    ReceiptStore.of({
      createExclusive: (key, bytes) => createExclusiveFile(dir, key, bytes),
      read: (key) => readFileOption(dir, key),
    }),
  );

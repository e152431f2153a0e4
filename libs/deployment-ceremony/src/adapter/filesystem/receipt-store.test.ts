// The receipt store on the real file system (a private temporary directory).
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect, Option } from 'effect';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createExclusiveFile, readFileOption } from './receipt-store.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'receipts-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const flip = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(e));

describe('file receipt store (create-exclusive, never overwritten)', () => {
  it('creates the file with mode 0600 and exactly the bytes; a second create is ReceiptExists and changes nothing', async () => {
    const old = process.umask(0);
    try {
      expect((await flip(createExclusiveFile(dir, 'r.json', '{"a":1}')))._tag).toBe('Right');
    } finally {
      process.umask(old);
    }
    expect(statSync(join(dir, 'r.json')).mode & 0o777).toBe(0o600);
    const again = await flip(createExclusiveFile(dir, 'r.json', '{"a":2}'));
    expect(again._tag === 'Left' && again.left._tag).toBe('ReceiptExists');
    expect(readFileSync(join(dir, 'r.json'), 'utf8')).toBe('{"a":1}');
    expect(readdirSync(dir)).toEqual(['r.json']); // no temporary file
    expect(Option.getOrUndefined(await Effect.runPromise(readFileOption(dir, 'r.json')))).toBe('{"a":1}');
    expect(Option.isNone(await Effect.runPromise(readFileOption(dir, 'missing.json')))).toBe(true);
  });

  it('a symlink planted under the key is not followed (the link target stays untouched); path-like keys are refused', async () => {
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'keep');
    symlinkSync(victim, join(dir, 'planted.json'));
    const r = await flip(createExclusiveFile(dir, 'planted.json', 'x'));
    expect(r._tag).toBe('Left');
    expect(readFileSync(victim, 'utf8')).toBe('keep');
    for (const key of ['../escape.json', 'a/b.json', '.hidden', '']) {
      const bad = await flip(createExclusiveFile(dir, key, 'x'));
      expect(bad._tag === 'Left' && bad.left._tag).toBe('ReceiptStoreFailed');
    }
  });
});

// `npm start` with the node (tools/scripts/start.sh): imports the built-in apps' stand-in images (stand-in-images.ts)
// into the running test bed's node, so the apps the controller installs really start. Reads the test bed's state file
// (HOMELAB_TESTBED_STATE or the default); exits 1 with the reason if the test bed has no node.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Effect } from 'effect';
import { defaultStateFile, importImages, readState, writeBusyboxImage } from '@homelab/testbed';
import { standInImages } from './stand-in-images.js';

const program = Effect.gen(function* () {
  const state = yield* readState(defaultStateFile());
  if (state.node === undefined)
    return yield* Effect.fail(new Error('the running test bed has no node (testbed up --node)'));
  const { containerd } = state.node;
  const dir = mkdtempSync(join(tmpdir(), 'kos-stand-ins-'));
  const tarballs = standInImages.map((spec, i) => writeBusyboxImage(dir, `stand-in-${i}.tar`, spec));
  return yield* importImages(containerd, tarballs).pipe(
    Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true }))),
  );
});

Effect.runPromise(program).then(
  (names) => process.stdout.write(`imported stand-in images: ${names.join(', ')}\n`),
  (e: unknown) => {
    process.stderr.write(`importing the stand-in images: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  },
);

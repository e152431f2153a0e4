// Writes deploy/crds/kos/ from the Schemas (the drift test fails until this has been run after a Schema change).
import { join } from 'node:path';
import { Effect } from 'effect';
import { describeDrift, syncManifests } from '@homelab/crd';
import { kosCrdFiles } from '../src/index.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const directory = join(import.meta.dirname, '../../../deploy/crds/kos');
const report = await Effect.runPromise(syncManifests({ directory, files: kosCrdFiles(), mode: 'write' }));
for (const file of report.written) print(`wrote ${join(directory, file)}`);
const stray = report.problems.filter((p) => p._tag === 'Stray');
if (stray.length > 0) print(describeDrift({ ...report, problems: stray }));
print(`${Object.keys(kosCrdFiles()).length} CRDs, ${report.written.length} written`);

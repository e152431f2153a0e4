// Writes deploy/rbac/generated/ (rbac-generated.test.ts fails until this has run after a kind or write-table change).
import { join } from 'node:path';
import { Effect } from 'effect';
import { describeDrift, syncManifests } from '@homelab/crd';
import { generatedRbacFiles } from './rbac.js';

const directory = join(import.meta.dirname, '../../../deploy/rbac/generated');
const report = await Effect.runPromise(syncManifests({ directory, files: generatedRbacFiles(), mode: 'write' }));
for (const file of report.written) process.stdout.write(`wrote ${join(directory, file)}\n`);
const stray = report.problems.filter((p) => p._tag === 'Stray');
if (stray.length > 0) process.stdout.write(`${describeDrift({ ...report, problems: stray })}\n`);

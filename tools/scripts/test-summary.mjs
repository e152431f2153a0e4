// Totals vitest JSON reports (one per project) into the one closing line CI reads.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2] ?? 'reports/vitest';
// Further arguments name checks that failed before the tests (format, lint, typecheck…): one failure each.
const failedChecks = process.argv.slice(3);
let passed = 0,
  failed = 0,
  skipped = 0,
  suitesFailed = 0;
const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.json')) : [];
for (const file of files) {
  const r = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  passed += r.numPassedTests;
  failed += r.numFailedTests;
  skipped += r.numPendingTests + (r.numTodoTests ?? 0);
  // A file that failed to load has no tests but failed: count it so it cannot hide.
  suitesFailed += (r.testResults ?? []).filter((s) => s.status === 'failed' && s.assertionResults.length === 0).length;
  console.log(
    `${file.replace(/\.json$/, '').padEnd(24)} ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests} skipped`,
  );
}
failed += suitesFailed;
// The test step exited non-zero although no report counts a failure (vitest's unhandled errors): one failure.
if (process.env.TESTS_EXITED_NONZERO === '1' && failed === 0) {
  console.log('check failed: a test project exited non-zero with no failed test (unhandled errors; see its output)');
  failed += 1;
}
for (const check of failedChecks) console.log(`check failed: ${check}`);
failed += failedChecks.length;
if (files.length === 0) console.log('no test reports found');
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);

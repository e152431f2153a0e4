// The KOS application tests on the test bed's real node (`npm run test:node`; issue 27): twins of the envtest-shaped
// app tests in test/, where pods really run. Not part of the default `npm test` (decision 0271).
import { projectTestConfig } from '../../vitest.shared.js';

export default projectTestConfig(import.meta.dirname, {
  testbed: true,
  node: true,
  name: 'kos-kernel-node',
  include: ['node-test/**/*.test.ts'],
  sequentialFiles: true,
  testTimeout: 600_000,
});

// The node smoke tests (`npm run test:node`): a test bed with a real node, files one at a time. Not part of the
// default `npm test` run (see README: the node's cold build would be added to CI).
import { projectTestConfig } from '../../vitest.shared.js';

export default projectTestConfig(import.meta.dirname, {
  testbed: true,
  node: true,
  name: 'testbed-node',
  include: ['node-test/smoke/**/*.test.ts'],
  sequentialFiles: true,
  testTimeout: 120_000,
});

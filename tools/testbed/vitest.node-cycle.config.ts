// The node's up/down cycle test (`npm run test:node`, before the smoke tests): it starts and stops test beds with a
// node itself through the CLI, so no test bed may hold the node meanwhile (one node per machine).
import { projectTestConfig } from '../../vitest.shared.js';

export default projectTestConfig(import.meta.dirname, {
  name: 'testbed-node-cycle',
  include: ['node-test/cycle/**/*.test.ts'],
  testTimeout: 600_000,
});

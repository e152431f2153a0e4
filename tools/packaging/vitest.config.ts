import { mergeConfig } from 'vitest/config';
import { projectTestConfig } from '../../vitest.shared.js';

// The packed-library tests need npm, tsc and node only; deploy-manifests.it.test.ts applies deploy/ to the test bed
// (left out, with the test bed, by HOMELAB_TEST_SCOPE=unit). The setup (pack 7 libraries, npm install, tsc) takes
// well over the default hook timeout on a loaded machine.
export default mergeConfig(projectTestConfig(import.meta.dirname, { testbed: true }), {
  test: { hookTimeout: 240_000, testTimeout: 120_000 },
});

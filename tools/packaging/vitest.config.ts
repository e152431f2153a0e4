import { mergeConfig } from 'vitest/config';
import { projectTestConfig } from '../../vitest.shared.js';

// No test bed: packing, installing into a scratch project and compiling there need npm, tsc and node only. The
// setup (pack 7 libraries, npm install, tsc) takes well over the default hook timeout on a loaded machine.
export default mergeConfig(projectTestConfig(import.meta.dirname), {
  test: { hookTimeout: 240_000, testTimeout: 120_000 },
});

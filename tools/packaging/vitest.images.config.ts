import { mergeConfig } from 'vitest/config';
import { projectTestConfig } from '../../vitest.shared.js';

// `nx run @homelab/packaging:images-e2e` (decision 0284): image builds take minutes and need root, podman and
// buildah, so they are not part of `npm test`.
export default mergeConfig(
  projectTestConfig(import.meta.dirname, {
    testbed: true,
    name: 'packaging-images',
    include: ['images/**/*.pair.e2e.test.ts'],
  }),
  { test: { hookTimeout: 900_000, testTimeout: 180_000 } },
);

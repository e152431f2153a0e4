import { projectTestConfig } from '../../vitest.shared.js';

// Files run one at a time: test/kos.e2e.test.ts renames a printer column of a shared KOS CRD for a moment to prove
// that `--kos-crds=verify` refuses drift, and every other file starts controllers that verify those CRDs.
export default projectTestConfig(import.meta.dirname, { testbed: true, testTimeout: 120_000, sequentialFiles: true });

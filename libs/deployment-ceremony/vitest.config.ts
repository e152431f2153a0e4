import { projectTestConfig } from '../../vitest.shared.js';

// Unit tests (domain rules, application ordering over in-memory ports) and the adapter tests on the real test bed
// kube-apiserver (test/live.it.test.ts).
export default projectTestConfig(import.meta.dirname, { testbed: true, testTimeout: 60_000 });

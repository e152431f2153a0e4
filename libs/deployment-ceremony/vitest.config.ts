import { projectTestConfig } from '../../vitest.shared.js';

// Unit tests only (domain rules and the application ordering logic over in-memory ports); the Kubernetes adapter and
// its tests on the real test bed come with @homelab/kube.
export default projectTestConfig(import.meta.dirname, { testTimeout: 60_000 });

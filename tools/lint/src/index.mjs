// @ts-check
// The workspace's ESLint plugin: `@homelab/no-import-cycle` (decision 0250).
import { noImportCycle } from './no-import-cycle.mjs';

export default { meta: { name: '@homelab/lint' }, rules: { 'no-import-cycle': noImportCycle } };

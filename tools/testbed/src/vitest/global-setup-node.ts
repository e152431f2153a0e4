// Vitest globalSetup for projects that opt into the node (`{ testbed: true, node: true }`): see global-setup.ts.
import type { TestProject } from 'vitest/node';
import { setupTestbed } from './global-setup.js';

export { teardown } from './global-setup.js';

export const setup = (project: TestProject): Promise<void> => setupTestbed(project, { node: true });

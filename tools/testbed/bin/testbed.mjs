#!/usr/bin/env node
// Runs the test-bed CLI from its TypeScript sources (tsx), so a fresh clone needs no build step.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');

#!/usr/bin/env -S node --conditions=@homelab/source
// Runs the ceremony CLI from its TypeScript sources (tsx); the @homelab/source condition resolves the workspace
// libraries to their sources too.
import { register } from 'tsx/esm/api';

// No compile cache: the ceremony leaves no files behind in TMPDIR (the "no temp files" guarantee).
process.env.TSX_DISABLE_CACHE = '1';
register();
await import('../src/main.ts');

import { defineConfig } from 'vitest/config';
export default defineConfig({ test: { environment: 'node', testTimeout: 60000, include: ['src/**/*.test.ts', 'test/*.test.ts'], exclude: ['**/*.it.test.ts', '**/node_modules/**'] }, resolve: { conditions: ['@homelab/source'] }, ssr: { resolve: { conditions: ['@homelab/source'] } } });

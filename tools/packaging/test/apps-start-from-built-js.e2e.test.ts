// Issue 26 item 1: the apps start from their built JS — `npm start` is `node dist/main.js`, no tsx and no source
// condition at run time. On Node 20 a .ts file cannot be loaded at all, so a start that still reached a TypeScript
// source (the app's or a library's) fails here.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanEnv } from '../src/index.js';

const root = resolve(import.meta.dirname, '../../..');

describe('apps start from built JS', () => {
  it.each(['controller', 'nsd', 'ns-daemon'])(
    'npm start of %s runs dist/main.js: --help prints the usage, exit 0',
    (app) => {
      const dir = join(root, 'apps', app);
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { scripts: { start: string } };
      expect(manifest.scripts.start).toBe('node dist/main.js');
      const r = spawnSync('npm', ['start', '-s', '--', '--help'], {
        cwd: dir,
        env: { ...cleanEnv(), NODE_OPTIONS: '' },
        encoding: 'utf8',
      });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^usage: ${app} `));
    },
  );
});

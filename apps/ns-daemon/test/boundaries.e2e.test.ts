// ns-daemon's process never loads PostgreSQL or Kubernetes code (design rule), and its configuration is explicit.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Either } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, readDeclarations } from '../src/config.js';

const dir = mkdtempSync(join(tmpdir(), 'ns-daemon-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('ns-daemon', () => {
  it('the running process has loaded better-sqlite3 and neither pg nor @kubernetes/client-node', async () => {
    const trace = join(dir, 'trace.txt');
    writeFileSync(trace, '');
    const child = spawn(
      process.execPath,
      ['--conditions=@homelab/source', '--import', './test/fixtures/trace.mjs', '--import', 'tsx', 'src/main.ts'],
      {
        cwd: join(import.meta.dirname, '..'),
        env: {
          ...process.env,
          TRACE_FILE: trace,
          NS_NSD_URL: 'http://127.0.0.1:9',
          NS_NSD_KEY: 'a'.repeat(64),
          NS_NETWORK: 'b'.repeat(32),
          NS_KEY_FILE: join(dir, 'k.pem'),
          NS_STATE_FILE: join(dir, 's.db'),
          NS_PORT: '0',
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    // the process is up once it listens (all static imports are loaded by then)
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (c: Buffer) => (c.toString().includes('"listening"') ? resolve() : undefined)),
    );
    child.kill('SIGTERM');
    await new Promise((r) => child.on('exit', r));
    const urls = readFileSync(trace, 'utf8').split('\n');
    expect({
      sqlite: urls.some((u) => u.includes('/node_modules/better-sqlite3/')),
      pg: urls.some((u) => /\/node_modules\/pg(-[a-z]+)?\//.test(u)),
      kube: urls.some((u) => u.includes('/node_modules/@kubernetes/')),
      postgresAdapter: urls.some((u) => u.includes('/adapter/postgresql/')),
    }).toEqual({ sqlite: true, pg: false, kube: false, postgresAdapter: false });
  });

  it('configuration: flags override environment; bad keys and networks are refused', () => {
    const env = { NS_NSD_KEY: 'c'.repeat(64), NS_NETWORK: 'd'.repeat(32), NS_PORT: '1234' };
    const c = loadConfig(env, ['--port', '999']);
    if ('help' in c) throw new Error('expected a configuration');
    expect([c.port, c.nsdUrl, c.stateFile]).toEqual([999, 'http://127.0.0.1:7400', 'ns-state.db']);
    expect(() => loadConfig({ ...env, NS_NSD_KEY: 'XYZ' }, [])).toThrow(/nsd-key/);
    expect(() => loadConfig({ ...env, NS_NETWORK: '12' }, [])).toThrow(/network/);
  });

  it('M6-22 declarations: a complete read, an unsupported behaviour refused, a failed read is never an empty report', () => {
    const good = join(dir, 'good.json');
    writeFileSync(
      good,
      JSON.stringify([
        { key: 'b', protocols: ['https'], backend_host: 'db.internal', backend_port: 443 },
        { key: 'a', protocols: ['udp'], backend_host: '10.0.0.1', backend_port: 53 },
      ]),
    );
    const r = readDeclarations(good);
    expect(Either.isRight(r) && r.right.map((d) => [d.declaration_key, d.protocols.join()])).toEqual([
      ['a', 'udp'],
      ['b', 'tcp'],
    ]);
    const sni = join(dir, 'sni.json');
    writeFileSync(
      sni,
      JSON.stringify([{ key: 'x', protocols: ['tcp'], backend_host: '10.0.0.1', backend_port: 1, sni: 'example.com' }]),
    );
    expect(Either.isLeft(readDeclarations(sni)) && Either.getLeft(readDeclarations(sni))).toEqual(
      expect.objectContaining({ _tag: 'Some' }),
    );
    expect(
      String(Either.isLeft(readDeclarations(sni)) ? (readDeclarations(sni) as Either.Left<string, never>).left : ''),
    ).toMatch(/unsupported-field/);
    expect(Either.isLeft(readDeclarations(join(dir, 'missing.json')))).toBe(true);
    expect(readDeclarations(null)).toEqual(Either.right([]));
  });
});
